// FingerprintStage: the fingerprints of a stream's chunks, the second stage
// of StreamPipeline (docs/design.md, "Fingerprinting in groups").
//
// FingerprintChunks() fingerprints the chunks the boundaries cut, in
// parallel on the engine's executor, in groups of about kGroupBytes; each
// chunk keeps its place. With a hint cache that takes every chunk (Dedup
// with RapidCDC hints and sha256; hint_cache.h) it also keys them and
// caches their SHA-256. It is timed as the fingerprint stage.
//
// FingerprintViaCache() and FingerprintManyViaCache() are how the pipeline
// answers the hint follower: the fingerprint from the cache when it holds
// the chunk's content, hashed and cached otherwise. They are not timed: the
// follower times its steps itself.
//
// Defaults: sha256, no cache, the calling thread hashes everything.
// Thread safety: no state of its own beyond its options; calls may run
// concurrently on different chunks (the executor and the cache are shared
// with other streams and are thread-safe).
#ifndef CHUNKD_PIPELINE_FINGERPRINT_STAGE_H_
#define CHUNKD_PIPELINE_FINGERPRINT_STAGE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunking/executor.h"
#include "fingerprint/fingerprint.h"
#include "metrics/metrics.h"
#include "pipeline/hint_cache.h"
#include "pipeline/records.h"

namespace chunkd::pipeline {

class FingerprintStage {
 public:
  struct Options {
    fingerprint::Kind kind = fingerprint::Kind::kSha256;
    // Runs the groups of FingerprintChunks(); null: the calling thread.
    // Must outlive the stage.
    chunking::Executor* executor = nullptr;
    // The hint cache and the stream's scope in it; null: none. Must
    // outlive the stage. REQUIRES: kind sha256 when set.
    HintCache* cache = nullptr;
    HintCache::Scope scope{};
    // Whether FingerprintChunks() keys and caches every chunk (else the
    // cache is only for FingerprintViaCache and for the index stage's
    // duplicates).
    bool cache_all = false;
    // The fingerprint stage's counter; null: not measured.
    prometheus::Counter* stage = nullptr;
  };

  // Bytes of chunks one task of FingerprintChunks() hashes (about 0.1 ms of
  // SHA-256).
  static constexpr size_t kGroupBytes = size_t{256} << 10;

  explicit FingerprintStage(Options options) : options_(options) {}

  FingerprintStage(const FingerprintStage&) = delete;
  FingerprintStage& operator=(const FingerprintStage&) = delete;

  // Fingerprints the chunks of `cuts` that have none (with cache_all also
  // keys them and caches their SHA-256).
  void FingerprintChunks(absl::Span<CutChunk> cuts) const;

  // Whether the stage has a hint cache (FingerprintViaCache and KeyOf need
  // one).
  bool cached() const { return options_.cache != nullptr; }

  // The fingerprint of `bytes`, without the cache.
  std::string Digest(absl::string_view bytes) const {
    return fingerprint::Digest(options_.kind, bytes);
  }

  // The hint cache key of `bytes`. REQUIRES: cached().
  HintCache::Key KeyOf(absl::string_view bytes) const {
    return options_.cache->KeyOf(options_.scope, bytes);
  }

  // Sets *fingerprint to the SHA-256 of `bytes`, whose key is `key`: the
  // cache's entry when it holds one (returned, with its next sizes), else
  // hashed and cached (nullopt). REQUIRES: cached().
  std::optional<HintCache::Entry> FingerprintViaCache(
      const HintCache::Key& key, absl::string_view bytes,
      std::string* fingerprint) const;

  // The same for several chunks at once, the ones to hash hashed together
  // (sha256: several messages at once), on the calling thread: sets
  // (*fingerprints)[i] for chunks[i] and (*hits)[i] to the cache's entry of
  // keys[i] if it had one. Without a cache (`keys` empty) every chunk is
  // hashed and *hits holds nullopt.
  void FingerprintManyViaCache(
      absl::Span<const absl::string_view> chunks,
      absl::Span<const HintCache::Key> keys,
      std::vector<std::string>* fingerprints,
      std::vector<std::optional<HintCache::Entry>>* hits) const;

 private:
  // Fingerprints (and with cache_all, keys and caches) the chunks of `cuts`
  // without a fingerprint, together (sha256 hashes several at once).
  void FingerprintGroup(absl::Span<CutChunk> cuts) const;

  const Options options_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_FINGERPRINT_STAGE_H_
