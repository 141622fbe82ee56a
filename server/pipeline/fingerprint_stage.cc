#include "pipeline/fingerprint_stage.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "pipeline/stage_clock.h"

namespace chunkd::pipeline {

void FingerprintStage::FingerprintChunks(absl::Span<CutChunk> cuts) const {
  if (std::all_of(cuts.begin(), cuts.end(), [](const CutChunk& cut) {
        return !cut.fingerprint.empty();
      })) {
    return;  // the hint follower's chunks
  }
  // Groups of about kGroupBytes of chunks to fingerprint.
  std::vector<size_t> group_start = {0};
  size_t group_bytes = 0;
  for (size_t i = 0; i < cuts.size(); ++i) {
    if (!cuts[i].fingerprint.empty()) continue;
    group_bytes += cuts[i].bytes.size();
    if (group_bytes >= kGroupBytes && i + 1 < cuts.size()) {
      group_start.push_back(i + 1);
      group_bytes = 0;
    }
  }
  group_start.push_back(cuts.size());
  Stopwatch watch(nullptr, options_.stage);
  chunking::RunParallel(
      options_.executor, group_start.size() - 1, [&](size_t g) {
        FingerprintGroup(
            cuts.subspan(group_start[g], group_start[g + 1] - group_start[g]));
      });
}

void FingerprintStage::FingerprintGroup(absl::Span<CutChunk> cuts) const {
  std::vector<absl::string_view> data;
  data.reserve(cuts.size());
  for (const CutChunk& cut : cuts) {
    if (cut.fingerprint.empty()) data.push_back(cut.bytes);
  }
  std::vector<std::string> digests =
      fingerprint::DigestMany(options_.kind, data);
  const bool cache_all = options_.cache != nullptr && options_.cache_all;
  size_t d = 0;
  for (CutChunk& cut : cuts) {
    if (!cut.fingerprint.empty()) continue;
    cut.fingerprint = std::move(digests[d++]);
    if (!cache_all) continue;
    cut.key = options_.cache->KeyOf(options_.scope, cut.bytes);
    cut.keyed = true;
    options_.cache->Put(cut.key, cut.fingerprint);
  }
}

std::optional<HintCache::Entry> FingerprintStage::FingerprintViaCache(
    const HintCache::Key& key, absl::string_view bytes,
    std::string* fingerprint) const {
  std::optional<HintCache::Entry> hit = options_.cache->Get(key);
  if (hit.has_value()) {
    fingerprint->assign(reinterpret_cast<const char*>(hit->sha256.data()),
                        hit->sha256.size());
  } else {
    *fingerprint = Digest(bytes);
    options_.cache->Put(key, *fingerprint);
  }
  return hit;
}

void FingerprintStage::FingerprintManyViaCache(
    absl::Span<const absl::string_view> chunks,
    absl::Span<const HintCache::Key> keys,
    std::vector<std::string>* fingerprints,
    std::vector<std::optional<HintCache::Entry>>* hits) const {
  fingerprints->assign(chunks.size(), std::string());
  hits->assign(chunks.size(), std::nullopt);
  std::vector<absl::string_view> misses;
  std::vector<size_t> missed;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (!keys.empty()) (*hits)[i] = options_.cache->Get(keys[i]);
    const std::optional<HintCache::Entry>& hit = (*hits)[i];
    if (hit.has_value()) {
      (*fingerprints)[i].assign(
          reinterpret_cast<const char*>(hit->sha256.data()),
          hit->sha256.size());
    } else {
      misses.push_back(chunks[i]);
      missed.push_back(i);
    }
  }
  std::vector<std::string> digests =
      fingerprint::DigestMany(options_.kind, misses);
  for (size_t m = 0; m < missed.size(); ++m) {
    const size_t i = missed[m];
    if (!keys.empty()) options_.cache->Put(keys[i], digests[m]);
    (*fingerprints)[i] = std::move(digests[m]);
  }
}

}  // namespace chunkd::pipeline
