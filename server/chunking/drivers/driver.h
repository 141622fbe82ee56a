// The engine's interface to one chunking algorithm, its driver (engine.h
// runs it): everything the engine knows of an algorithm. Every algorithm
// has one in drivers/<algorithm>_driver.cc, created by NewDriver from the
// algorithm table (CMakeLists.txt; registry.cc).
//
// What the engine asks of an algorithm:
//   - for every algorithm, the sequential-only path: Cut() gives a chunk's
//     cut from its bytes alone (its reference cutter, cutter.h), which the
//     reference strategy runs, in speculative segments with several threads;
//   - for an algorithm with candidate bitmaps (two_stage() not null), its
//     stage 1 — Stage1() runs its kernel of a kernel set over any range, a
//     pure function of position, so segments run on any thread — and its
//     stage 2, Select(), which cuts a chunk sequentially from those bitmaps
//     with the reference's rules (a selector of stage2.h or its own), from
//     the ring (two-stage strategy) or from blocks computed on demand
//     (sequential scan), the two bit sources defined below.
// Besides, each says which of the engine's strategies is fastest with a
// kernel set (AutoStrategy) and how long the sequential scan's blocks are.
//
// Adding an algorithm `foo` (Algorithm::kFoo), once its row of the table
// (proto/chunkd/v1/tables.json: enumerator, name, parameters, limits,
// defaults) exists; docs/contributing.md walks through all of it:
//   1. its reference cutter, the specification: foo.h and foo.cc (a Cutter,
//      cutter.h);
//   2. its row `Foo:foo` in the algorithm table of CMakeLists.txt, which
//      compiles foo.cc and drivers/foo_driver.cc and lists it for
//      registry.cc;
//   3. drivers/foo_driver.cc, defining NewFooCutter and NewFooDriver: a
//      class derived from AlgorithmDriver when it has no stage 1 (as fixed),
//      else from SelectorDriver<FooDriver> (Stage1 calls its kernel,
//      SelectFrom its selector);
//   4. with a stage 1, its kernel: a row of CHUNKD_KERNEL_FUNCTIONS and its
//      parameters in kernels/functions.h, and its bodies, FooBody, in
//      kernels/generic/foo.h (the scalar definition, and the vector body of
//      the other kernel sets), listed in kernels/generic/bodies.h. The kernel
//      set files (kernels/<set>/<set>.cc) name no algorithm.
// The engine's tests (engine_test.cc) cover every algorithm of the table
// without a change; the kernel's differential test goes to
// kernels/kernels_test.cc.
#ifndef CHUNKD_CHUNKING_DRIVERS_DRIVER_H_
#define CHUNKD_CHUNKING_DRIVERS_DRIVER_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {

// Stage-1 bitmaps per position at most: stage2::kFirst and kSecond.
inline constexpr int kMaxBitmaps = 2;

// The longest block the sequential scan computes (its scratch bitmaps are
// sized for it).
inline constexpr size_t kMaxBlock = size_t{64} << 10;

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

class BitmapDriver;
class WindowSource;
class BlockSource;

// One algorithm as the engine runs it: the sequential-only path, and the two
// stages when it has them. Thread safety: immutable after construction; every
// method may be called from any number of threads at once (an engine's
// helpers share its driver). Abstract: NewDriver makes them.
class AlgorithmDriver {
 public:
  AlgorithmDriver(const AlgorithmDriver&) = delete;
  AlgorithmDriver& operator=(const AlgorithmDriver&) = delete;
  virtual ~AlgorithmDriver() = default;

  // Bytes from a chunk's start after which its cut is final: no cut looks
  // further (max_size; fixed: avg_size).
  size_t final_size() const { return final_size_; }

  // The strategy Strategy::kAuto stands for with `kernel`, never kAuto: the
  // fastest, as measured (engine.h).
  virtual Strategy AutoStrategy(const kernels::KernelSet& kernel) const = 0;

  // The sequential-only path: the cut of `chunk` from its bytes alone.
  // REQUIRES: chunk.avail >= final_size() or the stream ends there.
  virtual stage2::Cut Cut(const ChunkView& chunk) const = 0;

  // The algorithm's two stages, or null when it has none (fixed).
  virtual const BitmapDriver* two_stage() const { return nullptr; }

 protected:
  explicit AlgorithmDriver(size_t final_size) : final_size_(final_size) {}

 private:
  const size_t final_size_;
};

// An algorithm whose cut points follow from per-position candidate bitmaps:
// stage 1 computes them with a kernel, stage 2 selects the cuts from them.
// Thread safety: as AlgorithmDriver. Abstract: derive from SelectorDriver
// below.
class BitmapDriver : public AlgorithmDriver {
 public:
  const BitmapDriver* two_stage() const final { return this; }

  // Bitmaps per position, 1 to kMaxBitmaps.
  int bitmaps() const { return bitmaps_; }
  const BlockSizes& block_sizes() const { return block_sizes_; }

  // Whether a stage-1 word computed in two pieces is the OR of the pieces'
  // words (bitmaps: yes). repmaxcdc's words, a maximum per 64 positions,
  // are not: the engine computes such a word again whole, from its first
  // position, for which the 63 bytes of window before it suffice.
  virtual bool WordsCombineByOr() const { return true; }

  // Stage 1 over data[begin, end) with `kernel` into `first` and `second`
  // (null for an algorithm with one bitmap): kernels/functions.h.
  virtual void Stage1(const kernels::KernelSet& kernel, const uint8_t* data,
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
  BitmapDriver(size_t final_size, int bitmaps, BlockSizes block_sizes)
      : AlgorithmDriver(final_size),
        bitmaps_(bitmaps),
        block_sizes_(block_sizes) {}

 private:
  const int bitmaps_;
  const BlockSizes block_sizes_;
};

// The two-stage strategy's source: a view of the engine's ring of bitmap
// words, in which position origin + 64 g + b is bit b of word g & mask.
//
// Thread safety: reads only; valid while the engine's ring is neither grown
// nor rewritten under the positions stage 2 reads.
class WindowSource {
 public:
  // words[k]: bitmap k's ring (unused entries may be null).
  WindowSource(uint64_t origin, uint64_t mask,
               const std::array<const uint64_t*, kMaxBitmaps>& words)
      : origin_(origin), mask_(mask), words_(words) {}

  uint64_t Get(int which, uint64_t pos) const {
    const uint64_t rel = pos - origin_;
    const uint64_t g = rel / 64;
    const unsigned b = static_cast<unsigned>(rel % 64);
    const uint64_t* w = words_[which];
    const uint64_t lo = w[g & mask_];
    if (b == 0) return lo;
    return (lo >> b) | (w[(g + 1) & mask_] << (64 - b));
  }

  uint64_t FindFirst(int which, uint64_t lo, uint64_t hi) const {
    return stage2::FindFirstInWords(words_[which], mask_, origin_, lo, hi);
  }

  // The ring itself, for a selector whose stage-1 words are not bitmaps
  // (repmaxcdc: a maximum per 64 positions, which Get cannot shift): word
  // g & mask() of words(which) holds positions origin() + 64 g + [0, 64).
  uint64_t origin() const { return origin_; }
  uint64_t mask() const { return mask_; }
  const uint64_t* words(int which) const { return words_[which]; }

 private:
  const uint64_t origin_;
  const uint64_t mask_;
  const std::array<const uint64_t*, kMaxBitmaps> words_;
};

// The sequential scan's current block: the bitmaps of stream positions
// [begin, end), kept from one chunk to the next. Empty while begin > end.
// Default: empty, no scratch (the engine sizes `bits` for kMaxBlock).
struct ScanBlock {
  std::array<std::vector<uint64_t>, kMaxBitmaps> bits;
  uint64_t begin = 1;
  uint64_t end = 0;
};

// The sequential strategy's source: a block computed where the selector
// asks, growing while the chunk goes on. The block outlives the chunk: when
// the next chunk's scan starts inside it — short chunks, e.g. crc32 on zeros
// — it is used again instead of paying another kernel call.
//
// Thread safety: not thread-safe; it writes the engine's ScanBlock.
class BlockSource {
 public:
  // The input is data[0, size), stream positions [offset, offset + size);
  // the chunk's bits are never needed at or past hard_end.
  BlockSource(const BitmapDriver& driver, const kernels::KernelSet& kernel,
              ScanBlock* block, const uint8_t* data, uint64_t offset,
              size_t size, uint64_t hard_end)
      : driver_(driver),
        kernel_(kernel),
        block_(*block),
        data_(data),
        offset_(offset),
        size_(size),
        hard_end_(hard_end),
        next_(driver.block_sizes().first) {}

  uint64_t Get(int which, uint64_t pos) {
    // Bits past the chunk's hard end are never looked at.
    const uint64_t need = std::min(pos + 64, hard_end_);
    if (pos < block_.begin || need > block_.end) Refill(pos);
    return stage2::BitsAt(block_.bits[which].data(),
                          static_cast<size_t>(pos - block_.begin));
  }

 private:
  // Computes the block that starts at `pos`. Inline, as Get, so that the
  // selector's loop keeps it.
  void Refill(uint64_t pos) {
    const BlockSizes& sizes = driver_.block_sizes();
    // A scan that jumped past the block starts over with short blocks; one
    // that ran off its end continues with longer ones.
    if (pos > block_.end + 64) next_ = sizes.first;
    const uint64_t end = std::min(hard_end_, pos + next_);
    next_ = next_ == sizes.first ? sizes.then : std::min(2 * next_, kMaxBlock);
    const size_t words = kernels::BitmapWords(static_cast<size_t>(end - pos));
    // The block's bytes and what follows, fetched from memory before the
    // kernel reads them: the scan jumps (min_size at every chunk, SeqCDC's
    // SkipSize) where the hardware prefetcher cannot follow, and a kernel's
    // lanes start mid-block. On data from DRAM this doubles the throughput
    // of the sequential scan; on cached data it costs a few instructions.
    const uint64_t fetch_end = std::min(offset_ + size_, end + sizes.prefetch);
    for (uint64_t at = pos; at < fetch_end; at += 64) {
      __builtin_prefetch(data_ + (at - offset_));
    }
    uint64_t* out0 = block_.bits[0].data();
    uint64_t* out1 = driver_.bitmaps() > 1 ? block_.bits[1].data() : nullptr;
    driver_.Stage1(kernel_, data_, static_cast<size_t>(pos - offset_),
                   static_cast<size_t>(end - offset_), out0, out1);
    // The padding word read by unaligned BitsAt at the block's end.
    out0[words] = 0;
    if (out1 != nullptr) out1[words] = 0;
    block_.begin = pos;
    block_.end = end;
  }

  const BitmapDriver& driver_;
  const kernels::KernelSet& kernel_;
  ScanBlock& block_;
  const uint8_t* const data_;
  const uint64_t offset_;
  const size_t size_;
  const uint64_t hard_end_;
  size_t next_;  // the length of the next block
};

// A BitmapDriver whose stage 2 is one template for both sources (thread
// safety: as AlgorithmDriver):
//   template <class Source>
//   stage2::Cut Derived::SelectFrom(const ChunkView&, Source&) const;
// which the overrides call directly, so that the source's Get inlines into
// the selector's loop.
template <class Derived>
class SelectorDriver : public BitmapDriver {
 public:
  stage2::Cut Select(const ChunkView& chunk, WindowSource& source) const final {
    return static_cast<const Derived&>(*this).SelectFrom(chunk, source);
  }
  stage2::Cut Select(const ChunkView& chunk, BlockSource& source) const final {
    return static_cast<const Derived&>(*this).SelectFrom(chunk, source);
  }

 protected:
  using BitmapDriver::BitmapDriver;
};

// The cut of `chunk` by a reference cutter (cutter.h), called on its own
// type so that the call is direct: the sequential-only path.
template <class ReferenceCutter>
stage2::Cut CutWith(const ReferenceCutter& cutter, const ChunkView& chunk) {
  stage2::Cut cut;
  cut.length = cutter.Cut(chunk.data, chunk.avail, chunk.context, &cut.hash);
  return cut;
}

// The driver of options.algorithm (registry.cc).
// REQUIRES: ValidateOptions(options).ok().
std::unique_ptr<AlgorithmDriver> NewDriver(const ChunkerOptions& options);

// The reference cutter of options.algorithm (registry.cc); MakeCutter
// (cutter.h) validates the options first.
// REQUIRES: ValidateOptions(options).ok().
std::unique_ptr<Cutter> NewCutter(const ChunkerOptions& options);

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_DRIVERS_DRIVER_H_
