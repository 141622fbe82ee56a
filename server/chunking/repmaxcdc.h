// repmaxcdc: RepMaxCDC as Go module github.com/buildbarn/go-cdc v0.0.10
// implements it (REAPI's REP_MAX_CDC), byte-exact. Definition:
// docs/algorithms/repmaxcdc.md.
//
// In brief: W(q) is the Gear hash (FastCDC's unseeded table,
// h = (h << 1) + gear[byte]) of the 64 bytes ending at chunk byte q. A chunk
// that has at least 2 * min bytes left looks at the first min(avail,
// 2 * min + horizon) of them minus the last min, i.e. at lengths L in
// [min, n]; it takes the first L with the largest W(L - 1). When L < 2 * min
// that is the cut; otherwise the range shrinks to [min, L - min] and the
// choice repeats. Fewer than 2 * min bytes left are one chunk.
//
// How it is computed here: one pass over the positions q in [min - 1, n - 1]
// keeps the strict prefix maxima of W, and the repeated restriction walks
// them backwards — the first largest W of [min - 1, hi] is the last prefix
// maximum at or before hi, so the range is hashed once, not once per
// restriction. To bound memory whatever the data (a run of ever larger
// hashes would make every position a prefix maximum), the prefix maxima are
// kept per group of 64 positions: a group that holds one is kept as its
// largest W, and the walk hashes that group again to find where. A
// restriction ending inside a group hashes that group's positions up to its
// end (at most 64, plus 63 of warm-up). The two-stage selector
// (drivers/repmaxcdc_driver.cc) takes the same walk with the groups'
// maxima from stage 1.
//
// Thread safety: immutable after construction.
#ifndef CHUNKD_CHUNKING_REPMAXCDC_H_
#define CHUNKD_CHUNKING_REPMAXCDC_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "chunking/cutter.h"

namespace chunkd::chunking {

namespace repmaxcdc {

// Gear window: W(q) depends on chunk bytes [q - 63, q]; min >= 64 keeps it
// inside the chunk.
inline constexpr size_t kWindow = 64;

// A W and where it is: a chunk offset. A plain value.
struct Peak {
  uint64_t value = 0;
  size_t pos = 0;
};

// The first largest W over chunk offsets [lo, hi], hashed from the bytes.
// REQUIRES: 63 <= lo <= hi; chunk[lo - 63, hi] readable.
Peak ScanPeak(const uint8_t* chunk, size_t lo, size_t hi);

// The walk shared by the reference cutter and the two-stage selector. The
// candidate positions are [min - 1, n - 1] (lengths [min, n]); whole groups
// of 64 start at chunk offsets g0 + 64 k (g0 - (min - 1) < 64), and the
// positions before g0 are the head. `records` are the prefix maxima over the
// head and the whole groups that end before the group holding n - 1: the
// groups, in order, whose largest W is larger than every W before them, each
// as that W and the group's first position (the walk finds the first
// occurrence of the W in the group when it needs it). `head` is the head's
// peak when the head is not empty (has_head).
//
// A plain value of views: it holds pointers to `chunk` and `records`.
struct PeakWalk {
  const uint8_t* chunk = nullptr;
  size_t min_size = 0;
  size_t n = 0;
  size_t g0 = 0;
  bool has_head = false;
  Peak head;
  const std::vector<Peak>* records = nullptr;
};

// The chunk's length: the walk of `walk` (repmaxcdc.h, above).
// REQUIRES: n >= min_size >= 64; chunk[0, n) readable.
size_t CutFromPeaks(const PeakWalk& walk);

}  // namespace repmaxcdc

// The RepMaxCDC cut function. Thread safety: immutable; Cut may run on any
// number of threads. No defaults: the parameters are the validated options'.
class RepMaxCdcCutter final : public Cutter {
 public:
  // REQUIRES: the parameters pass ValidateOptions (min_size >= 64).
  RepMaxCdcCutter(uint32_t min_size, uint32_t horizon_size);

  // `context` is unused: the hash window lies inside the chunk.
  size_t Cut(const uint8_t* chunk_start, size_t avail, size_t context,
             uint64_t* hash) const override;
  // 2 * min_size - 1.
  size_t max_size() const override { return 2 * min_size_ - 1; }
  // 2 * min_size + horizon_size: the bytes one cut looks at.
  size_t final_size() const override { return 2 * min_size_ + horizon_size_; }

  size_t min_size() const { return min_size_; }
  size_t horizon_size() const { return horizon_size_; }

 private:
  size_t min_size_;
  size_t horizon_size_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_REPMAXCDC_H_
