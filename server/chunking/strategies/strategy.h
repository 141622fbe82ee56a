// The engine's interface to one chunking algorithm (engine.h runs it). Every
// algorithm has a strategy in strategies/<algorithm>_strategy.cc, created by
// NewStrategy from the table in strategies/registry.cc.
//
// Adding an algorithm to the engine, once its specification exists (the
// Algorithm, its options and its reference Cutter): a file
// strategies/<algorithm>_strategy.cc defining the factory its registry row
// names, the row, and the file in CMakeLists.txt. With a stage 1, the file's
// class derives from SelectorStrategy, its kernel function is a row of
// CHUNKD_KERNEL_FUNCTIONS (kernels/functions.h) with a body in every backend,
// and its selector goes to stage2.h; without, it derives from
// AlgorithmStrategy (as fixed does).
//
// What the engine asks of an algorithm:
//   - for every algorithm, the sequential-only path: Cut() gives a chunk's
//     cut from its bytes alone (its reference cutter, cutter.h), which the
//     reference strategy runs, in speculative segments with several threads;
//   - for an algorithm with candidate bitmaps (two_stage() not null), its
//     stage 1 — Stage1() runs a kernel over any range, a pure function of
//     position, so segments run on any thread — and its stage 2, Select(),
//     which cuts a chunk sequentially from those bitmaps with the
//     reference's rules (stage2.h), from the ring (two-stage strategy) or
//     from blocks computed on demand (sequential scan; bit_sources.h).
// Besides, each says which of the engine's strategies is fastest with a
// kernel (AutoStrategy) and how long the sequential scan's blocks are.
#ifndef CHUNKD_CHUNKING_STRATEGIES_STRATEGY_H_
#define CHUNKD_CHUNKING_STRATEGIES_STRATEGY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "chunkd/chunker.h"
#include "chunking/bit_sources.h"
#include "chunking/cutter.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {

// A chunk to cut: its first byte and where it lies. A plain value; default:
// no bytes.
struct ChunkView {
  const uint8_t* data = nullptr;  // the chunk's first byte
  uint64_t pos = 0;               // its stream position
  size_t avail = 0;               // bytes readable from data on
  // Bytes readable before data: kContext, fewer only where the stream
  // starts.
  size_t context = 0;
};

// Sequential-scan block lengths, multiples of 64 in [256, kMaxBlock]. A
// kernel call has a fixed cost (the avx512 fastcdc kernel builds its lookup
// planes and warms 8-16 lanes up by 48 bytes; crc32 warms every lane up by
// 256 bytes) and the bits computed past the cut are wasted, so blocks follow
// where the cut is likely. With each block the engine prefetches the bytes up
// to `prefetch` past it, where the scan goes next: the next block, the next
// chunk's min offset, or where a SeqCDC jump lands. A plain value; default:
// all 0 (an algorithm without stage 1 has none).
struct BlockSizes {
  size_t first = 0;     // a chunk's first block
  size_t then = 0;      // the next ones, doubling
  size_t prefetch = 0;  // bytes after a block fetched with it
};

// The block length for about n bytes, within BlockSizes' bounds.
inline size_t ClampBlock(size_t n) {
  return std::min(kMaxBlock, std::max<size_t>(256, (n + 63) / 64 * 64));
}

// What a block is prefetched with by default: up to where the next chunk's
// scan starts after min_size (16 KiB).
inline constexpr size_t kPrefetchAhead = size_t{16} << 10;

class BitmapStrategy;

// One algorithm as the engine runs it: the sequential-only path, and the two
// stages when it has them. Thread safety: immutable after construction; every
// method may be called from any number of threads at once (an engine's
// helpers share its strategy). Abstract: NewStrategy makes them.
class AlgorithmStrategy {
 public:
  AlgorithmStrategy(const AlgorithmStrategy&) = delete;
  AlgorithmStrategy& operator=(const AlgorithmStrategy&) = delete;
  virtual ~AlgorithmStrategy() = default;

  // Bytes from a chunk's start after which its cut is final: no cut looks
  // further (max_size; fixed: avg_size).
  size_t final_size() const { return final_size_; }

  // The strategy Strategy::kAuto stands for with `kernel`, never kAuto: the
  // fastest, as measured (engine.h).
  virtual Strategy AutoStrategy(const kernels::Kernel& kernel) const = 0;

  // The sequential-only path: the cut of `chunk` from its bytes alone.
  // REQUIRES: chunk.avail >= final_size() or the stream ends there.
  virtual stage2::Cut Cut(const ChunkView& chunk) const = 0;

  // The algorithm's two stages, or null when it has none (fixed).
  virtual const BitmapStrategy* two_stage() const { return nullptr; }

 protected:
  explicit AlgorithmStrategy(size_t final_size) : final_size_(final_size) {}

 private:
  const size_t final_size_;
};

// An algorithm whose cut points follow from per-position candidate bitmaps:
// stage 1 computes them with a kernel, stage 2 selects the cuts from them.
// Thread safety: as AlgorithmStrategy. Abstract: derive from SelectorStrategy
// below.
class BitmapStrategy : public AlgorithmStrategy {
 public:
  const BitmapStrategy* two_stage() const final { return this; }

  // Bitmaps per position, 1 to kMaxBitmaps.
  int bitmaps() const { return bitmaps_; }
  const BlockSizes& block_sizes() const { return block_sizes_; }

  // Stage 1 over data[begin, end) with `kernel` into `first` and `second`
  // (null for an algorithm with one bitmap): kernels/functions.h.
  virtual void Stage1(const kernels::Kernel& kernel, const uint8_t* data,
                      size_t begin, size_t end, uint64_t* first,
                      uint64_t* second) const = 0;

  // Stage 2: the cut of `chunk`, exactly Cut(chunk), from the bitmaps of
  // `source`. REQUIRES: as Cut; the source covers the chunk's positions up
  // to min(avail, final_size()).
  virtual stage2::Cut Select(const ChunkView& chunk,
                             WindowSource& source) const = 0;
  virtual stage2::Cut Select(const ChunkView& chunk,
                             BlockSource& source) const = 0;

 protected:
  BitmapStrategy(size_t final_size, int bitmaps, BlockSizes block_sizes)
      : AlgorithmStrategy(final_size),
        bitmaps_(bitmaps),
        block_sizes_(block_sizes) {}

 private:
  const int bitmaps_;
  const BlockSizes block_sizes_;
};

// A BitmapStrategy whose stage 2 is one template for both sources (thread
// safety: as AlgorithmStrategy):
//   template <class Source>
//   stage2::Cut Derived::SelectFrom(const ChunkView&, Source&) const;
// which the overrides call directly, so that the source's Get inlines into
// the selector's loop.
template <class Derived>
class SelectorStrategy : public BitmapStrategy {
 public:
  stage2::Cut Select(const ChunkView& chunk, WindowSource& source) const final {
    return static_cast<const Derived&>(*this).SelectFrom(chunk, source);
  }
  stage2::Cut Select(const ChunkView& chunk, BlockSource& source) const final {
    return static_cast<const Derived&>(*this).SelectFrom(chunk, source);
  }

 protected:
  using BitmapStrategy::BitmapStrategy;
};

// The cut of `chunk` by a reference cutter (cutter.h), called on its own
// type so that the call is direct: the sequential-only path.
template <class ReferenceCutter>
stage2::Cut CutWith(const ReferenceCutter& cutter, const ChunkView& chunk) {
  stage2::Cut cut;
  cut.length = cutter.Cut(chunk.data, chunk.avail, chunk.context, &cut.hash);
  return cut;
}

// The strategy of options.algorithm (strategies/registry.cc).
// REQUIRES: ValidateOptions(options).ok().
std::unique_ptr<AlgorithmStrategy> NewStrategy(const ChunkerOptions& options);

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_STRATEGIES_STRATEGY_H_
