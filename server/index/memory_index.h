// MemoryIndex: the embedded, in-process FingerprintIndex, lost on restart.
//
// A fixed number of shards, each a hash map under its own mutex, so that
// streams touching different fingerprints rarely contend. A batch takes each
// shard's lock only for the one fingerprint it works on.
//
// Write tokens: positions written with a WriteToken are remembered per
// (namespace, stream id) in a record with its own mutex, held for the whole
// batch, so a stream's retries serialize with each other but not with other
// streams. Records untouched for token_ttl are dropped.
//
// Thread safety: thread-safe.
#ifndef CHUNKD_INDEX_MEMORY_INDEX_H_
#define CHUNKD_INDEX_MEMORY_INDEX_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "index/fingerprint_index.h"

namespace chunkd::index {

class MemoryIndex final : public FingerprintIndex {
 public:
  // Uses options.next_sizes_length and options.token_ttl.
  // REQUIRES: 1 <= options.next_sizes_length <= kMaxNextSizesLength.
  explicit MemoryIndex(const IndexOptions& options);
  MemoryIndex() : MemoryIndex(IndexOptions()) {}
  MemoryIndex(const MemoryIndex&) = delete;
  MemoryIndex& operator=(const MemoryIndex&) = delete;

  absl::string_view backend() const override { return "memory"; }

  using FingerprintIndex::Insert;
  using FingerprintIndex::Release;

  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns,
      absl::Span<const std::string> fingerprints) override;
  absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries,
      const WriteToken* token) override;
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints,
      const WriteToken* token) override;
  absl::Status RecordNextSizes(absl::string_view ns,
                               absl::string_view params_key,
                               absl::Span<const NextSize> hints) override;
  absl::StatusOr<std::vector<std::vector<uint32_t>>> NextSizes(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const std::string> fingerprints) override;

  // Number of entries over all namespaces (for tests and metrics).
  size_t size() const;

 private:
  struct Entry {
    uint32_t size = 0;
    uint64_t ref_count = 0;
    // (params_key, sizes most recent first); a handful of keys at most.
    std::vector<std::pair<std::string, std::vector<uint32_t>>> next_sizes;
  };
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<std::string, Entry> map;  // guarded by mu
  };
  static constexpr size_t kShards = 64;

  // What one (namespace, stream id, operation) has written: position ->
  // the result returned then (InsertResult encoded as 2 * count + is_new).
  struct TokenRecord {
    std::mutex mu;
    absl::flat_hash_map<uint64_t, uint64_t> applied;  // guarded by mu
    absl::Time touched;                               // guarded by mu
  };

  // "<ns>:<fingerprint>": unambiguous because a namespace has no ':'.
  static std::string Key(absl::string_view ns, absl::string_view fingerprint);
  Shard& ShardFor(const std::string& key);

  InsertResult InsertOne(const std::string& key, uint32_t size);
  uint64_t ReleaseOne(const std::string& key);
  // The record of (ns, op, token->stream_id); drops expired records.
  std::shared_ptr<TokenRecord> Record(absl::string_view ns, char op,
                                      const WriteToken& token);

  const size_t next_sizes_length_;
  const absl::Duration token_ttl_;
  std::array<Shard, kShards> shards_;

  std::mutex tokens_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<TokenRecord>>
      tokens_;                   // guarded by tokens_mu_
  absl::Time last_token_sweep_;  // guarded by tokens_mu_
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_MEMORY_INDEX_H_
