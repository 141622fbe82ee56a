// HintCache: takes SHA-256 off the critical path of RapidCDC's hint chain.
//
// Following hints is a chain: the next candidates come from the index entry
// of the chunk just accepted, so each step needs that chunk's fingerprint
// before the next can start. With SHA-256 (about 2 GB/s on one core, one
// message at a time) the chain would hash the whole duplicate run on one
// core while the others idle. The cache remembers, per server, which SHA-256
// a chunk's content had: its key is a fast 128-bit hash (XXH3) of the bytes
// plus the stream's scope (namespace, chunking parameters), its value the
// SHA-256. On a hit the chain goes on with that claimed fingerprint at XXH3
// speed, and the pipeline hashes the run's chunks with SHA-256 afterwards,
// in parallel, and checks every claim. A claim that does not hold (only two
// different contents with equal XXH3 hashes can cause one) makes the
// pipeline take its decisions back from that chunk on, with the real
// fingerprint (StreamPipeline), so neither the records nor the boundaries
// ever depend on the cache: it only changes how fast they come.
//
// An entry may also hold the chunk's next-chunk sizes, as the index has them
// or as this server learned them (the chunk was cut under the scope's
// parameters and something followed it): what FPT asks the index for, so
// that a run of cached duplicates needs no index round trip per chunk. They
// certify the same fact as the index's hints do (these bytes were once cut
// as a chunk under these parameters, not by a stream's end) and only ever
// serve a chunk whose SHA-256 claim is then checked.
//
// Bounded: at most `capacity` entries; the oldest entry of a shard makes
// room for a new one (FIFO). About kBytesPerEntry bytes each.
//
// Thread safety: thread-safe; one cache serves every stream of a server.
#ifndef CHUNKD_PIPELINE_HINT_CACHE_H_
#define CHUNKD_PIPELINE_HINT_CACHE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace chunkd::pipeline {

class HintCache {
 public:
  using Sha256 = std::array<uint8_t, 32>;
  // What one cached chunk costs: key and value, the map's slot and control
  // byte at its maximum load, and the FIFO slot.
  static constexpr size_t kBytesPerEntry = 160;
  // Next sizes kept per entry, most recent first.
  static constexpr size_t kMaxSizes = 4;
  struct Entry {
    Sha256 sha256;
    std::array<uint32_t, kMaxSizes> sizes;
    uint8_t num_sizes = 0;
  };

  // A cache of at most `capacity` entries (0: a cache that holds nothing).
  explicit HintCache(size_t capacity);

  HintCache(const HintCache&) = delete;
  HintCache& operator=(const HintCache&) = delete;

  // The scope a stream's chunks are cached under: its namespace and
  // chunking parameters (HintParamsKey).
  static uint64_t Scope(absl::string_view ns, absl::string_view params_key);

  // The key of `bytes` in `scope` (hashes the bytes with XXH3-128).
  struct Key {
    uint64_t scope = 0;
    uint64_t lo = 0;
    uint64_t hi = 0;
    bool operator==(const Key& o) const {
      return scope == o.scope && lo == o.lo && hi == o.hi;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.scope, k.lo, k.hi);
    }
  };
  static Key KeyOf(uint64_t scope, absl::string_view bytes);

  // What the cache holds for `key`, if anything.
  std::optional<Entry> Get(const Key& key) const;

  // Remembers `sha256` (32 bytes) for `key`; a different SHA-256 than the
  // one held drops the entry's sizes.
  void Put(const Key& key, absl::string_view sha256);

  // The entry's next sizes become `sizes` (as the index returned them; the
  // first kMaxSizes). Nothing when the cache does not hold `key`.
  void SetSizes(const Key& key, absl::Span<const uint32_t> sizes);

  // `size` followed the chunk of `key`: moves it to the front of the
  // entry's sizes (as the index's most-recently-used list does).
  void Learn(const Key& key, uint32_t size);

  size_t capacity() const { return capacity_; }
  size_t size() const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<Key, Entry> map;
    std::vector<Key> fifo;  // ring of the keys in insertion order
    size_t next = 0;        // where the next key goes in fifo
  };
  // Runs fn(entry) under the shard's lock when the cache holds `key`.
  template <typename Fn>
  void UpdateEntry(const Key& key, Fn fn);
  Shard& ShardOf(const Key& key) const {
    return shards_[(key.lo ^ key.scope) % kShards];
  }

  size_t capacity_;
  size_t per_shard_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_HINT_CACHE_H_
