// MemoryIndex: the embedded, in-process FingerprintIndex, lost on restart.
//
// A fixed number of shards, each a hash map under its own mutex, so that
// streams touching different fingerprints rarely contend. A batch takes each
// shard's lock only for the one fingerprint it works on.
//
// Thread safety: thread-safe.
#ifndef CHUNKD_INDEX_MEMORY_INDEX_H_
#define CHUNKD_INDEX_MEMORY_INDEX_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "index/fingerprint_index.h"

namespace chunkd::index {

class MemoryIndex final : public FingerprintIndex {
 public:
  MemoryIndex() = default;
  MemoryIndex(const MemoryIndex&) = delete;
  MemoryIndex& operator=(const MemoryIndex&) = delete;

  absl::string_view backend() const override { return "memory"; }

  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns, absl::Span<const std::string> fingerprints) override;
  absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries) override;
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints) override;

  // Number of entries over all namespaces (for tests and metrics).
  size_t size() const;

 private:
  struct Entry {
    uint32_t size = 0;
    uint64_t ref_count = 0;
  };
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<std::string, Entry> map;  // guarded by mu
  };
  static constexpr size_t kShards = 64;

  // "<ns>:<fingerprint>": unambiguous because a namespace has no ':'.
  static std::string Key(absl::string_view ns, absl::string_view fingerprint);
  Shard& ShardFor(const std::string& key);

  std::array<Shard, kShards> shards_;
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_MEMORY_INDEX_H_
