// fixed in the engine: no stage 1, chunks cut by length alone on the
// sequential-only path.

#include <memory>

#include "chunkd/chunker.h"
#include "chunking/fixed.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"
#include "chunking/strategies/strategy.h"

namespace chunkd::chunking {
namespace {

// Thread safety: immutable (strategy.h).
class FixedStrategy final : public AlgorithmStrategy {
 public:
  // REQUIRES: ValidateOptions(options).ok().
  explicit FixedStrategy(const ChunkerOptions& options)
      : AlgorithmStrategy(options.avg_size), cutter_(options.avg_size) {}

  // Sequential: it cuts by length, whatever the kernel, and needs no
  // guesses with several threads.
  Strategy AutoStrategy(const kernels::Kernel& /*kernel*/) const override {
    return Strategy::kSequentialScan;
  }

  stage2::Cut Cut(const ChunkView& chunk) const override {
    return CutWith(cutter_, chunk);
  }

 private:
  const FixedCutter cutter_;
};

}  // namespace

std::unique_ptr<AlgorithmStrategy> NewFixedStrategy(
    const ChunkerOptions& options) {
  return std::make_unique<FixedStrategy>(options);
}

}  // namespace chunkd::chunking
