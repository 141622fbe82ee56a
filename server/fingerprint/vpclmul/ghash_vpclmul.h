// GHASH (the universal hash of AES-GCM, NIST SP 800-38D) with VPCLMULQDQ on
// 512-bit registers (ghash_vpclmul.cc). Not for direct use: call
// fingerprint/content_key.h, which checks that the CPU can run it.
//
// This header is included by the translation unit compiled with -mavx512f
// -mavx512bw -mavx512vl -mvpclmulqdq -mpclmul: it declares plain types and
// functions only, so that no inline function of a shared header is compiled
// with those flags (docs/design.md, "Kernels and their selection"; check_isa_objects.cmake checks
// the object).
#ifndef CHUNKD_FINGERPRINT_VPCLMUL_GHASH_VPCLMUL_H_
#define CHUNKD_FINGERPRINT_VPCLMUL_GHASH_VPCLMUL_H_

#include <cstddef>
#include <cstdint>

namespace chunkd::fingerprint::vpclmul {

// Powers of the hash key H, aggregated per loop iteration.
inline constexpr int kPowers = 32;
// uint64_t words of the table PrepareKey fills: kPowers 128-bit values.
inline constexpr int kKeyWords = 2 * kPowers;

// Fills key[0..kKeyWords) from h = AES_K(0^128) (16 bytes, GCM byte order):
// the powers H^kPowers .. H^1 in the form GhashAad multiplies with.
void PrepareKey(const unsigned char* h, uint64_t* key);

// GHASH_H(A || 0-pad || len(A) || len(C)) for additional data A = data[0,
// size) and an empty ciphertext C, written to out[0, 16) in GCM byte order.
// The GMAC tag is this XOR AES_K(J0).
void GhashAad(const uint64_t* key, const unsigned char* data, size_t size,
              unsigned char* out);

}  // namespace chunkd::fingerprint::vpclmul

#endif  // CHUNKD_FINGERPRINT_VPCLMUL_GHASH_VPCLMUL_H_
