// HintFollower: Dedup's boundaries with RapidCDC next-chunk hints (fastcdc
// only; rapid_cdc.h), falling back to the engine's chunker.
//
// Every pair of consecutive chunks teaches the index which size followed
// the first (IndexStage learns them). The follower starts with a
// ChunkerBoundaries, fed in slices (short at first, doubling up to its
// window) and committed slice by slice; when the chunker's last chunk is a
// duplicate it stops cutting and tries the sizes that followed that chunk
// before, with the chosen acceptance test (HintTest); each accepted size is
// a chunk nobody had to scan. When no size passes after a run of accepted
// ones (most likely an edit), the reference cutter cuts one chunk at a time,
// scanning only that chunk, and the index is asked for the hints of each,
// until one has hints (back to following them) or kMaxMisses in a row had
// none (new data: a new chunker takes over from there). When the first
// duplicate's sizes all fail, nothing was cut past the chunker, so the
// chunker that found the duplicate goes on where it stopped, with the
// bytes it has not seen: a duplicate that leads nowhere costs its tests,
// not a new chunker (whose buffers and short first slices cost more than
// the tests on data that is mostly new). With FF+RWT+FPT the chunks are
// exactly those of the chunker alone.
//
// Following hints is a chain: the next candidates are the hints of the
// chunk just accepted, so the follower fingerprints its chunks itself (with
// a hint cache from the cache when it holds their content; see
// FingerprintStage) and asks the index for hints between its commits. Its
// own chunks are committed when it returns and before a chunker takes over.
// With FF+RWT+FPT, when the first candidate comes with a run (the sizes
// that followed it last time; index::NextHints), the follower tests the
// whole run's ends first, then hashes the chunks that pass together (four
// SHA-256 lanes instead of one message at a time), asks the index for all
// their hints in one call, and accepts the chunks up to the first that has
// none (FollowRun). At most one size can pass both tests at a position (the
// one FastCDC cuts), so the order sizes are tried in changes no chunk.
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

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/fastcdc_boundary.h"
#include "metrics/metrics.h"
#include "pipeline/boundaries.h"
#include "pipeline/chunker_boundaries.h"
#include "pipeline/fingerprint_stage.h"
#include "pipeline/held_bytes.h"
#include "pipeline/hint_cache.h"
#include "pipeline/index_stage.h"
#include "pipeline/rapid_cdc.h"

namespace chunkd::pipeline {

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

  // Fingerprints with `fingerprints`, reads hints from and commits to
  // `index` (whose params key must be set), counts hints, cache hits and
  // chunk_seconds in *totals; all three must outlive the follower. Errors as
  // StreamChunker::Create.
  static absl::StatusOr<std::unique_ptr<HintFollower>> Create(
      Options options, FingerprintStage* fingerprints, IndexStage* index,
      StreamTotals* totals);

  absl::Status Cut(absl::string_view piece, bool at_end,
                   CutSink* sink) override;

 private:
  enum class Mode { kChunker, kHints, kSequential };
  // A chunk the follower found at held_start_: its fingerprint, its hint
  // cache key (with a cache), and its own hints when known.
  struct Found {
    std::string fingerprint;
    HintCache::Key key;
    std::vector<uint32_t> next;
    std::vector<uint32_t> run;  // the run that goes with next[0]
    bool next_known = false;
  };

  HintFollower(Options options, std::unique_ptr<chunking::Cutter> cutter,
               FingerprintStage* fingerprints, IndexStage* index,
               StreamTotals* totals);
  // Moves the stream on by `piece` (and to its end when `at_end`),
  // switching between the modes as often as the data calls for.
  absl::Status Advance(absl::string_view piece, bool at_end, CutSink* sink);
  // A new chunker for the stream from held_start_ on.
  absl::Status StartChunker();
  // Chunker mode: feeds `piece` in slices, each committed; switches to
  // hints when a slice's last chunk is a duplicate (then *rest holds the
  // part of `piece` the chunker did not take).
  absl::Status FeedChunker(absl::string_view piece, bool at_end, CutSink* sink,
                           absl::string_view* rest);
  // Hints mode: takes chunks from hints while a test accepts one. Sets
  // *fall_back when no candidate passed; returns with it false when more
  // bytes are needed or the stream is done.
  absl::Status FollowHints(bool at_end, CutSink* sink, bool* fall_back);
  // FF+RWT+FPT with a run: takes the chunks of the first candidate and its
  // run that pass both tests, hashed together, and sets *took when it took
  // any or rejected the first candidate (otherwise, e.g. when fewer than
  // two ends pass RWT, the candidates are left to the one-by-one path).
  absl::Status FollowRun(absl::string_view bytes, bool at_end, CutSink* sink,
                         bool* took);
  // The chunks at the start of `bytes` the first candidate and its run
  // suggest, in order, up to the first whose end fails RWT (or lacks the
  // bytes to test); their sizes' hint values in *hints.
  size_t RunChunks(absl::string_view bytes, bool at_end,
                   absl::string_view* chunks, uint32_t* hints) const;
  // Moves past an accepted chunk of `size` bytes, found by a hint; its hints
  // become the candidates.
  absl::Status TakeHinted(size_t size, Found* found, CutSink* sink);
  // Whether the test accepts `candidate` at the start of `bytes`; if so
  // fills *found (with FPT, or from the cache, its hints).
  absl::StatusOr<bool> Accept(uint32_t candidate, absl::string_view bytes,
                              bool at_end, Found* found);
  // The acceptance test alone.
  bool Passes(uint32_t candidate, absl::string_view bytes, bool at_end) const;
  // Sequential mode: cuts chunks one by one until one has hints (mode
  // becomes kHints), kMaxMisses in a row had none (kChunker), or more bytes
  // are needed.
  absl::Status CutSequential(bool at_end, CutSink* sink);
  // Fills *found for a chunk the reference cutter cut; its hints unless the
  // stream's end cut it (`end_cut`).
  absl::Status Look(absl::string_view chunk, bool end_cut, Found* found);
  // Hands the chunk of `size` bytes at held_start_ to the sink and moves
  // past it.
  absl::Status Hand(size_t size, Found* found, bool learnable, CutSink* sink);

  const Options options_;
  FingerprintStage* const fingerprints_;
  IndexStage* const index_;
  StreamTotals* const totals_;
  prometheus::Counter* const chunk_stage_;
  prometheus::Counter* const fingerprint_stage_;
  const std::unique_ptr<chunking::Cutter> cutter_;  // sequential mode
  const chunking::FastCdcBoundary boundary_;        // RWT

  // In kChunker mode chunker_ cuts; otherwise the follower cuts from
  // held_start_ the bytes held_.view(), following the candidates (the hints
  // of the chunk before, whose fingerprint is hint_fp_) or with cutter_.
  Mode mode_ = Mode::kChunker;
  std::unique_ptr<ChunkerBoundaries> chunker_;
  // In kHints mode until a hint is accepted: the chunker that found the
  // duplicate, which holds the first parked_pending_ bytes of held_.
  std::unique_ptr<ChunkerBoundaries> parked_;
  size_t parked_pending_ = 0;
  size_t slice_ = 0;  // bytes fed to the chunker at once (0: not yet set)
  HeldBytes held_;
  uint64_t held_start_ = 0;
  std::string hint_fp_;
  std::vector<uint32_t> candidates_;
  std::vector<uint32_t> run_;  // what followed candidates_[0] last time
  bool candidates_known_ = false;
  size_t next_candidate_ = 0;
  bool run_accepted_ = false;  // a hint was accepted since the chunker left
  size_t sequential_misses_ = 0;
  CutChunk cut_;  // what Hand() gives the sink
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_HINT_FOLLOWER_H_
