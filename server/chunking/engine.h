// Engine: the fast chunking engine behind FastChunks and StreamChunker — the
// two-stage parallel design of SS-CDC (Ni et al., SYSTOR 2019; docs/design.md,
// "The two-stage engine") plus a vectorized sequential scan for where
// skipping wins and the reference cutter itself, both parallelized by
// speculative segments.
//
// Three strategies, one answer. All return exactly ReferenceChunks(): stage 1
// is a kernel (kernels/kernels.h) that turns bytes into per-position
// predicate bitmaps, stage 2 turns bitmaps into cut points with the
// reference cutter's rules. Everything particular to an algorithm — its
// kernel, its selector, its reference cutter, its block sizes and its
// automatic strategy — is its driver (drivers/driver.h); the engine's code
// is the same for all of them and names none.
//
//   two-stage   A pipeline without rounds or barriers. The input ahead of
//               the bits computed so far is cut into segments on the word
//               grid (automatic: window_size / threads, shorter near the
//               input's end so that the threads finish together). Every
//               thread of the run — the caller and its Executor helpers —
//               loops: cut the chunks whose bits are complete (stage 2,
//               run by whichever thread gets there first), else claim the
//               next segment and compute its bitmaps (stage 1: a kernel is
//               a pure function of position, so each segment reads its own
//               left context), else wait for a segment another thread is
//               computing. So stage 2 of one segment overlaps stage 1 of
//               the next ones on the other threads, and no thread idles at
//               a barrier; only the last segment of a call can leave one
//               waiting. The bits live in a ring of words indexed by stream
//               position (the window slides without moving data); a
//               segment may be claimed only when its words fit in the ring
//               beside the ones stage 2 still reads — the chunk in
//               progress — which bounds stage 1 to window_size (at least
//               64 KiB) plus a segment ahead of it. Stage 2 stays one word
//               short of the segments being written. Helpers that start
//               late or never (a busy shared pool) cost nothing: every
//               thread can finish the run alone.
//   sequential  For each chunk, stage 1 runs on blocks starting at the first
//               position the algorithm examines — the chunk's min offset, or
//               where a SeqCDC jump lands — sized to where the cut is likely
//               (each algorithm's BlockSizes, in its driver), prefetched
//               together with the bytes that follow, until stage 2 finds
//               the cut. Bytes that FastCDC (min_size per chunk) and SeqCDC
//               (min_size, and every jump) skip are never read, which a full
//               stage-1 scan cannot avoid.
//   reference   The reference cutter (cutter.h), chunk after chunk: no
//               kernel. FastCDC's skips min_size and rolls the crate's
//               two-bytes-per-step loop in two interleaved lanes
//               (FastCdcCutter::CutTwoLanes, the same cuts as the crate's
//               loop), which no kernel's stage 1 beats.
//
// Speculative segments (sequential and reference with an executor). Every
// algorithm's next boundary is a function of the previous boundary and the
// stream's bytes alone (the cutter sees nothing else: FastCDC's hash and
// SeqCDC's counters restart at each chunk, crc32's window is stream-global).
// So a round of the final part of the input is cut into one segment per
// thread; segment 0 is cut from the true boundary, segment i > 0 from its
// own first byte as if it were a boundary — in parallel, each task on its own
// single-threaded helper engine. Then, sequentially, the true chunks are
// followed into segment i (cut one at a time on the calling thread) until one
// starts where a guessed chunk of segment i starts; from that chunk on the
// two sequences are the same, and segment i's guesses are taken as they are.
// On varied data the true chunks meet a guess within a chunk or two; where
// they never do (e.g. zeros, cut every max_size, when the segment start is
// not on that grid) the calling thread re-cuts the whole segment: slower, not
// different. Fixed-size chunking needs no guesses and runs sequentially.
//
// The automatic strategy (Strategy::kAuto) is the driver's AutoStrategy for
// the kernel set: the fastest as measured (docs/design.md, "Strategies",
// tabulates them). The kernel set, when EngineOptions gives none and
// CHUNKD_BACKEND is unset, is the algorithm's automatic kernel set on the
// executor's thread count (auto_kernel.h): the fastest of the kernel set x
// strategy pairs on this CPU, as calibrated once per process.
#ifndef CHUNKD_CHUNKING_ENGINE_H_
#define CHUNKD_CHUNKING_ENGINE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"
#include "chunking/drivers/driver.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {

// Cuts one stream's chunks as its EnginePlan says (the header comment above),
// with the algorithm's driver (drivers/driver.h) and the plan's
// kernel. Built by Create only, every setting resolved there (PlanEngine).
// Thread safety: not thread-safe — one stream, one thread at a time; it
// keeps that stream's bitmaps. The Executor runs parts of a call on other
// threads while the calling thread takes part and waits.
class Engine {
 public:
  // A view of part of the stream: data[0] is stream byte `offset`. The
  // engine reads up to 255 bytes before a chunk start (crc32's window), so a
  // caller keeps kContext bytes before the chunks it asks for unless data[0]
  // is the stream's first byte.
  struct Input {
    const uint8_t* data = nullptr;
    size_t size = 0;
    uint64_t offset = 0;
    bool at_end = false;  // the stream ends at data + size
  };

  // Errors as PlanEngine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const ChunkerOptions& options, const EngineOptions& engine);

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Appends to *out every chunk from data index `start` on whose cut is
  // final — at least final_size() bytes are available from its start, or
  // input.at_end — and returns the data index after the last one.
  // REQUIRES: input.offset == 0 or start >= kContext; calls for one stream
  // come with non-decreasing input.offset + start and unchanged stream bytes.
  size_t CutFinal(const Input& input, size_t start, std::vector<Chunk>* out);

  // Bytes from a chunk's start after which its cut is final: max_size
  // (fixed: avg_size).
  size_t final_size() const { return final_size_; }

  const EnginePlan& plan() const { return plan_; }

 private:
  // One pipelined two-stage run (engine.cc).
  struct Pipeline;

  // helpers share `driver`.
  Engine(std::shared_ptr<const AlgorithmDriver> driver, EnginePlan plan,
         const kernels::KernelSet* kernel, Executor* executor);

  bool HasFinalChunk(const Input& input, size_t start) const;
  // Cuts final chunks from `start` while their bits lie below `limit`.
  size_t SelectUpTo(const Input& input, size_t start, uint64_t limit,
                    std::vector<Chunk>* out);
  stage2::Cut Select(const Input& input, size_t start, size_t avail,
                     uint64_t hard_end);
  size_t CutFinalTwoStage(const Input& input, size_t start,
                          std::vector<Chunk>* out);
  size_t CutFinalSpeculative(const Input& input, size_t start,
                             std::vector<Chunk>* out);
  // Cuts the chunks that start in data[start, stop), all of them final, and
  // returns the end of the last one.
  size_t CutRange(const Input& input, size_t start, size_t stop,
                  std::vector<Chunk>* out);
  // Runs the kernel over data[begin, end) into out0, out1 (bitmaps relative
  // to begin; out1 is null for an algorithm with one bitmap).
  void Stage1(const uint8_t* data, size_t begin, size_t end, uint64_t* out0,
              uint64_t* out1) const;
  // Stage 1 of stream positions [begin, end) into the ring; begin on a word
  // boundary relative to origin_.
  void Stage1IntoRing(const Input& input, uint64_t begin, uint64_t end);
  void GrowRing(size_t words);
  // The pipeline's steps (engine.cc): claim the next segment if the ring
  // has room for it; run stage 2 if no other thread is; the loop of every
  // thread of a run.
  bool Claim(Pipeline& p, size_t* k, bool* exhausted) const;
  bool TrySelect(Pipeline& p);
  void PipelineWorker(Pipeline& p);

  // The algorithm; its two stages (null for fixed) and their bitmaps per
  // position (0 without).
  const std::shared_ptr<const AlgorithmDriver> driver_;
  const BitmapDriver* const stages_;
  const int bitmaps_;
  const size_t final_size_;
  const EnginePlan plan_;
  const kernels::KernelSet* const kernel_;
  Executor* const executor_;

  // Two-stage window: the bits of stream positions [lo_, covered_end_) in a
  // ring of words. Global word g holds positions [origin_ + 64 g,
  // origin_ + 64 g + 64) and lives in slot g & ring_mask_, so the window
  // slides without moving data; segments start and end on word boundaries
  // relative to origin_ (except at an input's end; the next call completes
  // that word first).
  bool window_valid_ = false;
  uint64_t origin_ = 0;
  uint64_t lo_ = 0;
  uint64_t covered_end_ = 0;
  uint64_t ring_mask_ = 0;  // ring size - 1, a power of two minus one
  std::array<std::vector<uint64_t>, kMaxBitmaps> ring_;

  // Sequential scan: the current block.
  ScanBlock block_;

  // Speculative segments: one single-threaded engine per task, and the
  // chunks each found.
  std::vector<std::unique_ptr<Engine>> helpers_;
  std::vector<std::vector<Chunk>> speculated_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_ENGINE_H_
