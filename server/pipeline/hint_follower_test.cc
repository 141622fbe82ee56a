#include "pipeline/hint_follower.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pipeline/fingerprint_stage.h"
#include "pipeline/index_stage.h"
#include "index/memory_index.h"
#include "workload/datagen.h"

namespace chunkd::pipeline {
namespace {

chunking::ChunkerOptions Params() {
  chunking::ChunkerOptions o =
      chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  o.min_size = 1024;
  o.avg_size = 4096;
  o.max_size = 16384;
  o.normalization_level = 2;
  return o;
}

// The stages after the boundaries, wired as StreamPipeline wires them,
// committing when the follower asks and at the end of every call; counts
// the chunks that came fingerprinted (cut by the follower itself) and those
// that did not (cut by its chunker).
class Stages final : public ChunkSink, public HintSource {
 public:
  Stages(FingerprintStage* fingerprints, IndexStage* index)
      : fingerprints_(fingerprints), index_(index) {}
  absl::Status AcceptChunks(absl::Span<CutChunk> chunks) override {
    for (const CutChunk& c : chunks) {
      ++(c.fingerprint.empty() ? by_chunker : by_follower);
    }
    fingerprints_->FingerprintChunks(chunks);
    index_->Enqueue(chunks);
    return absl::OkStatus();
  }
  bool cached() const override { return fingerprints_->cached(); }
  HintCache::Key KeyOf(absl::string_view bytes) const override {
    return fingerprints_->KeyOf(bytes);
  }
  std::optional<HintCache::Entry> FingerprintOf(
      absl::string_view bytes, const HintCache::Key* key,
      std::string* fingerprint) override {
    if (key != nullptr) {
      return fingerprints_->FingerprintViaCache(*key, bytes, fingerprint);
    }
    *fingerprint = fingerprints_->Digest(bytes);
    return std::nullopt;
  }
  void FingerprintsOf(
      absl::Span<const absl::string_view> chunks,
      absl::Span<const HintCache::Key> keys,
      std::vector<std::string>* fingerprints,
      std::vector<std::optional<HintCache::Entry>>* hits) override {
    fingerprints_->FingerprintManyViaCache(chunks, keys, fingerprints, hits);
  }
  absl::StatusOr<index::NextHints> NextHintsOf(
      const std::string& fingerprint, const HintCache::Key* key) override {
    return index_->NextHints(fingerprint, key);
  }
  absl::StatusOr<std::vector<index::NextHints>> NextHintsOf(
      absl::Span<const std::string> fingerprints,
      absl::Span<const HintCache::Key> keys) override {
    return index_->NextHints(fingerprints, keys);
  }
  absl::StatusOr<std::optional<std::string>> LastChunkIfDuplicate() override {
    ++questions;
    absl::Status status = Commit();
    if (!status.ok()) return status;
    if (index_->committed() == 0 || index_->last_is_new()) return std::nullopt;
    return index_->last_fingerprint();
  }
  absl::Status Commit() { return index_->Commit(&records); }

  std::vector<ChunkRecord> records;
  size_t by_chunker = 0;
  size_t by_follower = 0;
  size_t questions = 0;  // of LastChunkIfDuplicate

 private:
  FingerprintStage* fingerprints_;
  IndexStage* index_;
};

struct Stream {
  std::vector<ChunkRecord> records;
  StreamTotals totals;
  size_t by_chunker = 0;
  size_t by_follower = 0;
  size_t questions = 0;
};

// One stream of `data` in pieces of `piece` bytes, through a follower; the
// end comes with the last piece when `end_with_last`, else alone.
Stream Follow(index::FingerprintIndex* idx, const std::vector<uint8_t>& data,
              size_t piece, HintCache* cache = nullptr,
              bool end_with_last = false) {
  Stream run;
  const std::string params_key = HintParamsKey(Params());
  const HintCache::Scope scope =
      cache != nullptr ? cache->ScopeOf("ns", params_key) : HintCache::Scope{};
  FingerprintStage::Options f;
  f.cache = cache;
  f.scope = scope;
  FingerprintStage fingerprints(f);
  IndexStage::Options i;
  i.index = idx;
  i.ns = "ns";
  i.params_key = params_key;
  i.cache = cache;
  i.scope = scope;
  IndexStage index(i, &run.totals);
  Stages stages(&fingerprints, &index);
  HintFollower::Options o;
  o.chunking = Params();
  o.engine.window_size = 128 << 10;
  auto follower = HintFollower::Create(o, &stages, &run.totals);
  EXPECT_TRUE(follower.ok()) << follower.status();
  const absl::string_view all(reinterpret_cast<const char*>(data.data()),
                              data.size());
  for (size_t at = 0; at < all.size(); at += piece) {
    const bool last = at + piece >= all.size();
    const absl::string_view part = all.substr(at, piece);
    EXPECT_TRUE(
        (*follower)->CutChunks(part, end_with_last && last, &stages).ok());
    EXPECT_TRUE(stages.Commit().ok());
  }
  if (!end_with_last) {
    EXPECT_TRUE(
        (*follower)->CutChunks(absl::string_view(), true, &stages).ok());
  }
  index.EndOfStream();
  EXPECT_TRUE(stages.Commit().ok());
  run.records = std::move(stages.records);
  run.by_chunker = stages.by_chunker;
  run.by_follower = stages.by_follower;
  run.questions = stages.questions;
  return run;
}

// The records are the reference's chunks with their SHA-256.
void ExpectReference(const Stream& run, const std::vector<uint8_t>& data) {
  const auto ref = chunking::ReferenceChunks(Params(), data);
  ASSERT_EQ(run.records.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(run.records[i].offset, ref[i].offset) << i;
    ASSERT_EQ(run.records[i].length, ref[i].length) << i;
    const absl::string_view bytes(
        reinterpret_cast<const char*>(data.data()) + ref[i].offset,
        ref[i].length);
    ASSERT_EQ(run.records[i].fingerprint,
              fingerprint::Digest(fingerprint::Kind::kSha256, bytes))
        << i;
  }
}

workload::VersionedDataset Versions() {
  workload::VersionedOptions v;
  v.base_size = size_t{1} << 20;
  v.versions = 2;
  v.modifications = 10;
  v.seed = 7;
  return workload::GenerateVersioned(v);
}

// New data goes through the chunker; an edited version mostly through the
// hints, and the chunks are the reference's all the same.
TEST(HintFollowerTest, FollowsHintsThroughEditedVersionsExactly) {
  const workload::VersionedDataset data = Versions();
  index::MemoryIndex idx;
  const Stream base = Follow(&idx, data.versions[0], 65536);
  ExpectReference(base, data.versions[0]);
  EXPECT_EQ(base.totals.hints_accepted, 0u);
  EXPECT_EQ(base.by_follower, 0u);
  // New data: the follower asked after the chunker's slices, and followed
  // nothing.
  EXPECT_GT(base.questions, 0u);
  for (size_t v = 1; v < data.versions.size(); ++v) {
    const Stream run = Follow(&idx, data.versions[v], 65536);
    ExpectReference(run, data.versions[v]);
    EXPECT_GT(run.totals.hints_accepted, run.records.size() / 2) << v;
    EXPECT_GE(run.by_follower, run.totals.hints_accepted) << v;
    EXPECT_EQ(run.totals.hints_accepted + run.totals.hints_rejected,
              run.totals.hints_tried);
    EXPECT_GT(run.totals.hint_skipped_bytes, data.versions[v].size() / 2);
  }
}

// The stream's end may come with its last piece, however long.
TEST(HintFollowerTest, EndWithTheLastPieceIsExact) {
  const workload::VersionedDataset data = Versions();
  index::MemoryIndex idx;
  Follow(&idx, data.versions[0], 65536);
  for (size_t piece : {size_t{65536}, data.versions[1].size()}) {
    const Stream run =
        Follow(&idx, data.versions[1], piece, nullptr, /*end_with_last=*/true);
    ExpectReference(run, data.versions[1]);
    EXPECT_GT(run.totals.hints_accepted, run.records.size() / 2) << piece;
  }
}

// Duplicate data followed by new data: the hints run out and a chunker
// takes over, exactly where the reference would cut.
TEST(HintFollowerTest, HandsNewDataBackToTheChunker) {
  const workload::VersionedDataset data = Versions();
  index::MemoryIndex idx;
  Follow(&idx, data.versions[0], 1 << 20);
  std::vector<uint8_t> mixed = data.versions[0];
  const std::vector<uint8_t> fresh = workload::RandomBytes(1 << 20, 99);
  mixed.insert(mixed.end(), fresh.begin(), fresh.end());
  const Stream run = Follow(&idx, mixed, 100000);
  ExpectReference(run, mixed);
  EXPECT_GT(run.totals.hints_accepted, 0u);
  // The new megabyte (about 256 chunks) came from a chunker.
  EXPECT_GT(run.by_chunker, 200u);
  uint64_t new_bytes = 0;
  for (const ChunkRecord& r : run.records) new_bytes += r.is_new ? r.length : 0;
  EXPECT_GE(new_bytes, fresh.size());
  EXPECT_LT(new_bytes, fresh.size() + 2 * Params().max_size);
}

// With a hint cache the chain takes fingerprints from it.
TEST(HintFollowerTest, TakesFingerprintsFromTheCache) {
  const workload::VersionedDataset data = Versions();
  index::MemoryIndex idx;
  HintCache cache(1 << 14);
  Follow(&idx, data.versions[0], 65536, &cache);
  const Stream second = Follow(&idx, data.versions[0], 65536, &cache);
  ExpectReference(second, data.versions[0]);
  const Stream third = Follow(&idx, data.versions[0], 65536, &cache);
  ExpectReference(third, data.versions[0]);
  EXPECT_GT(third.totals.hints_accepted, 0u);
  EXPECT_GT(third.totals.cache_hits, third.totals.hints_accepted / 2);
  // Counted for every chunk whose test passed, even when FPT then refused
  // it.
  EXPECT_GE(third.totals.cache_hits + third.totals.cache_misses,
            third.totals.hints_accepted);
}

}  // namespace
}  // namespace chunkd::pipeline
