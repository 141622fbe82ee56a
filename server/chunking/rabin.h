// rabin: restic's content-defined chunker (Go module
// github.com/restic/chunker v0.4.0, NewWithBoundaries + SetAverageBits),
// byte-exact. Definition and quirks: docs/algorithms/rabin.md.
//
// Bytes are coefficients of polynomials over GF(2): a byte string
// b_0 ... b_n is sum b_i(x) * x^(8 (n - i)), reduced modulo the client's
// irreducible polynomial P of degree 53. The digest D(p) is that fingerprint
// of the 64-byte window ending at p. It rolls byte by byte: the byte leaving
// the window is removed by XORing out[byte] = byte * x^(8 * 63) mod P, the
// new byte is appended by digest = (digest << 8 | byte) reduced with
// mod[digest >> 45] = ((i * x^53) mod P) | (i << 53), which both cancels the
// eight bits that overflowed past degree 53 and adds their remainder.
//
// A chunk: restic restarts the window at every chunk (zeros, then one byte of
// value 1 slid in), skips the first min_size - 64 bytes unhashed and slides
// every later byte. The chunk ends after the first byte at which
// (digest & (avg_size - 1)) == 0 with length >= min_size, else at max_size,
// else at the end of the stream. From length min_size on the reset's byte has
// left the window, so every digest tested is D(p) of the 64 bytes ending at
// p: the cut is a function of those bytes alone (what the stage-1 kernel
// computes).
//
// Thread safety: immutable after construction.
#ifndef CHUNKD_CHUNKING_RABIN_H_
#define CHUNKD_CHUNKING_RABIN_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "chunking/cutter.h"

namespace chunkd::chunking {

// True when `polynomial` (bit i the coefficient of x^i) is irreducible over
// GF(2): Ben-Or's test, gcd(x^(2^i) - x mod P, P) == 1 for i = 1..deg/2.
// Any degree; 0 and 1 (no positive degree) are not irreducible. options.cc
// also requires degree 53.
bool RabinPolynomialIsIrreducible(uint64_t polynomial);

// restic's two tables for a polynomial of degree 53 (its `tables`): out[b]
// removes byte b leaving the 64-byte window, mod[i] reduces the digest's
// top byte i. A plain value.
struct RabinTables {
  std::array<uint64_t, 256> out{};
  std::array<uint64_t, 256> mod{};
};

// REQUIRES: polynomial of degree 53.
RabinTables MakeRabinTables(uint64_t polynomial);

// The digest bits below the eight that updating shifts out: restic's polShift
// for degree 53.
inline constexpr int kRabinShift = 53 - 8;

// The rabin cut function. Thread safety: immutable; Cut may run on any
// number of threads. No defaults: the parameters are the validated options'.
class RabinCutter final : public Cutter {
 public:
  // REQUIRES: the parameters pass ValidateOptions.
  RabinCutter(uint32_t min_size, uint32_t avg_size, uint32_t max_size,
              uint64_t polynomial);

  // `context` is unused: the window restarts at every chunk. *hash is the
  // digest at the chunk's last byte when the chunk was cut there as a
  // candidate (restic's Chunk.Cut); 0 when it was cut by max_size or the end
  // of the stream, where restic reports whatever its digest held.
  size_t Cut(const uint8_t* chunk_start, size_t avail, size_t context,
             uint64_t* hash) const override;
  size_t max_size() const override { return max_size_; }

  // D(p) for the 64 bytes [last - 63, last], computed from a zero digest:
  // the digest restic holds at `last` when at least 64 bytes of the chunk
  // have been slid (stage 2's hash at a cut).
  uint64_t WindowDigest(const uint8_t* last) const;

  const RabinTables& tables() const { return tables_; }
  uint64_t split_mask() const { return split_mask_; }

 private:
  size_t min_size_;
  size_t max_size_;
  uint64_t split_mask_;
  RabinTables tables_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_RABIN_H_
