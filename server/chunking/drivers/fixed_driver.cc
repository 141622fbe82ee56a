// fixed in the engine: no stage 1, chunks cut by length alone on the
// sequential-only path.

#include <memory>

#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"
#include "chunking/fixed.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {
namespace {

// The reference cutter of `options` (REQUIRES: valid options): the
// driver's sequential-only path, and MakeCutter's.
FixedCutter CutterOf(const ChunkerOptions& options) {
  return FixedCutter(options.avg_size);
}

// Thread safety: immutable (driver.h).
class FixedDriver final : public AlgorithmDriver {
 public:
  // REQUIRES: ValidateOptions(options).ok().
  explicit FixedDriver(const ChunkerOptions& options)
      : AlgorithmDriver(options.avg_size), cutter_(CutterOf(options)) {}

  // Sequential: it cuts by length, whatever the kernel, and needs no
  // guesses with several threads.
  Strategy AutoStrategy(const kernels::KernelSet& /*kernel*/) const override {
    return Strategy::kSequentialScan;
  }

  stage2::Cut Cut(const ChunkView& chunk) const override {
    return CutWith(cutter_, chunk);
  }

 private:
  const FixedCutter cutter_;
};

}  // namespace

std::unique_ptr<AlgorithmDriver> NewFixedDriver(const ChunkerOptions& options) {
  return std::make_unique<FixedDriver>(options);
}

std::unique_ptr<Cutter> NewFixedCutter(const ChunkerOptions& options) {
  // Built in place: a Cutter is neither copied nor moved.
  return std::unique_ptr<Cutter>(new FixedCutter(CutterOf(options)));
}

}  // namespace chunkd::chunking
