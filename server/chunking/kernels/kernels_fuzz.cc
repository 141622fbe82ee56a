// libFuzzer target: every kernel this CPU supports against the scalar
// kernel, bit for bit, on random ranges of random bytes. Aborts on the first
// difference (and AddressSanitizer on any read outside [0, end)).
//
// Input: a 24-byte header of parameters, then the data. The data is copied
// to a heap buffer of exactly its size, so reading past `end` — the end of
// the buffer — or before data[0] is a heap-buffer-overflow.
//
// Build (clang): cmake -DCHUNKD_FUZZ=ON -DCHUNKD_BUILD_TESTS=OFF ... and run
//   chunking_kernels_fuzz -max_len=300000 -max_total_time=30
// (long inputs reach the multi-lane and tiled paths).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "chunking/fastcdc.h"
#include "chunking/kernels/kernels.h"

namespace {

using chunkd::chunking::kFastCdcMasks;
using chunkd::chunking::kernels::AllKernelSets;
using chunkd::chunking::kernels::BitmapWords;
using chunkd::chunking::kernels::GearParams;
using chunkd::chunking::kernels::KernelSet;
using chunkd::chunking::kernels::ScalarKernelSet;

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

[[noreturn]] void Fail(const char* what, const KernelSet& k, size_t begin,
                       size_t end) {
  std::fprintf(stderr, "kernel %s differs from scalar: %s [%zu, %zu)\n", k.name,
               what, begin, end);
  std::abort();
}

void Compare(const char* what, const KernelSet& k, size_t begin, size_t end,
             const std::vector<uint64_t>& want,
             const std::vector<uint64_t>& got) {
  if (want != got) Fail(what, k, begin, end);
}

constexpr uint64_t kGarbage = 0x5A5A5A5A5A5A5A5Aull;
constexpr uint64_t kCanary = 0xC0FFEE00C0FFEE00ull;

// Output with garbage in every word (all must be written) and a canary word
// after the last (which must not be).
std::vector<uint64_t> Fresh(size_t n) {
  std::vector<uint64_t> v(BitmapWords(n) + 1, kGarbage);
  v.back() = kCanary;
  return v;
}

void CheckRange(const uint8_t* data, size_t begin, size_t end,
                const GearParams& gear, uint32_t crc_mask) {
  const size_t n = end - begin;
  std::vector<uint64_t> s0 = Fresh(n), l0 = Fresh(n), c0 = Fresh(n),
                        g0 = Fresh(n), t0 = Fresh(n);
  const KernelSet& scalar = ScalarKernelSet();
  scalar.fastcdc(data, begin, end, gear, s0.data(), l0.data());
  scalar.crc32(data, begin, end, crc_mask, c0.data());
  scalar.seqcdc(data, begin, end, g0.data(), t0.data());
  for (const KernelSet* k : AllKernelSets()) {
    if (k == &scalar || !k->supported()) continue;
    std::vector<uint64_t> s = Fresh(n), l = Fresh(n), c = Fresh(n),
                          g = Fresh(n), t = Fresh(n);
    k->fastcdc(data, begin, end, gear, s.data(), l.data());
    Compare("fastcdc mask_s", *k, begin, end, s0, s);
    Compare("fastcdc mask_l", *k, begin, end, l0, l);
    k->crc32(data, begin, end, crc_mask, c.data());
    Compare("crc32", *k, begin, end, c0, c);
    k->seqcdc(data, begin, end, g.data(), t.data());
    Compare("seqcdc gt", *k, begin, end, g0, g);
    Compare("seqcdc lt", *k, begin, end, t0, t);
  }
  if (s0.back() != kCanary || c0.back() != kCanary) {
    Fail("scalar wrote past the bitmap", scalar, begin, end);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t size) {
  constexpr size_t kHeader = 24;
  if (size < kHeader) return 0;
  uint64_t seed;
  std::memcpy(&seed, input, 8);
  const uint8_t level_avg = input[8];  // FastCDC mask pair, or raw masks
  const uint8_t crc_bits = input[9];   // crc32 mask 2^k - 1, or raw
  const uint8_t ranges = input[10] % 8 + 1;
  const uint8_t gear_kind = input[11];  // crate table, seeded, or random
  uint64_t raw_mask;
  std::memcpy(&raw_mask, input + 12, 8);
  uint32_t raw_crc;
  std::memcpy(&raw_crc, input + 20, 4);

  const size_t n = size - kHeader;
  // Exactly n bytes on the heap: AddressSanitizer guards both ends.
  uint8_t* data = static_cast<uint8_t*>(std::malloc(n == 0 ? 1 : n));
  if (n > 0) std::memcpy(data, input + kHeader, n);

  std::vector<uint64_t> gear(256);
  const auto& base = chunkd::chunking::FastCdcGearTable();
  uint64_t state = seed;
  for (int i = 0; i < 256; ++i) {
    switch (gear_kind % 3) {
      case 0:
        gear[i] = base[i];
        break;
      case 1:
        gear[i] = base[i] ^ seed;
        break;
      default:
        gear[i] = SplitMix(&state);
        break;
    }
  }
  GearParams params;
  params.gear = gear.data();
  if (level_avg < 200) {
    // mask_s = MASKS[bits + level], mask_l = MASKS[bits - level], as the
    // cutter picks them for avg 2^bits in [256 B, 4 MiB], level 0..3.
    const uint32_t bits = 8 + level_avg % 15, level = (level_avg / 15) % 4;
    params.mask_s = kFastCdcMasks[bits + level];
    params.mask_l = kFastCdcMasks[bits - level];
  } else {
    params.mask_s = raw_mask;
    params.mask_l = level_avg & 1 ? raw_mask >> 17 : raw_mask & (raw_mask >> 7);
  }
  const uint32_t crc_mask =
      crc_bits < 200 ? (uint32_t{1} << (crc_bits % 23)) - 1 : raw_crc;

  CheckRange(data, 0, n, params, crc_mask);
  for (int r = 0; r < ranges && n > 0; ++r) {
    size_t a = SplitMix(&state) % (n + 1), b = SplitMix(&state) % (n + 1);
    if (a > b) {
      const size_t t = a;
      a = b;
      b = t;
    }
    CheckRange(data, a, b, params, crc_mask);
  }
  std::free(data);
  return 0;
}
