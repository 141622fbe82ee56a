// seqcdc in the engine: the gt and lt bitmaps of neighbouring bytes, the
// selector that runs the authors' state machine a word at a time, and their
// cut function for the sequential-only path.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"
#include "chunking/kernels/kernels.h"
#include "chunking/seqcdc.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {
namespace {

// A jump lands this far ahead at most (SkipSize 512 by default), so a block
// is prefetched with that much of what follows.
constexpr size_t kSeqCdcPrefetchAhead = 1024;

// The reference cutter of `options` (REQUIRES: valid options): the
// driver's sequential-only path, and MakeCutter's.
SeqCdcCutter CutterOf(const ChunkerOptions& options) {
  return SeqCdcCutter(options.seq_mode, options.min_size, options.max_size,
                      options.seq_length, options.skip_trigger,
                      options.skip_size);
}

// Thread safety: immutable (driver.h).
class SeqCdcDriver final : public SelectorDriver<SeqCdcDriver> {
 public:
  // REQUIRES: ValidateOptions(options).ok().
  explicit SeqCdcDriver(const ChunkerOptions& options)
      : SelectorDriver(options.max_size, 2, BlockSizesFor(options)),
        cutter_(CutterOf(options)) {
    params_.increasing = options.seq_mode != SeqMode::kDecreasing;
    params_.min_size = options.min_size;
    params_.max_size = options.max_size;
    params_.seq_length = options.seq_length;
    params_.skip_trigger = options.skip_trigger;
    params_.skip_size = options.skip_size;
  }

  // Sequential with every kernel: its skipping leaves about a fifth of the
  // bytes to examine; two-stage must read them all.
  Strategy AutoStrategy(const kernels::KernelSet& /*kernel*/) const override {
    return Strategy::kSequentialScan;
  }

  stage2::Cut Cut(const ChunkView& chunk) const override {
    return CutWith(cutter_, chunk);
  }

  void Stage1(const kernels::KernelSet& kernel, const uint8_t* data,
              size_t begin, size_t end, uint64_t* first,
              uint64_t* second) const override {
    kernel.seqcdc(data, begin, end, first, second);
  }

  template <class Source>
  stage2::Cut SelectFrom(const ChunkView& chunk, Source& source) const {
    return stage2::SelectSeqCdc(params_, chunk.pos, chunk.avail, source);
  }

 private:
  // On random data the scan jumps SkipSize bytes after about 2 * SkipTrigger
  // examined positions, so a block of a few words per jump; doubling while
  // the scan stays contiguous (no jumps: plateaus, zeros).
  static BlockSizes BlockSizesFor(const ChunkerOptions& options) {
    const size_t scan = 2 * size_t{options.skip_trigger} + 64;
    return {ClampBlock(scan), ClampBlock(scan), kSeqCdcPrefetchAhead};
  }

  const SeqCdcCutter cutter_;
  stage2::SeqCdcParams params_;
};

}  // namespace

std::unique_ptr<AlgorithmDriver> NewSeqCdcDriver(
    const ChunkerOptions& options) {
  return std::make_unique<SeqCdcDriver>(options);
}

std::unique_ptr<Cutter> NewSeqCdcCutter(const ChunkerOptions& options) {
  // Built in place: a Cutter is neither copied nor moved.
  return std::unique_ptr<Cutter>(new SeqCdcCutter(CutterOf(options)));
}

}  // namespace chunkd::chunking
