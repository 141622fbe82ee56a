// fastcdc in the engine: the two bitmaps of the windowed Gear hash (mask_s
// and mask_l), the selector that restarts the hash at min_size, and the
// crate's cutter for the sequential-only path.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"
#include "chunking/fastcdc.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {
namespace {

// The reference cutter of `options` (REQUIRES: valid options): the
// driver's sequential-only path, and MakeCutter's.
FastCdcCutter CutterOf(const ChunkerOptions& options) {
  return FastCdcCutter(options.min_size, options.avg_size, options.max_size,
                       options.normalization_level, options.seed);
}

// Thread safety: immutable (driver.h).
class FastCdcDriver final : public SelectorDriver<FastCdcDriver> {
 public:
  // REQUIRES: ValidateOptions(options).ok().
  explicit FastCdcDriver(const ChunkerOptions& options)
      : SelectorDriver(options.max_size, 2, BlockSizesFor(options)),
        cutter_(CutterOf(options)) {
    gear_.gear = cutter_.gear().data();
    gear_.mask_s = cutter_.mask_s();
    gear_.mask_l = cutter_.mask_l();
    params_.min_size = options.min_size;
    params_.avg_size = options.avg_size;
    params_.max_size = options.max_size;
    params_.mask_s = cutter_.mask_s();
    params_.mask_l = cutter_.mask_l();
    params_.gear = cutter_.gear().data();
  }

  // The reference strategy with every kernel, on any number of threads:
  // it skips min_size per chunk and rolls the crate's loop in two lanes
  // (fastcdc.h), 1.4-1.5x the avx512 two-stage pipeline on one thread of
  // the development VM. On two, speculative segments scaled the reference
  // about 1.9x and the pipeline about 2.1x in earlier runs, which keeps
  // the reference ahead; not yet re-measured (docs/benchmarks.md, "What
  // limits the chunking figures").
  Strategy AutoStrategy(const kernels::KernelSet& /*kernel*/) const override {
    return Strategy::kReference;
  }

  // The sequential-only path: the crate's cut rolled in two lanes
  // (fastcdc.h), the same chunks as the reference cutter.
  stage2::Cut Cut(const ChunkView& chunk) const override {
    stage2::Cut cut;
    cut.length = cutter_.CutTwoLanes(chunk.data, chunk.avail, &cut.hash);
    return cut;
  }

  void Stage1(const kernels::KernelSet& kernel, const uint8_t* data,
              size_t begin, size_t end, uint64_t* first,
              uint64_t* second) const override {
    kernel.fastcdc(data, begin, end, gear_, first, second);
  }

  template <class Source>
  stage2::Cut SelectFrom(const ChunkView& chunk, Source& source) const {
    return stage2::SelectFastCdc(params_, chunk.data, chunk.pos, chunk.avail,
                                 source);
  }

 private:
  // The strict-mask region [min + 64, avg) in one block (a cut there is
  // rare: probability 1 - exp(-(avg - min) / 2^(bits + level))), then blocks
  // of the mean distance to a loose-mask hit, 2^(bits - level), doubling.
  static BlockSizes BlockSizesFor(const ChunkerOptions& options) {
    const uint32_t bits = FastCdcLog2Round(options.avg_size);
    const size_t strict = options.avg_size > options.min_size + 64
                              ? options.avg_size - options.min_size - 64
                              : 0;
    const size_t loose = size_t{1} << (bits - options.normalization_level);
    return {ClampBlock(std::max(strict, loose)), ClampBlock(loose),
            kPrefetchAhead};
  }

  const FastCdcCutter cutter_;
  kernels::GearParams gear_;
  stage2::FastCdcParams params_;
};

}  // namespace

std::unique_ptr<AlgorithmDriver> NewFastCdcDriver(
    const ChunkerOptions& options) {
  return std::make_unique<FastCdcDriver>(options);
}

std::unique_ptr<Cutter> NewFastCdcCutter(const ChunkerOptions& options) {
  // Built in place: a Cutter is neither copied nor moved.
  return std::unique_ptr<Cutter>(new FastCdcCutter(CutterOf(options)));
}

}  // namespace chunkd::chunking
