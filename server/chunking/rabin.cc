#include "chunking/rabin.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "chunking/limits.h"

namespace chunkd::chunking {
namespace {

// Polynomials over GF(2) in a uint64_t, bit i the coefficient of x^i: the
// arithmetic of the irreducibility test and of the tables (not the hot
// path).

// -1 for the zero polynomial.
int Degree(uint64_t p) { return p == 0 ? -1 : 63 - __builtin_clzll(p); }

// a mod p by long division. REQUIRES: p != 0.
uint64_t PolyMod(uint64_t a, uint64_t p) {
  const int dp = Degree(p);
  for (int da = Degree(a); da >= dp; da = Degree(a)) a ^= p << (da - dp);
  return a;
}

// a * b mod p, shifting a by x per bit of b and reducing as it goes.
// REQUIRES: Degree(a) < Degree(p), so that a * x fits in 64 bits.
uint64_t PolyMulMod(uint64_t a, uint64_t b, uint64_t p) {
  const uint64_t top = uint64_t{1} << Degree(p);
  uint64_t product = 0;
  for (; b != 0; b >>= 1) {
    if ((b & 1) != 0) product ^= a;
    a <<= 1;
    if ((a & top) != 0) a ^= p;
  }
  return product;
}

uint64_t PolyGcd(uint64_t a, uint64_t b) {
  while (b != 0) {
    a = PolyMod(a, b);
    std::swap(a, b);
  }
  return a;
}

// One slide of restic's window: remove `leaving` (out table), append `in`
// and reduce (mod table). Also the window's whole arithmetic: with
// leaving == 0 (out[0] == 0) it only appends.
inline uint64_t Slide(const RabinTables& t, uint64_t digest, uint8_t leaving,
                      uint8_t in) {
  digest ^= t.out[leaving];
  return ((digest << 8) | in) ^ t.mod[digest >> kRabinShift];
}

}  // namespace

bool RabinPolynomialIsIrreducible(uint64_t polynomial) {
  const int degree = Degree(polynomial);
  if (degree < 1) return false;
  // A reducible polynomial of degree d has an irreducible factor of some
  // degree i <= d / 2, and those factors are exactly the common factors with
  // x^(2^i) - x. The loop is empty for degree 1 (x itself is not reduced
  // then, but it is never used).
  constexpr uint64_t kX = 2;
  uint64_t power = kX;  // x^(2^i) mod P
  for (int i = 1; i <= degree / 2; ++i) {
    power = PolyMulMod(power, power, polynomial);
    if (PolyGcd(polynomial, power ^ kX) != 1) return false;
  }
  return true;
}

RabinTables MakeRabinTables(uint64_t polynomial) {
  const int degree = Degree(polynomial);
  // x^(8 * 63) mod P: a byte followed by the window's 63 other bytes.
  uint64_t leaving_weight = 1;
  for (uint32_t i = 0; i < 8 * (kRabinWindowSize - 1); ++i) {
    leaving_weight = PolyMulMod(leaving_weight, 2, polynomial);
  }
  // x^degree mod P is P without its leading term.
  const uint64_t top_weight = polynomial ^ (uint64_t{1} << degree);
  RabinTables tables;
  for (uint64_t b = 0; b < 256; ++b) {
    tables.out[b] = PolyMulMod(b, leaving_weight, polynomial);
    tables.mod[b] = PolyMulMod(b, top_weight, polynomial) | (b << degree);
  }
  return tables;
}

RabinCutter::RabinCutter(uint32_t min_size, uint32_t avg_size,
                         uint32_t max_size, uint64_t polynomial)
    : min_size_(min_size),
      max_size_(max_size),
      split_mask_(avg_size - 1),
      tables_(MakeRabinTables(polynomial)) {}

uint64_t RabinCutter::WindowDigest(const uint8_t* last) const {
  uint64_t digest = 0;
  for (const uint8_t* b = last - (kRabinWindowSize - 1); b <= last; ++b) {
    digest = Slide(tables_, digest, 0, *b);
  }
  return digest;
}

size_t RabinCutter::Cut(const uint8_t* chunk_start, size_t avail,
                        size_t /*context*/, uint64_t* hash) const {
  *hash = 0;
  // The stream ends before a single byte was tested.
  if (avail < min_size_) return avail;
  const size_t limit = std::min(avail, max_size_);
  const uint8_t* const c = chunk_start;
  // restic's reset: the window zeroed, then the byte 1 slid in (its first
  // slot), so the digest is 1; the first min_size - 64 bytes are skipped.
  // The next 63 slides push out zeros, the 64th pushes out that 1.
  constexpr size_t kWindow = kRabinWindowSize;
  uint64_t digest = 1;
  for (size_t i = min_size_ - kWindow; i < min_size_ - 1; ++i) {
    digest = Slide(tables_, digest, 0, c[i]);
  }
  digest = Slide(tables_, digest, 1, c[min_size_ - 1]);
  // restic tests every slid byte but cuts only from length min_size on:
  // the first test that can cut is the one above.
  size_t i = min_size_ - 1;
  while ((digest & split_mask_) != 0) {
    if (++i == limit) return limit;  // max_size or the end of the stream
    digest = Slide(tables_, digest, c[i - kWindow], c[i]);
  }
  *hash = digest;
  return i + 1;
}

}  // namespace chunkd::chunking
