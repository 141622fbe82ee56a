// HintFollower: Dedup's boundaries with RapidCDC next-chunk hints (fastcdc
// only), falling back to the engine's chunker. docs/design.md, "RapidCDC
// hints in Dedup" and its subsections, describes the modes: the chunker
// (fed in slices that start short and double up to its window) until the
// last chunk of a slice is a duplicate; the hints, tried with the chosen
// acceptance test (HintTest), one at a time or a whole run at once
// (FollowRun); after a run of accepted hints, the reference cutter one chunk
// at a time until the hints resume or kMaxMisses chunks in a row had none.
// With FF+RWT+FPT the chunks are exactly those of the chunker alone.
//
// The follower only finds boundaries. It hands every chunk to the sink,
// with the fingerprint when it had to know it, and asks its HintSource (the
// StreamPipeline) for fingerprints, for hints and whether the last chunk
// handed on is a duplicate; it never calls the fingerprint or index stages
// nor commits anything itself.
//
// Defaults: FF+RWT+FPT, stage times not measured.
// Thread safety: not thread-safe; one call at a time.
#ifndef CHUNKD_PIPELINE_HINT_FOLLOWER_H_
#define CHUNKD_PIPELINE_HINT_FOLLOWER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/fastcdc_boundary.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/boundaries.h"
#include "pipeline/chunker_boundaries.h"
#include "pipeline/hint_cache.h"
#include "pipeline/rapid_cdc.h"
#include "pipeline/retained_input.h"

namespace chunkd::pipeline {

// What the hint follower asks of the pipeline it cuts for. Following hints
// is a chain: the next candidates are the hints of the chunk just accepted,
// so the follower needs the fingerprints and hints of its chunks before it
// hands them on.
class HintSource {
 public:
  virtual ~HintSource() = default;

  // Whether there is a hint cache (hint_cache.h): then the follower keys
  // the chunks it finds.
  virtual bool cached() const = 0;

  // The hint cache key of `bytes`. REQUIRES: cached().
  virtual HintCache::Key KeyOf(absl::string_view bytes) const = 0;

  // Sets *fingerprint to the fingerprint of `bytes`. With its cache `key`
  // (REQUIRES: cached()) the cache's entry when it holds one (returned,
  // with its next sizes), else hashed and cached (nullopt); with a null
  // `key` hashed (nullopt).
  virtual std::optional<HintCache::Entry> FingerprintOf(
      absl::string_view bytes, const HintCache::Key* key,
      std::string* fingerprint) = 0;

  // The same for several chunks at once, those to hash hashed together:
  // sets (*fingerprints)[i] for chunks[i] and (*hits)[i] to the cache's
  // entry of keys[i] if it had one. `keys` is empty (no cache: every chunk
  // hashed) or holds one key per chunk.
  virtual void FingerprintsOf(
      absl::Span<const absl::string_view> chunks,
      absl::Span<const HintCache::Key> keys,
      std::vector<std::string>* fingerprints,
      std::vector<std::optional<HintCache::Entry>>* hits) = 0;

  // The hints the index holds for `fingerprint`; with a `key`, non-empty
  // sizes are also put in the cache's entry of that key.
  virtual absl::StatusOr<index::NextHints> NextHintsOf(
      const std::string& fingerprint, const HintCache::Key* key) = 0;
  // The same for several fingerprints in one call; `keys` is empty or has
  // one key per fingerprint.
  virtual absl::StatusOr<std::vector<index::NextHints>> NextHintsOf(
      absl::Span<const std::string> fingerprints,
      absl::Span<const HintCache::Key> keys) = 0;

  // The fingerprint of the last chunk handed on when the index held it
  // before (a duplicate); nullopt when it is new or none was handed on.
  // The answer needs that chunk in the index: the source commits what
  // waits first.
  virtual absl::StatusOr<std::optional<std::string>>
  LastChunkIfDuplicate() = 0;
};

class HintFollower final : public Boundaries {
 public:
  struct Options {
    // REQUIRES: fastcdc.
    chunking::ChunkerOptions chunking;
    // The chunker's engine (its executor must outlive the follower).
    chunking::EngineOptions engine;
    // REQUIRES: not kOff.
    HintTest test = HintTest::kFFRWTFPT;
    // Where the time of each stage goes; null: not measured.
    const metrics::StageCounters* stages = nullptr;
  };

  // After this many chunks in a row without hints the data is new.
  static constexpr size_t kMaxMisses = 16;

  // Asks `source` (which must receive the chunks CutChunks hands on, and
  // whose index stage must learn hints) for fingerprints and hints, counts
  // hints, cache hits and chunk_seconds in *totals; both must outlive the
  // follower. Errors as StreamChunker::Create.
  static absl::StatusOr<std::unique_ptr<HintFollower>> Create(
      Options options, HintSource* source, StreamTotals* totals);

  absl::Status CutChunks(absl::string_view piece, bool at_end,
                         ChunkSink* sink) override;

 private:
  enum class Mode { kChunker, kHints, kSequential };
  // A chunk the follower found at input_start_: its fingerprint, its hint
  // cache key (with a cache), and its own hints when known.
  struct FoundChunk {
    std::string fingerprint;
    HintCache::Key key;
    std::vector<uint32_t> next;
    std::vector<uint32_t> run;  // the run that goes with next[0]
    bool next_known = false;
  };

  HintFollower(Options options, std::unique_ptr<chunking::Cutter> cutter,
               HintSource* source, StreamTotals* totals);
  // Moves the stream on by `piece` (and to its end when `at_end`),
  // switching between the modes as often as the data calls for.
  absl::Status Advance(absl::string_view piece, bool at_end, ChunkSink* sink);
  // A new chunker for the stream from input_start_ on.
  absl::Status StartChunker();
  // Chunker mode: feeds `piece` in slices; switches to hints when a slice's
  // last chunk is a duplicate (then *rest holds the part of `piece` the
  // chunker did not take).
  absl::Status FeedChunker(absl::string_view piece, bool at_end,
                           ChunkSink* sink, absl::string_view* rest);
  // Chunker mode, after a slice that cut chunks: when the last one is a
  // duplicate, parks the chunker and switches to hints.
  absl::Status FollowIfDuplicate();
  // Hints mode: takes chunks from hints while a test accepts one. Sets
  // *fall_back when no candidate passed; returns with it false when more
  // bytes are needed or the stream is done.
  absl::Status FollowHints(bool at_end, ChunkSink* sink, bool* fall_back);
  // FF+RWT+FPT with a run: takes the chunks of the first candidate and its
  // run that pass both tests, hashed together, and sets *took when it took
  // any or rejected the first candidate (otherwise, e.g. when fewer than
  // two ends pass RWT, the candidates are left to the one-by-one path).
  absl::Status FollowRun(absl::string_view bytes, bool at_end,
                         ChunkSink* sink, bool* took);
  // The chunks at the start of `bytes` the first candidate and its run
  // suggest, in order, up to the first whose end fails RWT (or lacks the
  // bytes to test); their sizes' hint values in *hints.
  size_t RunChunks(absl::string_view bytes, bool at_end,
                   absl::string_view* chunks, uint32_t* hints) const;
  // Fills found[0..count) for the run's chunks: their fingerprints (hashed
  // together, or from the cache) and their hints (from the cache, else from
  // the index in one call); hits[i] says whether the cache held chunks[i].
  absl::Status IdentifyRun(const absl::string_view* chunks, size_t count,
                           FoundChunk* found, bool* hits);
  // Moves past an accepted chunk of `size` bytes, found by a hint; its hints
  // become the candidates.
  absl::Status AcceptHinted(size_t size, FoundChunk* found, ChunkSink* sink);
  // Whether the test accepts `candidate` at the start of `bytes`; if so
  // fills *found (with FPT, or from the cache, its hints).
  absl::StatusOr<bool> TryCandidate(uint32_t candidate, absl::string_view bytes,
                                    bool at_end, FoundChunk* found);
  // The acceptance test alone.
  bool PassesTest(uint32_t candidate, absl::string_view bytes,
                  bool at_end) const;
  // Sequential mode: cuts chunks one by one until one has hints (mode
  // becomes kHints), kMaxMisses in a row had none (kChunker), or more bytes
  // are needed.
  absl::Status CutSequential(bool at_end, ChunkSink* sink);
  // Fills *found for a chunk the reference cutter cut; its hints unless the
  // stream's end cut it (`end_cut`).
  absl::Status Identify(absl::string_view chunk, bool end_cut,
                        FoundChunk* found);
  // Hands the chunk of `size` bytes at input_start_ to the sink and moves
  // past it.
  absl::Status EmitChunk(size_t size, FoundChunk* found, bool learnable,
                         ChunkSink* sink);

  const Options options_;
  HintSource* const source_;
  StreamTotals* const totals_;
  prometheus::Counter* const chunk_stage_;
  prometheus::Counter* const fingerprint_stage_;
  const std::unique_ptr<chunking::Cutter> cutter_;  // sequential mode
  const chunking::FastCdcBoundary boundary_;        // RWT

  // In kChunker mode chunker_ cuts; otherwise the follower cuts from
  // input_start_ the bytes input_.view(), following the candidates (the
  // hints of the chunk before, whose fingerprint is hint_fp_) or with
  // cutter_.
  Mode mode_ = Mode::kChunker;
  std::unique_ptr<ChunkerBoundaries> chunker_;
  // In kHints mode until a hint is accepted: the chunker that found the
  // duplicate, which holds the first parked_pending_ bytes of input_.
  std::unique_ptr<ChunkerBoundaries> parked_;
  size_t parked_pending_ = 0;
  size_t slice_ = 0;  // bytes fed to the chunker at once (0: not yet set)
  RetainedInput input_;
  uint64_t input_start_ = 0;
  std::string hint_fp_;
  std::vector<uint32_t> candidates_;
  std::vector<uint32_t> run_;  // what followed candidates_[0] last time
  bool candidates_known_ = false;
  size_t next_candidate_ = 0;
  bool run_accepted_ = false;  // a hint was accepted since the chunker left
  size_t sequential_misses_ = 0;
  CutChunk emitted_;  // what EmitChunk() gives the sink
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_HINT_FOLLOWER_H_
