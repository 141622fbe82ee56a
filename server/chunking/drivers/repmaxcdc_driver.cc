// repmaxcdc in the engine (docs/algorithms/repmaxcdc.md, "In the engine").
//
// Stage 1 is not a bitmap: per group of 64 positions of the engine's word
// grid, the kernel writes the group's largest W (kernels/functions.h). Stage
// 2 takes the reference cutter's walk (repmaxcdc.h) with those groups: it
// hashes the head before the chunk's first whole group, the group of each
// new maximum it uses (to find where in the group it is) and, for each
// restriction, the part of the group where the restriction ends; in between
// it compares one word per 64 positions. The ring's words are read directly
// (WindowSource::words): they cannot be shifted like bits, and every group
// stage 2 reads lies on the grid.
//
// The sequential scan computes blocks that start wherever the selector asks,
// so its words would not be on one grid; with that source the selector is
// the reference cutter, and AutoStrategy never picks it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"
#include "chunking/fastcdc.h"
#include "chunking/kernels/kernels.h"
#include "chunking/repmaxcdc.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {
namespace {

using repmaxcdc::Peak;
using repmaxcdc::PeakWalk;

// The reference cutter of `options` (REQUIRES: valid options): the
// driver's sequential-only path, and MakeCutter's.
RepMaxCdcCutter CutterOf(const ChunkerOptions& options) {
  return RepMaxCdcCutter(options.min_size, options.horizon_size);
}

// Thread safety: immutable (driver.h).
class RepMaxCdcDriver final : public SelectorDriver<RepMaxCdcDriver> {
 public:
  // REQUIRES: ValidateOptions(options).ok().
  explicit RepMaxCdcDriver(const ChunkerOptions& options)
      // The block sizes only matter to a sequential scan, which never
      // computes a block here (Select below).
      : SelectorDriver(2 * size_t{options.min_size} + options.horizon_size, 1,
                       {ClampBlock(options.min_size),
                        ClampBlock(options.min_size), kPrefetchAhead}),
        cutter_(CutterOf(options)),
        min_size_(options.min_size),
        horizon_size_(options.horizon_size) {}

  // By measurement (docs/algorithms/repmaxcdc.md, "In the engine"), the same
  // with every kernel and thread count: two-stage once the horizon is at
  // least min_size. The reference hashes min + horizon positions per chunk
  // of about 1.34 * min bytes, the two-stage strategy each byte once plus a
  // few hundred positions per chunk in stage 2; with a shorter horizon the
  // reference does less (with horizon 0 it hashes 64 bytes per chunk).
  Strategy AutoStrategy(const kernels::KernelSet& /*kernel*/) const override {
    return horizon_size_ >= min_size_ ? Strategy::kTwoStage
                                      : Strategy::kReference;
  }

  stage2::Cut Cut(const ChunkView& chunk) const override {
    return CutWith(cutter_, chunk);
  }

  bool WordsCombineByOr() const override { return false; }

  void Stage1(const kernels::KernelSet& kernel, const uint8_t* data,
              size_t begin, size_t end, uint64_t* first,
              uint64_t* /*second*/) const override {
    kernel.repmaxcdc(data, begin, end, FastCdcGearTable().data(), first);
  }

  stage2::Cut SelectFrom(const ChunkView& chunk, WindowSource& source) const;

  stage2::Cut SelectFrom(const ChunkView& chunk,
                         BlockSource& /*source*/) const {
    return CutWith(cutter_, chunk);
  }

 private:
  const RepMaxCdcCutter cutter_;
  const size_t min_size_;
  const size_t horizon_size_;
};

// The first i in [from, n) with w[i] > best, or n. Most of stage 2: each
// chunk reads (min + horizon) / 64 words, with the defaults about 6.7 times
// every word of the stream. A new maximum after j groups comes with odds
// 1 / j, so the test is nearly always false and its branches predicted; it
// takes eight words at a time, with nothing but the index in the loop.
size_t FirstAbove(const uint64_t* w, size_t from, size_t n, uint64_t best) {
  size_t i = from;
  for (; i + 8 <= n; i += 8) {
    if (w[i] > best || w[i + 1] > best || w[i + 2] > best || w[i + 3] > best ||
        w[i + 4] > best || w[i + 5] > best || w[i + 6] > best ||
        w[i + 7] > best) {
      break;
    }
  }
  for (; i < n; ++i) {
    if (w[i] > best) return i;
  }
  return n;
}

// The prefix maxima over `groups` whole groups from chunk offset walk.g0
// (global word `word` of the ring), after the head's peak when there is one.
void ScanGroups(const WindowSource& source, uint64_t word, size_t groups,
                const PeakWalk& walk, std::vector<Peak>* records) {
  const uint64_t* const max = source.words(stage2::kFirst);
  const uint64_t mask = source.mask();
  size_t k = 0;
  uint64_t best = walk.head.value;
  if (!walk.has_head) {
    best = max[word & mask];
    records->push_back({best, walk.g0});
    k = 1;
  }
  while (k < groups) {
    // A run of slots that does not wrap around the ring.
    const uint64_t slot = (word + k) & mask;
    const size_t run =
        static_cast<size_t>(std::min<uint64_t>(groups - k, mask + 1 - slot));
    const uint64_t* const w = max + slot;
    for (size_t i = FirstAbove(w, 0, run, best); i < run;
         i = FirstAbove(w, i + 1, run, best)) {
      best = w[i];
      records->push_back({best, walk.g0 + 64 * (k + i)});
    }
    k += run;
  }
}

stage2::Cut RepMaxCdcDriver::SelectFrom(const ChunkView& chunk,
                                        WindowSource& source) const {
  const size_t m = min_size_;
  const size_t peek = std::min(chunk.avail, final_size());
  if (peek < 2 * m) return {peek, 0};
  const size_t n = peek - m;
  const size_t lo = m - 1;
  const size_t hi = n - 1;
  // The first group of the grid at or after position lo.
  const size_t phase =
      static_cast<size_t>((chunk.pos + lo - source.origin()) % 64);
  PeakWalk walk;
  walk.chunk = chunk.data;
  walk.min_size = m;
  walk.n = n;
  walk.g0 = lo + (phase == 0 ? 0 : 64 - phase);
  std::vector<Peak> records;
  walk.records = &records;
  if (walk.g0 > lo) {
    walk.has_head = true;
    walk.head = repmaxcdc::ScanPeak(chunk.data, lo, std::min(walk.g0 - 1, hi));
  }
  if (hi >= walk.g0 + 64) {
    const uint64_t word = (chunk.pos + walk.g0 - source.origin()) / 64;
    ScanGroups(source, word, (hi - walk.g0) / 64, walk, &records);
  }
  return {repmaxcdc::CutFromPeaks(walk), 0};
}

}  // namespace

std::unique_ptr<AlgorithmDriver> NewRepMaxCdcDriver(
    const ChunkerOptions& options) {
  return std::make_unique<RepMaxCdcDriver>(options);
}

std::unique_ptr<Cutter> NewRepMaxCdcCutter(const ChunkerOptions& options) {
  // Built in place: a Cutter is neither copied nor moved.
  return std::unique_ptr<Cutter>(new RepMaxCdcCutter(CutterOf(options)));
}

}  // namespace chunkd::chunking
