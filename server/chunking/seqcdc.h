// SeqCDC: hashless content-defined chunking on monotonic byte sequences.
//
// Paper: S. Udayashankar, A. Baba, S. Al-Kiswany, "SeqCDC: Hashless
// Content-Defined Chunking for Data Deduplication", Middleware 2024.
// Reference: `find_cutpoint` in dedup/src/chunking/seq_chunking.cpp of
// UWASL/dedup-bench, which this cut function follows statement by statement.
//
// In increasing mode a step is a pair of neighbouring bytes (b[i-1], b[i]):
// "supporting" when b[i] > b[i-1], "opposing" when b[i] < b[i-1]; decreasing
// mode swaps the two. A chunk ends when SeqLength supporting steps follow each
// other; SkipTrigger opposing steps make the scan jump SkipSize bytes ahead
// (content-defined skipping, for data without such runs). The subtle points
// of the authors' code, all kept:
//   - Where the scan starts: the first step examined is (b[min-1], b[min]),
//     so byte min - 1 — inside the minimum region — is the first "previous"
//     byte, and no step before it counts.
//   - Equal bytes ("low entropy absorption"): a step with b[i] == b[i-1]
//     changes nothing — it neither extends nor breaks a run, nor counts as
//     opposing.
//   - A supporting step adds 1 to the run; an opposing step resets the run to
//     0 and adds 1 to the opposing counter. Supporting steps never reset the
//     opposing counter: it counts every opposing step since the chunk start
//     or the last jump, not consecutive ones.
//   - The cut: when the run reaches SeqLength at the step ending at byte i,
//     the chunk is [0, i) — the byte that completes the run starts the next
//     chunk. Hence a chunk is at least min bytes (i >= min).
//   - The jump: checked only when the run did not complete (an `else if`).
//     The scan position has already moved past byte i, then moves SkipSize
//     further and the opposing counter is reset; the run counter is not
//     reset. (A jump only fires on an opposing step, which has just set the
//     run to 0, so nothing else crosses it.) The next step examined is
//     (b[i+SkipSize], b[i+SkipSize+1]): its "previous" byte is one that was
//     skipped.
//   - The max cap: the scan covers size = min(avail, max) bytes, so the last
//     step examined ends at byte size - 1 and a cut happens at most at
//     max - 1; without one the chunk is `size` long — also when a jump lands
//     at or beyond `size`.
//   - End of the buffer: fewer than min bytes left form the last chunk as
//     they are; a tail with no cut is one chunk. (The authors' driver keeps
//     its buffer topped up to at least max bytes, so its cuts are those of
//     this function applied at each chunk start of the whole stream.)
//   - The authors keep both counters in uint16_t; the bounds in limits.h
//     (SeqLength <= 255, SkipTrigger <= 65535) keep our wider counters equal.
//   - avg_size is not used by the cut at all.
//
// Thread safety: immutable after construction.
#ifndef CHUNKD_CHUNKING_SEQCDC_H_
#define CHUNKD_CHUNKING_SEQCDC_H_

#include <cstddef>
#include <cstdint>

#include "chunkd/chunker.h"
#include "chunking/cutter.h"

namespace chunkd::chunking {

// SeqCDC's cut function, the authors' find_cutpoint statement by statement.
// Thread safety: immutable; Cut may run on any number of threads. No
// defaults: the parameters are the validated options'.
class SeqCdcCutter final : public Cutter {
 public:
  // REQUIRES: the parameters pass ValidateOptions (min >= 1, seq_length >= 1,
  // skip_trigger >= 1).
  SeqCdcCutter(SeqMode mode, uint32_t min_size, uint32_t max_size,
               uint32_t seq_length, uint32_t skip_trigger, uint32_t skip_size);

  // `context` is unused. *hash is always 0: SeqCDC has no hash.
  size_t Cut(const uint8_t* chunk_start, size_t avail, size_t context,
             uint64_t* hash) const override;
  size_t max_size() const override { return max_size_; }

 private:
  bool increasing_;
  size_t min_size_;
  size_t max_size_;
  uint32_t seq_length_;
  uint32_t skip_trigger_;
  size_t skip_size_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_SEQCDC_H_
