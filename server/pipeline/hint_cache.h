// HintCache: a server's cache of chunk content -> SHA-256 and next-chunk
// sizes, so that RapidCDC's hint chain runs without hashing or asking the
// index for content it has met before (docs/design.md, "The hint cache").
//
// The key is the keyed content hash of the bytes (fingerprint/content_key.h;
// docs/design.md, "The keyed content hash") plus the stream's scope
// (namespace and chunking parameters, keyed the same way): a cached SHA-256
// is as trustworthy as the SHA-256 of the bytes, and is used as is. Only
// values the server computed from the bytes themselves go in. An entry's
// next sizes certify what FPT asks the index: these bytes were once cut as
// a chunk under these parameters, not by a stream's end.
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
