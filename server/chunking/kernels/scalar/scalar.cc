// The scalar kernel set: every stage-1 function as the definition of
// functions.h, one position after the other (the CHUNKD_KERNEL_SET_SCALAR
// part of each body in generic/). They are the reference of the
// differential tests, so they stay the plain rolling loops of the
// definitions — clear first, fast second (bits are collected a word at a
// time in registers).

#include <cstddef>
#include <cstdint>

#include "chunking/kernels/kernel_sets.h"

namespace chunkd::chunking::kernels::scalar {
namespace {

// Calls bits(p, &a, &b) for p in [begin, end) and stores the two bits it
// returns into whole words of out_a and out_b (the last one zero-padded).
template <class Bits>
void ForEachWord(size_t begin, size_t end, uint64_t* out_a, uint64_t* out_b,
                 Bits bits) {
  size_t p = begin;
  while (p < end) {
    const size_t stop = end - p < 64 ? end : p + 64;
    uint64_t wa = 0, wb = 0;
    for (unsigned bit = 0; p < stop; ++p, ++bit) {
      bool a = false, b = false;
      bits(p, &a, &b);
      wa |= uint64_t{a} << bit;
      wb |= uint64_t{b} << bit;
    }
    *out_a++ = wa;
    if (out_b != nullptr) *out_b++ = wb;
  }
}

#define CHUNKD_KERNEL_SET_SCALAR
#include "chunking/kernels/generic/bodies.h"
#undef CHUNKD_KERNEL_SET_SCALAR

}  // namespace

CHUNKD_KERNEL_SET_DEFINITIONS()

}  // namespace chunkd::chunking::kernels::scalar
