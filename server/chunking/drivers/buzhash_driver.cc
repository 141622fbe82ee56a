// buzhash in the engine: one bitmap, the candidates of the 48-byte window
// hash (a function of the stream's bytes alone, so the bits of any range
// serve every chunk), the selector that takes the first one from offset
// min_size on, and the rolling cutter for the sequential-only path.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/buzhash.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {
namespace {

// Sequential-scan blocks. Candidates lie from min_size on, one in d
// positions on average; the bits past the cut are wasted, half a block on
// average, and a kernel call costs little (avx512: 64 positions of warm-up
// and its table planes; avx2: 48 per lane), so short blocks of equal size
// (first == then: never doubling). On 256 MiB of random data at the
// defaults, 1 and 2 KiB blocks measured best, 4 KiB 5-7 % slower, blocks
// of d or doubling ones 10-20 %. The kernels are compute-bound (about a
// byte per cycle) and the hardware prefetcher keeps up within a chunk once
// a block's own lines are prefetched: prefetching the next chunk's start
// as well (16 KiB ahead) measured 5-10 % slower.
constexpr size_t kBuzhashBlock = 2048;

// The reference cutter of `options` (REQUIRES: valid options): the
// driver's sequential-only path, and MakeCutter's.
BuzhashCutter CutterOf(const ChunkerOptions& options) {
  return BuzhashCutter(options.min_size, options.avg_size, options.max_size);
}

// Thread safety: immutable (driver.h).
class BuzhashDriver final : public SelectorDriver<BuzhashDriver> {
 public:
  // REQUIRES: ValidateOptions(options).ok().
  explicit BuzhashDriver(const ChunkerOptions& options)
      : SelectorDriver(options.max_size, 1, {kBuzhashBlock, kBuzhashBlock, 0}),
        cutter_(CutterOf(options)),
        min_size_(options.min_size),
        max_size_(options.max_size) {
    params_.table = BuzhashTable().data();
    params_.discriminator = cutter_.discriminator();
  }

  // Sequential with a SIMD kernel: it skips min_size bytes of every chunk,
  // a quarter of the input at the defaults, which two-stage must hash (on
  // 256 MiB of random data, avx512: 3.1 against 2.8 GB/s on one thread, 5.9
  // against 5.5 on two; avx2: 1.7 against 1.6, 3.2 against 3.1). With the
  // scalar kernel, whose test divides as the reference's does, the
  // reference cutter: it skips as much and collects no bits.
  Strategy AutoStrategy(const kernels::KernelSet& kernel) const override {
    return absl::string_view(kernel.name) == "scalar"
               ? Strategy::kReference
               : Strategy::kSequentialScan;
  }

  stage2::Cut Cut(const ChunkView& chunk) const override {
    return CutWith(cutter_, chunk);
  }

  void Stage1(const kernels::KernelSet& kernel, const uint8_t* data,
              size_t begin, size_t end, uint64_t* first,
              uint64_t* /*second*/) const override {
    kernel.buzhash(data, begin, end, params_, first);
  }

  // The reference's rolled hash at chunk offset p >= min_size is H(p) of
  // the stream (its window lies inside the chunk), the kernel's bit p: the
  // cut is after the first bit from min_size on, below min(avail, max).
  template <class Source>
  stage2::Cut SelectFrom(const ChunkView& chunk, Source& source) const {
    const stage2::FirstCandidate cut = stage2::SelectFirstCandidate(
        chunk.pos, chunk.avail, min_size_, max_size_, source);
    if (!cut.candidate) return {cut.length, 0};
    return {cut.length, BuzhashWindow(chunk.data + cut.length - 1)};
  }

 private:
  const BuzhashCutter cutter_;
  const size_t min_size_;
  const size_t max_size_;
  kernels::BuzhashParams params_;
};

}  // namespace

std::unique_ptr<AlgorithmDriver> NewBuzhashDriver(
    const ChunkerOptions& options) {
  return std::make_unique<BuzhashDriver>(options);
}

std::unique_ptr<Cutter> NewBuzhashCutter(const ChunkerOptions& options) {
  // Built in place: a Cutter is neither copied nor moved.
  return std::unique_ptr<Cutter>(new BuzhashCutter(CutterOf(options)));
}

}  // namespace chunkd::chunking
