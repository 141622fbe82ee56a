// Constant tables of the rolling CRC-32 (reflected 0xEDB88320, initial 0, no
// final XOR, 256-byte window; docs/design.md, "crc32: rolling CRC-32"), shared by every kernel.
//
// The one place the tables are computed: chunking/crc32.cc (the reference
// cutter and stage 2's window CRC) uses them as well. They live with the
// kernels because that library is the lower layer: chunkd_chunking links
// against it, not the other way round.
//
// One rolling step is  crc' = T[(crc ^ in) & 0xff] ^ (crc >> 8) ^ OUT[out]
// (T[b] = CRC of the single byte b, OUT[b] = CRC of b followed by 256 zero
// bytes). Both T and OUT are linear over GF(2) — a CRC with initial value 0
// is — so each byte j of T[x] is an 8x8 bit matrix applied to x. The vector
// kernels keep the 32-bit state as four byte planes and apply those matrices
// with GF2P8AFFINEQB (avx512) or two 16-entry nibble tables (avx2).
//
// Everything here is constexpr data (plain arrays, no functions called at run
// time), so including it in a translation unit compiled for a wider
// instruction set emits no code another translation unit could pick up.
//
// Thread safety: immutable constants.
#ifndef CHUNKD_CHUNKING_KERNELS_CRC32_TABLES_H_
#define CHUNKD_CHUNKING_KERNELS_CRC32_TABLES_H_

#include <cstddef>
#include <cstdint>

namespace chunkd::chunking::kernels {

// Bytes in the rolling window, the current byte included.
inline constexpr size_t kCrcWindow = 256;

// The tables of one rolling step (above) in every form a kernel uses them.
// Immutable constants (kCrcTables); default: all zero.
struct CrcTables {
  uint32_t byte[256];  // T
  uint32_t out[256];   // OUT
  // GF2P8AFFINEQB matrices: byte j of T[x] and of OUT[x] as functions of x.
  uint64_t byte_affine[4];
  uint64_t out_affine[4];
  // Nibble tables: byte j of T[n] and T[n << 4] (and the same for OUT), for
  // n in 0..15; T[x] = T[x & 15] ^ T[x & 0xf0].
  uint8_t byte_lo[4][16];
  uint8_t byte_hi[4][16];
  uint8_t out_lo[4][16];
  uint8_t out_hi[4][16];
};

namespace crc_internal {

constexpr uint32_t kPolynomial = 0xEDB88320;

constexpr uint32_t UpdateByte(const uint32_t (&table)[256], uint32_t crc,
                              uint8_t byte) {
  return table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
}

// The GF2P8AFFINEQB matrix of the linear map x -> byte `plane` of f[x]: bit i
// of the result is the parity of (matrix byte 7 - i) & x, so that byte lists
// the input bits feeding output bit i.
constexpr uint64_t AffineMatrix(const uint32_t (&f)[256], int plane) {
  uint64_t matrix = 0;
  for (int i = 0; i < 8; ++i) {
    uint64_t row = 0;
    for (int k = 0; k < 8; ++k) {
      row |= static_cast<uint64_t>((f[1u << k] >> (8 * plane + i)) & 1) << k;
    }
    matrix |= row << (8 * (7 - i));
  }
  return matrix;
}

constexpr CrcTables MakeCrcTables() {
  CrcTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) ? (crc >> 1) ^ kPolynomial : crc >> 1;
    }
    t.byte[i] = crc;
  }
  // OUT is linear too: compute it for the eight single-bit bytes (2048
  // steps, well within every compiler's constexpr budget) and XOR.
  uint32_t out_bit[8] = {};
  for (int k = 0; k < 8; ++k) {
    uint32_t crc = UpdateByte(t.byte, 0, static_cast<uint8_t>(1u << k));
    for (size_t i = 0; i < kCrcWindow; ++i) crc = UpdateByte(t.byte, crc, 0);
    out_bit[k] = crc;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = 0;
    for (int k = 0; k < 8; ++k) {
      if (b & (1u << k)) crc ^= out_bit[k];
    }
    t.out[b] = crc;
  }
  for (int j = 0; j < 4; ++j) {
    t.byte_affine[j] = AffineMatrix(t.byte, j);
    t.out_affine[j] = AffineMatrix(t.out, j);
    for (uint32_t n = 0; n < 16; ++n) {
      t.byte_lo[j][n] = static_cast<uint8_t>(t.byte[n] >> (8 * j));
      t.byte_hi[j][n] = static_cast<uint8_t>(t.byte[n << 4] >> (8 * j));
      t.out_lo[j][n] = static_cast<uint8_t>(t.out[n] >> (8 * j));
      t.out_hi[j][n] = static_cast<uint8_t>(t.out[n << 4] >> (8 * j));
    }
  }
  return t;
}

}  // namespace crc_internal

inline constexpr CrcTables kCrcTables = crc_internal::MakeCrcTables();

}  // namespace chunkd::chunking::kernels

#endif  // CHUNKD_CHUNKING_KERNELS_CRC32_TABLES_H_
