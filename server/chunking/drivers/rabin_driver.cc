// rabin in the engine: one bitmap, the candidates of the 64-byte window
// digest (a function of the 64 bytes ending at each position, so stage 1
// needs no chunk boundaries), the selector that takes the first one from
// min_size - 1 on, and restic's cutter for the sequential-only path
// (docs/algorithms/rabin.md).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"
#include "chunking/kernels/kernels.h"
#include "chunking/rabin.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {
namespace {

// The reference cutter of `options` (REQUIRES: valid options): the
// driver's sequential-only path, and MakeCutter's.
RabinCutter CutterOf(const ChunkerOptions& options) {
  return RabinCutter(options.min_size, options.avg_size, options.max_size,
                     options.polynomial);
}

// Thread safety: immutable (driver.h).
class RabinDriver final : public SelectorDriver<RabinDriver> {
 public:
  // REQUIRES: ValidateOptions(options).ok().
  explicit RabinDriver(const ChunkerOptions& options)
      // Candidates from min - 1 on, a mean distance of avg apart: blocks of
      // avg, doubling (restic's default avg of 1 MiB gives kMaxBlock).
      : SelectorDriver(options.max_size, 1,
                       {ClampBlock(options.avg_size),
                        ClampBlock(options.avg_size), kPrefetchAhead}),
        cutter_(CutterOf(options)),
        min_size_(options.min_size),
        max_size_(options.max_size) {
    params_.out = cutter_.tables().out.data();
    params_.mod = cutter_.tables().mod.data();
    params_.mask = cutter_.split_mask();
  }

  // Two-stage with a SIMD kernel: it scales with the threads (256 MiB,
  // restic's sizes, avx512: 1.45 GB/s on one thread, 2.9 GB/s on two),
  // where the sequential scan, which like restic never hashes a chunk's
  // first min_size - 64 bytes, is faster alone (1.9 GB/s) but loses to its
  // speculative segments' re-cuts with chunks of 1.5 MiB on average
  // (2.5 GB/s on two). With the scalar kernel the reference cutter, whose
  // single rolling loop also skips those bytes (docs/algorithms/rabin.md).
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
    kernel.rabin(data, begin, end, params_, first);
  }

  // The first candidate at or after offset min - 1 (where the chunk's
  // digest first holds 64 of its own bytes and restic first may cut), else
  // min(avail, max); the reported digest is recomputed from the window.
  template <class Source>
  stage2::Cut SelectFrom(const ChunkView& chunk, Source& source) const {
    const stage2::FirstCandidate cut = stage2::SelectFirstCandidate(
        chunk.pos, chunk.avail, min_size_ - 1, max_size_, source);
    if (!cut.candidate) return {cut.length, 0};
    return {cut.length, cutter_.WindowDigest(chunk.data + cut.length - 1)};
  }

 private:
  const RabinCutter cutter_;
  const size_t min_size_;
  const size_t max_size_;
  kernels::RabinParams params_;
};

}  // namespace

std::unique_ptr<AlgorithmDriver> NewRabinDriver(const ChunkerOptions& options) {
  return std::make_unique<RabinDriver>(options);
}

std::unique_ptr<Cutter> NewRabinCutter(const ChunkerOptions& options) {
  // Built in place: a Cutter is neither copied nor moved.
  return std::unique_ptr<Cutter>(new RabinCutter(CutterOf(options)));
}

}  // namespace chunkd::chunking
