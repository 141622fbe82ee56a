#include "chunking/fastcdc.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace chunkd::chunking {
namespace {

// GEAR[i] = first 8 bytes (big-endian) of MD5 of 64 bytes of value i. These are
// the crate's published constants; fastcdc_test.cc recomputes them with
// OpenSSL so that a typo cannot hide here.
constexpr std::array<uint64_t, 256> kGear = {
    0x3b5d3c7d207e37dc, 0x784d68ba91123086, 0xcd52880f882e7298,
    0xeacf8e4e19fdcca7, 0xc31f385dfbd1632b, 0x1d5f27001e25abe6,
    0x83130bde3c9ad991, 0xc4b225676e9b7649, 0xaa329b29e08eb499,
    0xb67fcbd21e577d58, 0x0027baaada2acf6b, 0xe3ef2d5ac73c2226,
    0x0890f24d6ed312b7, 0xa809e036851d7c7e, 0xf0a6fe5e0013d81b,
    0x1d026304452cec14, 0x03864632648e248f, 0xcdaacf3dcd92b9b4,
    0xf5e012e63c187856, 0x8862f9d3821c00b6, 0xa82f7338750f6f8a,
    0x1e583dc6c1cb0b6f, 0x7a3145b69743a7f1, 0xabb20fee404807eb,
    0xb14b3cfe07b83a5d, 0xb9dc27898adb9a0f, 0x3703f5e91baa62be,
    0xcf0bb866815f7d98, 0x3d9867c41ea9dcd3, 0x1be1fa65442bf22c,
    0x14300da4c55631d9, 0xe698e9cbc6545c99, 0x4763107ec64e92a5,
    0xc65821fc65696a24, 0x76196c064822f0b7, 0x485be841f3525e01,
    0xf652bc9c85974ff5, 0xcad8352face9e3e9, 0x2a6ed1dceb35e98e,
    0xc6f483badc11680f, 0x3cfd8c17e9cf12f1, 0x89b83c5e2ea56471,
    0xae665cfd24e392a9, 0xec33c4e504cb8915, 0x3fb9b15fc9fe7451,
    0xd7fd1fd1945f2195, 0x31ade0853443efd8, 0x255efc9863e1e2d2,
    0x10eab6008d5642cf, 0x46f04863257ac804, 0xa52dc42a789a27d3,
    0xdaaadf9ce77af565, 0x6b479cd53d87febb, 0x6309e2d3f93db72f,
    0xc5738ffbaa1ff9d6, 0x6bd57f3f25af7968, 0x67605486d90d0a4a,
    0xe14d0b9663bfbdae, 0xb7bbd8d816eb0414, 0xdef8a4f16b35a116,
    0xe7932d85aaaffed6, 0x08161cbae90cfd48, 0x855507beb294f08b,
    0x91234ea6ffd399b2, 0xad70cf4b2435f302, 0xd289a97565bc2d27,
    0x8e558437ffca99de, 0x96d2704b7115c040, 0x0889bbcdfc660e41,
    0x5e0d4e67dc92128d, 0x72a9f8917063ed97, 0x438b69d409e016e3,
    0xdf4fed8a5d8a4397, 0x00f41dcf41d403f7, 0x4814eb038e52603f,
    0x9dafbacc58e2d651, 0xfe2f458e4be170af, 0x4457ec414df6a940,
    0x06e62f1451123314, 0xbd1014d173ba92cc, 0xdef318e25ed57760,
    0x9fea0de9dfca8525, 0x459de1e76c20624b, 0xaeec189617e2d666,
    0x126a2c06ab5a83cb, 0xb1321532360f6132, 0x65421503dbb40123,
    0x2d67c287ea089ab3, 0x6c93bff5a56bd6b6, 0x4ffb2036cab6d98d,
    0xce7b785b1be7ad4f, 0xedb42ef6189fd163, 0xdc905288703988f6,
    0x365f9c1d2c691884, 0xc640583680d99bfe, 0x3cd4624c07593ec6,
    0x7f1ea8d85d7c5805, 0x014842d480b57149, 0x0b649bcb5a828688,
    0xbcd5708ed79b18f0, 0xe987c862fbd2f2f0, 0x982731671f0cd82c,
    0xbaf13e8b16d8c063, 0x8ea3109cbd951bba, 0xd141045bfb385cad,
    0x2acbc1a0af1f7d30, 0xe6444d89df03bfdf, 0xa18cc771b8188ff9,
    0x9834429db01c39bb, 0x214add07fe086a1f, 0x8f07c19b1f6b3ff9,
    0x56a297b1bf4ffe55, 0x94d558e493c54fc7, 0x40bfc24c764552cb,
    0x931a706f8a8520cb, 0x32229d322935bd52, 0x2560d0f5dc4fefaf,
    0x9dbcc48355969bb6, 0x0fd81c3985c0b56a, 0xe03817e1560f2bda,
    0xc1bb4f81d892b2d5, 0xb0c4864f4e28d2d7, 0x3ecc49f9d9d6c263,
    0x51307e99b52ba65e, 0x8af2b688da84a752, 0xf5d72523b91b20b6,
    0x6d95ff1ff4634806, 0x562f21555458339a, 0xc0ce47f889336346,
    0x487823e5089b40d8, 0xe4727c7ebc6d9592, 0x5a8f7277e94970ba,
    0xfca2f406b1c8bb50, 0x5b1f8a95f1791070, 0xd304af9fc9028605,
    0x5440ab7fc930e748, 0x312d25fbca2ab5a1, 0x10f4a4b234a4d575,
    0x90301d55047e7473, 0x3b6372886c61591e, 0x293402b77c444e06,
    0x451f34a4d3e97dd7, 0x3158d814d81bc57b, 0x034942425b9bda69,
    0xe2032ff9e532d9bb, 0x62ae066b8b2179e5, 0x9545e10c2f8d71d8,
    0x7ff7483eb2d23fc0, 0x00945fcebdc98d86, 0x8764bbbe99b26ca2,
    0x1b1ec62284c0bfc3, 0x58e0fcc4f0aa362b, 0x5f4abefa878d458d,
    0xfd74ac2f9607c519, 0xa4e3fb37df8cbfa9, 0xbf697e43cac574e5,
    0x86f14a3f68f4cd53, 0x24a23d076f1ce522, 0xe725cd8048868cc8,
    0xbf3c729eb2464362, 0xd8f6cd57b3cc1ed8, 0x6329e52425541577,
    0x62aa688ad5ae1ac0, 0x0a242566269bf845, 0x168b1a4753aca74b,
    0xf789afefff2e7e3c, 0x6c3362093b6fccdb, 0x4ce8f50bd28c09b2,
    0x006a2db95ae8aa93, 0x975b0d623c3d1a8c, 0x18605d3935338c5b,
    0x5bb6f6136cad3c71, 0x0f53a20701f8d8a6, 0xab8c5ad2e7e93c67,
    0x40b5ac5127acaa29, 0x8c7bf63c2075895f, 0x78bd9f7e014a805c,
    0xb2c9e9f4f9c8c032, 0xefd6049827eb91f3, 0x2be459f482c16fbd,
    0xd92ce0c5745aaa8c, 0x0aaa8fb298d965b9, 0x2b37f92c6c803b15,
    0x8c54a5e94e0f0e78, 0x95f9b6e90c0a3032, 0xe7939faa436c7874,
    0xd16bfe8f6a8a40c9, 0x44982b86263fd2fa, 0xe285fb39f984e583,
    0x779a8df72d7619d3, 0xf2d79a8de8d5dd1e, 0xd1037354d66684e2,
    0x004c82a4e668a8e5, 0x31d40a7668b044e6, 0xd70578538bd02c11,
    0xdb45431078c5f482, 0x977121bb7f6a51ad, 0x73d5ccbd34eff8dd,
    0xe437a07d356e17cd, 0x47b2782043c95627, 0x9fb251413e41d49a,
    0xccd70b60652513d3, 0x1c95b31e8a1b49b2, 0xcae73dfd1bcb4c1b,
    0x34d98331b1f5b70f, 0x784e39f22338d92f, 0x18613d4a064df420,
    0xf1d8dae25f0bcebe, 0x33f77c15ae855efc, 0x3c88b3b912eb109c,
    0x956a2ec96bafeea5, 0x1aa005b5e0ad0e87, 0x5500d70527c4bb8e,
    0xe36c57196421cc44, 0x13c4d286cc36ee39, 0x5654a23d818b2a81,
    0x77b1dc13d161abdc, 0x734f44de5f8d5eb5, 0x60717e174a6c89a2,
    0xd47d9649266a211e, 0x5b13a4322bb69e90, 0xf7669609f8b5fc3c,
    0x21e6ac55bedcdac9, 0x9b56b62b61166dea, 0xf48f66b939797e9c,
    0x35f332f9c0e6ae9a, 0xcc733f6a9a878db0, 0x3da161e41cc108c2,
    0xb7d74ae535914d51, 0x4d493b0b11d36469, 0xce264d1dfba9741a,
    0xa9d1f2dc7436dc06, 0x70738016604c2a27, 0x231d36e96e93f3d5,
    0x7666881197838d19, 0x4a2a83090aaad40c, 0xf1e761591668b35d,
    0x7363236497f730a7, 0x301080e37379dd4d, 0x502dea2971827042,
    0xc2c5eb858f32625f, 0x786afb9edfafbdff, 0xdaee0d868490b2a4,
    0x617366b3268609f6, 0xae0e35a0fe46173e, 0xd1a07de93e824f11,
    0x079b8b115ea4cca8, 0x93a99274558faebb, 0xfb1e6e22e08a03b3,
    0xea635fdba3698dd0, 0xcf53659328503a5c, 0xcde3b31e6fd5d780,
    0x8e3e4221d3614413, 0xef14d0d86bf1a22c, 0xe1d830d3f16c5ddb,
    0xaabd2b2a451504e1,
};

// A lane shorter than this is not worth its 64 bytes of warm-up (at most
// 1/8 of the lane).
constexpr size_t kMinLane = 512;

// RollPair's answer when neither position of the pair passes its mask.
constexpr int kNoHit = 2;

// A lane's bytes, rounded down to a multiple of 4 (the two-lane loop's
// step), or 0 below kMinLane.
size_t LaneBytes(size_t bytes) {
  const size_t lane = bytes / 4 * 4;
  return lane >= kMinLane ? lane : 0;
}

// Rolls the pair p[0], p[1] into *h, the one-byte-at-a-time hash before p
// (which the crate's loop holds after each pair): the crate's two steps,
// with the intermediate value — twice the one-byte hash — tested against
// the doubled mask. Returns 0 or 1 for the first of the two positions that
// passes, *h then the crate's hash there, or kNoHit.
__attribute__((always_inline)) inline int RollPair(const uint8_t* p,
                                                   const FastCdcRegion& region,
                                                   uint64_t* h) {
  const uint64_t even = (*h << 2) + region.gear_ls[p[0]];
  if (__builtin_expect((even & region.mask_even) == 0, 0)) {
    *h = even;
    return 0;
  }
  *h = even + region.gear[p[1]];
  if (__builtin_expect((*h & region.mask_odd) == 0, 0)) return 1;
  return kNoHit;
}

// Rolls the four bytes p[0..3] into *h as two RollPair calls would, but
// with the hash after them computed beside the chain of the intermediate
// values — (h << 4) + the four table values' weighted sum — so that the
// chain carried from step to step is a shift and an add per four bytes.
// Returns the first of the four positions that passes, *h the crate's hash
// there, or 4.
__attribute__((always_inline)) inline int RollQuad(const uint8_t* p,
                                                   const FastCdcRegion& region,
                                                   uint64_t* h) {
  const uint64_t x0 = region.gear_ls[p[0]];
  const uint64_t y0 = region.gear[p[1]];
  const uint64_t x1 = region.gear_ls[p[2]];
  const uint64_t y1 = region.gear[p[3]];
  const uint64_t even0 = (*h << 2) + x0;
  const uint64_t odd0 = even0 + y0;
  const uint64_t even1 = (odd0 << 2) + x1;
  const uint64_t odd1 = (*h << 4) + (((x0 + y0) << 2) + x1 + y1);
  int hit = 4;
  if (__builtin_expect((even0 & region.mask_even) == 0, 0)) {
    *h = even0;
    hit = 0;
  } else if (__builtin_expect((odd0 & region.mask_odd) == 0, 0)) {
    *h = odd0;
    hit = 1;
  } else if (__builtin_expect((even1 & region.mask_even) == 0, 0)) {
    *h = even1;
    hit = 2;
  } else {
    *h = odd1;
    if (__builtin_expect((odd1 & region.mask_odd) == 0, 0)) hit = 3;
  }
  return hit;
}

// One lane over the pairs [a, end), a and end even: the first position
// that passes, else end; *h as RollPair. Four bytes per step (RollQuad),
// the last pair alone.
size_t RollOneLane(const uint8_t* s, size_t a, size_t end,
                   const FastCdcRegion& region, uint64_t* h) {
  for (; a + 4 <= end; a += 4) {
    const int hit = RollQuad(s + a, region, h);
    if (hit != 4) return a + static_cast<size_t>(hit);
  }
  if (a < end) {
    const int hit = RollPair(s + a, region, h);
    if (hit != kNoHit) return a + static_cast<size_t>(hit);
  }
  return end;
}

// The one-byte hash after rolling s[from, to) from 0.
uint64_t RollBytes(const uint8_t* s, size_t from, size_t to,
                   const uint64_t* gear) {
  uint64_t h = 0;
  for (size_t q = from; q < to; ++q) h = (h << 1) + gear[s[q]];
  return h;
}

// Two lanes over [a, a + 2 * lane) (fastcdc.h): lane 0 from a with *h,
// lane 1 from b = a + lane with the hash of the 64 bytes before b — all
// that the 64-bit hash keeps — or of those since `restart`, where the hash
// starts, if fewer. Returns the first position that passes, else
// a + 2 * lane; *h as RollPair.
size_t RollTwoLanes(const uint8_t* s, size_t restart, size_t a,
                    const FastCdcRegion& region, uint64_t* h) {
  const size_t lane = region.lane;
  const size_t b = a + lane;
  uint64_t h0 = *h;
  uint64_t h1 = RollBytes(s, std::max(restart, b - 64), b, region.gear);
  const uint8_t* const p0 = s + a;
  const uint8_t* const p1 = s + b;
  for (size_t t = 0; t < lane; t += 4) {
    int hit = RollPair(p0 + t, region, &h0);
    if (hit == kNoHit) hit = 2 + RollPair(p0 + t + 2, region, &h0);
    if (hit != 2 + kNoHit) {
      *h = h0;
      return a + t + static_cast<size_t>(hit);
    }
    hit = RollPair(p1 + t, region, &h1);
    if (hit == kNoHit) hit = 2 + RollPair(p1 + t + 2, region, &h1);
    if (hit != 2 + kNoHit) {
      // Lane 1's hit stands only if lane 0, done up to a + t + 4, has none
      // in the rest of its bytes.
      const size_t first = RollOneLane(s, a + t + 4, b, region, &h0);
      if (first < b) {
        *h = h0;
        return first;
      }
      *h = h1;
      return b + t + static_cast<size_t>(hit);
    }
  }
  *h = h1;
  return a + 2 * lane;
}

// The pairs [a, end) of one mask region: blocks of two lanes while they
// fit, the rest in one lane. Returns the first position that passes, else
// end; *h as RollPair.
size_t RollRegion(const uint8_t* s, size_t restart, size_t a, size_t end,
                  const FastCdcRegion& region, uint64_t* h) {
  if (region.lane != 0) {
    while (end - a >= 2 * region.lane) {
      const size_t hit = RollTwoLanes(s, restart, a, region, h);
      if (hit < a + 2 * region.lane) return hit;
      a += 2 * region.lane;
    }
  }
  return RollOneLane(s, a, end, region, h);
}

}  // namespace

const std::array<uint64_t, 256>& FastCdcGearTable() { return kGear; }

uint32_t FastCdcLog2Round(uint32_t value) {
  if (value == 0) return 0;
  uint32_t floor_log2 = 31;
  while ((value >> floor_log2) == 0) --floor_log2;
  // round(log2(v)) = k + 1 exactly when v >= 2^(k + 0.5), i.e.
  // v^2 >= 2^(2k + 1). The boundary is irrational, so no ties arise and this
  // equals the crate's f64 computation.
  const uint64_t square = static_cast<uint64_t>(value) * value;
  return square >= (uint64_t{1} << (2 * floor_log2 + 1)) ? floor_log2 + 1
                                                         : floor_log2;
}

FastCdcCutter::FastCdcCutter(uint32_t min_size, uint32_t avg_size,
                             uint32_t max_size, uint32_t level, uint64_t seed)
    : min_size_(min_size), avg_size_(avg_size), max_size_(max_size) {
  const uint32_t bits = FastCdcLog2Round(avg_size);
  mask_s_ = kFastCdcMasks[bits + level];
  mask_l_ = kFastCdcMasks[bits - level];
  mask_s_ls_ = mask_s_ << 1;
  mask_l_ls_ = mask_l_ << 1;
  // The crate XORs only when seed > 0; XOR with 0 is the identity anyway.
  for (size_t i = 0; i < 256; ++i) {
    gear_[i] = kGear[i] ^ seed;
    gear_ls_[i] = (kGear[i] << 1) ^ (seed << 1);
  }
  // The strict region [min, avg) in one block of two lanes, unless the
  // strict mask's mean distance to a hit, 2^(bits + level), is shorter than
  // the region; the loose region in blocks of that mean distance,
  // 2^(bits - level).
  const size_t strict = avg_size_ / 2 * 2 - min_size_ / 2 * 2;
  strict_ = {gear_.data(), gear_ls_.data(), mask_s_ls_, mask_s_,
             LaneBytes(std::min(strict / 2, size_t{1} << (bits + level - 1)))};
  loose_ = {gear_.data(), gear_ls_.data(), mask_l_ls_, mask_l_,
            LaneBytes(size_t{1} << (bits - level - 1))};
}

size_t FastCdcCutter::Cut(const uint8_t* chunk_start, size_t avail,
                          size_t /*context*/, uint64_t* hash) const {
  const uint8_t* const source = chunk_start;
  size_t remaining = avail;
  if (remaining <= min_size_) {
    *hash = 0;
    return remaining;
  }
  size_t center = avg_size_;
  if (remaining > max_size_) {
    remaining = max_size_;
  } else if (remaining < center) {
    center = remaining;
  }
  size_t index = min_size_ / 2;
  uint64_t h = 0;
  // Unsigned arithmetic wraps like the crate's wrapping_add.
  for (; index < center / 2; ++index) {
    const size_t a = index * 2;
    h = (h << 2) + gear_ls_[source[a]];
    if ((h & mask_s_ls_) == 0) {
      *hash = h;
      return a;
    }
    h += gear_[source[a + 1]];
    if ((h & mask_s_) == 0) {
      *hash = h;
      return a + 1;
    }
  }
  for (; index < remaining / 2; ++index) {
    const size_t a = index * 2;
    h = (h << 2) + gear_ls_[source[a]];
    if ((h & mask_l_ls_) == 0) {
      *hash = h;
      return a;
    }
    h += gear_[source[a + 1]];
    if ((h & mask_l_) == 0) {
      *hash = h;
      return a + 1;
    }
  }
  // No cut point (e.g. all zeros): the longest chunk allowed.
  *hash = h;
  return remaining;
}

size_t FastCdcCutter::CutTwoLanes(const uint8_t* chunk_start, size_t avail,
                                  uint64_t* hash) const {
  // The same limits as Cut, as even offsets: positions [restart,
  // strict_end) are tested with mask_s, [strict_end, end) with mask_l.
  size_t remaining = avail;
  if (remaining <= min_size_) {
    *hash = 0;
    return remaining;
  }
  size_t center = avg_size_;
  if (remaining > max_size_) {
    remaining = max_size_;
  } else if (remaining < center) {
    center = remaining;
  }
  const size_t restart = min_size_ / 2 * 2;
  const size_t strict_end = std::max(restart, center / 2 * 2);
  const size_t end = std::max(strict_end, remaining / 2 * 2);
  uint64_t h = 0;
  size_t at =
      RollRegion(chunk_start, restart, restart, strict_end, strict_, &h);
  if (at == strict_end) {
    at = RollRegion(chunk_start, restart, strict_end, end, loose_, &h);
  }
  *hash = h;
  return at == end ? remaining : at;
}

}  // namespace chunkd::chunking
