// HintCache: takes SHA-256 off the critical path of RapidCDC's hint chain.
//
// Following hints is a chain: the next candidates come from the index entry
// of the chunk just accepted, so each step needs that chunk's fingerprint
// before the next can start, and SHA-256 (about 2 GB/s per core, one message
// at a time) would make the chain slower than cutting every byte. The cache
// remembers, per server, which SHA-256 a chunk's content had. Its key is a
// keyed hash of the bytes, AES-128-GMAC under a random key drawn when the
// server starts and never shown to anyone (fingerprint/content_key.h), plus
// the stream's scope (namespace and chunking parameters, keyed the same
// way). GMAC is a universal hash: for two different contents of at most n
// 16-byte blocks, chosen by someone who does not know the key, the chance
// that their keys are equal is at most (n + 1) / 2^128, about 2^-118 for
// 16 KiB chunks. So a cached SHA-256 is as trustworthy as the SHA-256 of
// the bytes themselves, and the chain uses it as is, at GMAC's speed
// (XXH3, the key before, is fast but anyone can build two contents with one
// XXH3 hash, so every cached value had to be hashed again to be checked).
// Only values the server computed from the bytes themselves go in.
//
// An entry may also hold the chunk's next-chunk sizes, as the index has them
// or as this server learned them (the chunk was cut under the scope's
// parameters and something followed it): what FPT asks the index for, so
// that a run of cached duplicates needs no index round trip per chunk. They
// certify the same fact as the index's hints do: these bytes were once cut
// as a chunk under these parameters, not by a stream's end.
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
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fingerprint/content_key.h"

namespace chunkd::pipeline {

class HintCache {
 public:
  using Sha256 = std::array<uint8_t, 32>;
  // What one cached chunk costs, about: its map slot (key 32 bytes, value
  // 52) at a load between 7/16 and 7/8 (129 to 226 bytes with the control
  // byte), and the FIFO's copy of the key (32).
  static constexpr size_t kBytesPerEntry = 176;
  // Next sizes kept per entry, most recent first.
  static constexpr size_t kMaxSizes = 4;
  struct Entry {
    Sha256 sha256;
    std::array<uint32_t, kMaxSizes> sizes;
    uint8_t num_sizes = 0;
  };

  // A cache of at most `capacity` entries (0: a cache that holds nothing),
  // keyed with `keyer` (null: a random key).
  explicit HintCache(size_t capacity,
                     std::unique_ptr<fingerprint::ContentKeyer> keyer = nullptr);

  HintCache(const HintCache&) = delete;
  HintCache& operator=(const HintCache&) = delete;

  // The scope a stream's chunks are cached under: its namespace and
  // chunking parameters (HintParamsKey), keyed like the contents.
  using Scope = fingerprint::ContentKey;
  Scope ScopeOf(absl::string_view ns, absl::string_view params_key) const;

  // The key of `bytes` in `scope`.
  struct Key {
    Scope scope{};
    fingerprint::ContentKey content{};
    bool operator==(const Key& o) const {
      return scope == o.scope && content == o.content;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.scope, k.content);
    }
  };
  Key KeyOf(const Scope& scope, absl::string_view bytes) const {
    return {scope, keyer_->Of(bytes)};
  }

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
    return shards_[(key.content[0] ^ key.scope[0]) % kShards];
  }

  std::unique_ptr<fingerprint::ContentKeyer> keyer_;
  size_t capacity_;
  size_t per_shard_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_HINT_CACHE_H_
