// crc32 in the engine: one bitmap, the candidates of the stream-global
// window CRC, the selector that takes the first one from min_size - 1 on, and
// the rolling cutter for the sequential-only path.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/crc32.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {
namespace {

// The reference cutter of `options` (REQUIRES: valid options): the
// driver's sequential-only path, and MakeCutter's.
Crc32Cutter CutterOf(const ChunkerOptions& options) {
  return Crc32Cutter(options.min_size, options.avg_size, options.max_size);
}

// Thread safety: immutable (driver.h).
class Crc32Driver final : public SelectorDriver<Crc32Driver> {
 public:
  // REQUIRES: ValidateOptions(options).ok().
  explicit Crc32Driver(const ChunkerOptions& options)
      // Candidates from min - 1 on, a mean distance of avg apart: blocks of
      // avg.
      : SelectorDriver(options.max_size, 1,
                       {ClampBlock(options.avg_size),
                        ClampBlock(options.avg_size), kPrefetchAhead}),
        cutter_(CutterOf(options)),
        mask_(options.avg_size - 1),
        min_size_(options.min_size),
        max_size_(options.max_size) {}

  // Two-stage with a SIMD kernel (the stream-global window skips only
  // min_size - 1 bytes; every kernel call warms 256 bytes up per lane);
  // with the scalar kernel the reference cutter.
  Strategy AutoStrategy(const kernels::KernelSet& kernel) const override {
    return absl::string_view(kernel.name) == "scalar" ? Strategy::kReference
                                                      : Strategy::kTwoStage;
  }

  stage2::Cut Cut(const ChunkView& chunk) const override {
    return CutWith(cutter_, chunk);
  }

  void Stage1(const kernels::KernelSet& kernel, const uint8_t* data,
              size_t begin, size_t end, uint64_t* first,
              uint64_t* /*second*/) const override {
    kernel.crc32(data, begin, end, mask_, first);
  }

  template <class Source>
  stage2::Cut SelectFrom(const ChunkView& chunk, Source& source) const {
    const stage2::FirstCandidate cut = stage2::SelectFirstCandidate(
        chunk.pos, chunk.avail, min_size_ - 1, max_size_, source);
    if (!cut.candidate) return {cut.length, 0};
    return {cut.length,
            Crc32WindowAt(chunk.data, cut.length - 1, chunk.context)};
  }

 private:
  const Crc32Cutter cutter_;
  const uint32_t mask_;  // avg_size - 1
  const size_t min_size_;
  const size_t max_size_;
};

}  // namespace

std::unique_ptr<AlgorithmDriver> NewCrc32Driver(const ChunkerOptions& options) {
  return std::make_unique<Crc32Driver>(options);
}

std::unique_ptr<Cutter> NewCrc32Cutter(const ChunkerOptions& options) {
  // Built in place: a Cutter is neither copied nor moved.
  return std::unique_ptr<Cutter>(new Crc32Cutter(CutterOf(options)));
}

}  // namespace chunkd::chunking
