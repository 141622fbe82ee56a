// Tests of rabin: restic's chunker v0.4.0 byte for byte. restic's published
// vectors (its chunker_test.go: chunks1, chunks2, chunks3 over math/rand data
// seeded 23, lengths, cut fingerprints and SHA-256 of every chunk) and
// polynomial vectors (polynomials_test.go); a literal port of restic's Next
// loop and the direct definition (the fingerprint of each 64-byte window) as
// independent implementations; the claim that restic's digest after a reset
// is a pure window function from length min_size on; the scalar kernel
// against the definition; and the engine (every kernel, 1 and 3 threads,
// every strategy, streamed in pieces) against ReferenceChunks.

#include "chunking/rabin.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "chunking/go_rand_test_util.h"
#include "chunking/kernels/kernels.h"
#include "chunking/limits.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;

// restic's testPol.
constexpr uint64_t kTestPol = 0x3DA3358B4DC173;

// ------------------------------------------------ independent arithmetic --
// restic's own definitions, slow on purpose: long division and appendByte,
// no tables.

int Deg(uint64_t p) { return p == 0 ? -1 : 63 - __builtin_clzll(p); }

uint64_t Mod(uint64_t x, uint64_t p) {
  while (Deg(x) >= Deg(p)) x ^= p << (Deg(x) - Deg(p));
  return x;
}

// restic's appendByte: the fingerprint of the bytes so far followed by b.
uint64_t AppendByte(uint64_t h, uint8_t b, uint64_t p) {
  return Mod((h << 8) | b, p);
}

// The fingerprint of data[first, last] (as a polynomial, mod p).
uint64_t Fingerprint(const uint8_t* data, size_t first, size_t last,
                     uint64_t p) {
  uint64_t h = 0;
  for (size_t i = first; i <= last; ++i) h = AppendByte(h, data[i], p);
  return h;
}

// D(p) of the definition: the window of up to 64 bytes ending at p.
uint64_t WindowFingerprint(const uint8_t* data, size_t p, uint64_t pol) {
  return Fingerprint(data, p >= 63 ? p - 63 : 0, p, pol);
}

// Carry-less product (for building reducible polynomials).
uint64_t ClMul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  for (int i = 0; i < 64; ++i) {
    if ((b >> i) & 1) r ^= a << i;
  }
  return r;
}

// ------------------------------------------------------ restic, literally --

// One chunk as restic's Next returns it, and whether its last byte was a
// candidate (what decides our Chunk::hash).
struct ResticCut {
  size_t length = 0;
  uint64_t cut = 0;
  bool candidate = false;
};

// A line-by-line port of restic's Chunker over a whole buffer: reset (zeroed
// window, digest 0, slide(1), pre = min - 64), the skip, the slide loop with
// its test and the end-of-stream chunk carrying c.digest. The read buffer of
// restic does not change the cuts (its state carries across reads).
std::vector<ResticCut> ResticChunks(const Bytes& data, size_t min, size_t max,
                                    uint64_t mask, const RabinTables& tab) {
  std::array<uint8_t, 64> window{};
  size_t wpos = 0, count = 0, pre = 0;
  uint64_t digest = 0;
  auto slide = [&](uint64_t d, uint8_t b) {
    const uint8_t out = window[wpos];
    window[wpos] = b;
    d ^= tab.out[out];
    wpos = (wpos + 1) % 64;
    const uint64_t index = d >> 45;
    return ((d << 8) | b) ^ tab.mod[index];
  };
  auto reset = [&] {
    window.fill(0);
    digest = 0;
    wpos = 0;
    count = 0;
    digest = slide(digest, 1);
    pre = min - 64;
  };
  reset();
  std::vector<ResticCut> chunks;
  size_t pos = 0;
  while (pos < data.size()) {
    if (pre > 0) {
      const size_t n = std::min(pre, data.size() - pos);
      pre -= n;
      count += n;
      pos += n;
      continue;
    }
    digest = slide(digest, data[pos++]);
    ++count;
    const bool candidate = (digest & mask) == 0;
    if ((candidate || count >= max) && count >= min) {
      chunks.push_back({count, digest, candidate});
      reset();
    }
  }
  if (count > 0) chunks.push_back({count, digest, false});
  return chunks;
}

// Our chunk list for restic's: the digest only for candidate cuts.
std::vector<Chunk> AsChunks(const std::vector<ResticCut>& cuts) {
  std::vector<Chunk> chunks;
  uint64_t offset = 0;
  for (const ResticCut& c : cuts) {
    chunks.push_back(
        {offset, static_cast<uint32_t>(c.length), c.candidate ? c.cut : 0});
    offset += c.length;
  }
  return chunks;
}

// The definition without any rolling: the first p >= s + min - 1 whose window
// fingerprint passes the mask, else min(max, rest).
std::vector<Chunk> DirectChunks(const Bytes& data, size_t min, size_t avg,
                                size_t max, uint64_t pol) {
  std::vector<Chunk> chunks;
  size_t s = 0;
  while (s < data.size()) {
    const size_t end = std::min(data.size(), s + max);
    Chunk chunk{s, static_cast<uint32_t>(end - s), 0};
    for (size_t p = s + min - 1; p < end; ++p) {
      const uint64_t d = WindowFingerprint(data.data(), p, pol);
      if ((d & (avg - 1)) == 0) {
        chunk.length = static_cast<uint32_t>(p - s + 1);
        chunk.hash = d;
        break;
      }
    }
    chunks.push_back(chunk);
    s += chunk.length;
  }
  return chunks;
}

ChunkerOptions Rabin(uint32_t min, uint32_t avg, uint32_t max,
                     uint64_t pol = kTestPol) {
  ChunkerOptions options = DefaultOptions(Algorithm::kRabin);
  options.min_size = min;
  options.avg_size = avg;
  options.max_size = max;
  options.polynomial = pol;
  return options;
}

std::string Sha256Hex(const uint8_t* data, size_t n) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EXPECT_EQ(EVP_Digest(data, n, out, &len, EVP_sha256(), nullptr), 1);
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kDigits[out[i] >> 4];
    hex += kDigits[out[i] & 15];
  }
  return hex;
}

// ---------------------------------------------------------- Go math/rand --

TEST(GoRandTest, MatchesGoSequence) {
  // rand.New(rand.NewSource(seed)).Uint32(), printed by Go 1.26: the first
  // four values, then the one after 10000 more.
  struct Case {
    int64_t seed;
    std::array<uint32_t, 5> values;
  };
  const Case cases[] = {
      {23, {0xcfe58ecf, 0x8c735451, 0x38d75e1a, 0x0bb49b69, 0xd08c24f2}},
      {0, {0xf1f85ff5, 0x3eb60825, 0xa7ecbff2, 0x0de97a55, 0x03018c5f}},
      {-5, {0x3248c9a9, 0x7ae5c3a7, 0x053900cb, 0x67448afd, 0xb738f578}},
      {int64_t{1} << 40,
       {0x97d45fcb, 0xaf7c3e40, 0x20ae61a3, 0x2b73d7b3, 0xf8da91a8}},
  };
  for (const Case& c : cases) {
    testing::GoRand rng(c.seed);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(rng.Uint32(), c.values[i]) << c.seed;
    for (int i = 0; i < 10000; ++i) rng.Uint32();
    EXPECT_EQ(rng.Uint32(), c.values[4]) << c.seed;
  }
}

// ---------------------------------------------------------- polynomials --

TEST(RabinPolynomialTest, ResticIrreducibilityVectors) {
  // polynomials_test.go, polIrredTests.
  const std::pair<uint64_t, bool> vectors[] = {
      {0x38f1e565e288df, false}, {0x3DA3358B4DC173, true},
      {0x30a8295b9d5c91, false}, {0x255f4350b962cb, false},
      {0x267f776110a235, false}, {0x2f4dae10d41227, false},
      {0x2482734cacca49, true},  {0x312daf4b284899, false},
      {0x29dfb6553d01d1, false}, {0x3548245eb26257, false},
      {0x3199e7ef4211b3, false}, {0x362f39017dae8b, false},
      {0x200d57aa6fdacb, false}, {0x35e0a4efa1d275, false},
      {0x2ced55b026577f, false}, {0x260b012010893d, false},
      {0x2df29cbcd59e9d, false}, {0x3f2ac7488bd429, false},
      {0x3e5cb1711669fb, false}, {0x226d8de57a9959, false},
      {0x3c8de80aaf5835, false}, {0x2026a59efb219b, false},
      {0x39dfa4d13fb231, false}, {0x3143d0464b3299, false},
  };
  for (const auto& [pol, irreducible] : vectors) {
    EXPECT_EQ(RabinPolynomialIsIrreducible(pol), irreducible)
        << "0x" << absl::StrCat(absl::Hex(pol));
  }
}

// The number of irreducible polynomials of each degree over GF(2) (OEIS
// A001037): every polynomial of degrees 1..12 through the test.
TEST(RabinPolynomialTest, CountsIrreduciblesOfSmallDegree) {
  const int kCounts[] = {2, 1, 2, 3, 6, 9, 18, 30, 56, 99, 186, 335};
  for (int d = 1; d <= 12; ++d) {
    int count = 0;
    for (uint64_t p = uint64_t{1} << d; p < uint64_t{2} << d; ++p) {
      count += RabinPolynomialIsIrreducible(p) ? 1 : 0;
    }
    EXPECT_EQ(count, kCounts[d - 1]) << "degree " << d;
  }
  EXPECT_FALSE(RabinPolynomialIsIrreducible(0));
  EXPECT_FALSE(RabinPolynomialIsIrreducible(1));
}

// Products of two irreducible factors of degrees 26 and 27 (degree 53, no
// small factor): the last round of Ben-Or's loop, i = 26, must catch them.
TEST(RabinPolynomialTest, ProductOfLargeFactorsIsReducible) {
  std::vector<uint64_t> deg26, deg27;
  for (uint64_t p = (uint64_t{1} << 26) | 1; deg26.size() < 3; p += 2) {
    if (RabinPolynomialIsIrreducible(p)) deg26.push_back(p);
  }
  for (uint64_t p = (uint64_t{1} << 27) | 1; deg27.size() < 3; p += 2) {
    if (RabinPolynomialIsIrreducible(p)) deg27.push_back(p);
  }
  for (uint64_t a : deg26) {
    for (uint64_t b : deg27) {
      const uint64_t product = ClMul(a, b);
      ASSERT_EQ(Deg(product), 53);
      EXPECT_FALSE(RabinPolynomialIsIrreducible(product))
          << "0x" << absl::StrCat(absl::Hex(product));
    }
  }
  // And a square of a degree-26 irreducible times x (degree 53).
  EXPECT_FALSE(
      RabinPolynomialIsIrreducible(ClMul(ClMul(deg26[0], deg26[0]), 2)));
}

TEST(RabinPolynomialTest, ValidationRequiresIrreducibleOfDegree53) {
  EXPECT_TRUE(ValidateOptions(Rabin(512, 1024, 4096)).ok());
  EXPECT_TRUE(ValidateOptions(Rabin(512, 1024, 4096, 0x2482734cacca49)).ok());
  EXPECT_FALSE(ValidateOptions(Rabin(512, 1024, 4096, 0x38f1e565e288df)).ok());
  // Irreducible but of degree 12.
  EXPECT_FALSE(ValidateOptions(Rabin(512, 1024, 4096, 0x1009)).ok());
}

TEST(RabinTablesTest, MatchResticDefinitions) {
  for (uint64_t pol : {kTestPol, uint64_t{0x2482734cacca49}}) {
    const RabinTables t = MakeRabinTables(pol);
    for (int b = 0; b < 256; ++b) {
      // out_table[b] = Hash(b || 0 || ... || 0), 63 zero bytes.
      uint64_t h = AppendByte(0, static_cast<uint8_t>(b), pol);
      for (int i = 0; i < 63; ++i) h = AppendByte(h, 0, pol);
      EXPECT_EQ(t.out[b], h) << b;
      const uint64_t top = uint64_t(b) << 53;
      EXPECT_EQ(t.mod[b], Mod(top, pol) | top) << b;
    }
  }
  const RabinTables t = MakeRabinTables(kTestPol);
  EXPECT_EQ(t.out[0], 0u);  // sliding zeros out removes nothing
  EXPECT_EQ(t.mod[0], 0u);
}

// ------------------------------------------- the window after the reset --

// restic's reset slides a byte 1 into a zeroed window and skips min - 64
// bytes; after the k-th slide from there, the digest is the fingerprint of
// the bytes slid so far plus x^(8k) for the 1 while k < 64, and exactly the
// fingerprint of the last 64 bytes from k = 64 on — the first digest restic
// may cut at (length min_size). So cuts depend on the 64 bytes ending at the
// cut alone, which is what the kernels compute.
TEST(RabinWindowTest, DigestIsAPureWindowFunctionFromMinSize) {
  const Bytes data = testing::RandomBytes(400, 11);
  const RabinTables tab = MakeRabinTables(kTestPol);
  RabinCutter cutter(64, 256, 1024, kTestPol);
  std::array<uint8_t, 64> window{};
  size_t wpos = 0;
  auto slide = [&](uint64_t d, uint8_t b) {
    const uint8_t out = window[wpos];
    window[wpos] = b;
    wpos = (wpos + 1) % 64;
    d ^= tab.out[out];
    return ((d << 8) | b) ^ tab.mod[d >> 45];
  };
  uint64_t digest = slide(0, 1);
  ASSERT_EQ(digest, 1u);
  uint64_t one_weight = 1;  // x^(8k) mod P: where the reset's 1 now stands
  for (size_t k = 1; k <= data.size(); ++k) {
    digest = slide(digest, data[k - 1]);
    const uint64_t pure = WindowFingerprint(data.data(), k - 1, kTestPol);
    if (k < 64) {
      one_weight = AppendByte(one_weight, 0, kTestPol);  // times x^8
      ASSERT_EQ(digest, pure ^ one_weight) << k;
      ASSERT_NE(digest, pure) << k;
    } else {
      ASSERT_EQ(digest, pure) << k;
      ASSERT_EQ(cutter.WindowDigest(&data[k - 1]), pure) << k;
    }
  }
}

// ---------------------------------------------------- restic's vectors --

struct ResticChunk {
  uint32_t length;
  uint64_t cut;
  const char* sha256;
};

// chunks1: 23 chunks
const ResticChunk kChunks1[] = {
    {2163460, 0x000b98d4cdf00000,
     "4b94cb2cf293855ea43bf766731c74969b91aa6bf3c078719aabdd19860d590d"},
    {643703, 0x000d4e8364d00000,
     "5727a63c0964f365ab8ed2ccf604912f2ea7be29759a2b53ede4d6841e397407"},
    {1528956, 0x0015a25c2ef00000,
     "a73759636a1e7a2758767791c69e81b69fb49236c6929e5d1b654e06e37674ba"},
    {1955808, 0x00102a8242e00000,
     "c955fb059409b25f07e5ae09defbbc2aadf117c97a3724e06ad4abd2787e6824"},
    {2222372, 0x00045da878000000,
     "6ba5e9f7e1b310722be3627716cf469be941f7f3e39a4c3bcefea492ec31ee56"},
    {2538687, 0x00198a8179900000,
     "8687937412f654b5cfe4a82b08f28393a0c040f77c6f95e26742c2fc4254bfde"},
    {609606, 0x001d4e8d17100000,
     "5da820742ff5feb3369112938d3095785487456f65a8efc4b96dac4be7ebb259"},
    {1205738, 0x000a7204dd600000,
     "cc70d8fad5472beb031b1aca356bcab86c7368f40faa24fe5f8922c6c268c299"},
    {959742, 0x00183e71e1400000,
     "4065bdd778f95676c92b38ac265d361f81bff17d76e5d9452cf985a2ea5a4e39"},
    {4036109, 0x001fec043c700000,
     "b9cf166e75200eb4993fc9b6e22300a6790c75e6b0fc8f3f29b68a752d42f275"},
    {1525894, 0x000b1574b1500000,
     "2f238180e4ca1f7520a05f3d6059233926341090f9236ce677690c1823eccab3"},
    {1352720, 0x00018965f2e00000,
     "afd12f13286a3901430de816e62b85cc62468c059295ce5888b76b3af9028d84"},
    {811884, 0x00155628aa100000,
     "42d0cdb1ee7c48e552705d18e061abb70ae7957027db8ae8db37ec756472a70a"},
    {1282314, 0x001909a0a1400000,
     "819721c2457426eb4f4c7565050c44c32076a56fa9b4515a1c7796441730eb58"},
    {1318021, 0x001cceb980000000,
     "842eb53543db55bacac5e25cb91e43cc2e310fe5f9acc1aee86bdf5e91389374"},
    {948640, 0x0011f7a470a00000,
     "b8e36bf7019bb96ac3fb7867659d2167d9d3b3148c09fe0de45850b8fe577185"},
    {645464, 0x00030ce2d9400000,
     "5584bd27982191c3329f01ed846bfd266e96548dfa87018f745c33cfc240211d"},
    {533758, 0x0004435c53c00000,
     "4da778a25b72a9a0d53529eccfe2e5865a789116cb1800f470d8df685a8ab05d"},
    {1128303, 0x0000c48517800000,
     "08c6b0b38095b348d80300f0be4c5184d2744a17147c2cba5cc4315abf4c048f"},
    {800374, 0x000968473f900000,
     "820284d2c8fd243429674c996d8eb8d3450cbc32421f43113e980f516282c7bf"},
    {2453512, 0x001e197c92600000,
     "5fa870ed107c67704258e5e50abe67509fb73562caf77caa843b5f243425d853"},
    {2651975, 0x000ae6c868000000,
     "181347d2bbec32bef77ad5e9001e6af80f6abcf3576549384d334ee00c1988d8"},
    {237392, 0x0000000000000001,
     "fcd567f5d866357a8e299fd5b2359bb2c8157c30395229c4e9b0a353944a7978"},
};
// chunks3: 31 chunks
const ResticChunk kChunks3[] = {
    {1491586, 0x00023e586ea80000,
     "4c008237df602048039287427171cef568a6cb965d1b5ca28dc80504a24bb061"},
    {671874, 0x000b98d4cdf00000,
     "fa8a42321b90c3d4ce9dd850562b2fd0c0fe4bdd26cf01a24f22046a224225d3"},
    {643703, 0x000d4e8364d00000,
     "5727a63c0964f365ab8ed2ccf604912f2ea7be29759a2b53ede4d6841e397407"},
    {1284146, 0x0012b527e4780000,
     "16d04cafecbeae9eaedd49da14c7ad7cdc2b1cc8569e5c16c32c9fb045aa899a"},
    {823366, 0x000d1d6752180000,
     "48662c118514817825ad4761e8e2e5f28f9bd8281b07e95dcafc6d02e0aa45c3"},
    {810134, 0x0016071b6e180000,
     "f629581aa05562f97f2c359890734c8574c5575da32f9289c5ba70bfd05f3f46"},
    {567118, 0x00102a8242e00000,
     "d4f0797c56c60d01bac33bfd49957a4816b6c067fc155b026de8a214cab4d70a"},
    {821315, 0x001b3e42c8180000,
     "8ebd0fd5db0293bd19140da936eb8b1bbd3cd6ffbec487385b956790014751ca"},
    {1401057, 0x00045da878000000,
     "001360af59adf4871ef138cfa2bb49007e86edaf5ac2d6f0b3d3014510991848"},
    {2311122, 0x0005cbd885380000,
     "8276d489b566086d9da95dc5c5fe6fc7d72646dd3308ced6b5b6ddb8595f0aa1"},
    {608723, 0x001cfcd86f280000,
     "518db33ba6a79d4f3720946f3785c05b9611082586d47ea58390fc2f6de9449e"},
    {980456, 0x0013edb7a7f80000,
     "0121b1690738395e15fecba1410cd0bf13fde02225160cad148829f77e7b6c99"},
    {1140278, 0x0001f9f017e80000,
     "28ca7c74804b5075d4f5eeb11f0845d99f62e8ea3a42b9a05c7bd5f2fca619dd"},
    {2015542, 0x00097bf5d8180000,
     "6fe8291f427d48650a5f0f944305d3a2dbc649bd401d2655fc0bdd42e890ca5a"},
    {904752, 0x000e1863eff80000,
     "62af1f1eb3f588d18aff28473303cc4731fc3cafcc52ce818fee3c4c2820854d"},
    {713072, 0x001f3bb1b9b80000,
     "4bda9dc2e3031d004d87a5cc93fe5207c4b0843186481b8f31597dc6ffa1496c"},
    {675937, 0x001fec043c700000,
     "5299c8c5acec1b90bb020cd75718aab5e12abb9bf66291465fd10e6a823a8b4a"},
    {1525894, 0x000b1574b1500000,
     "2f238180e4ca1f7520a05f3d6059233926341090f9236ce677690c1823eccab3"},
    {1352720, 0x00018965f2e00000,
     "afd12f13286a3901430de816e62b85cc62468c059295ce5888b76b3af9028d84"},
    {811884, 0x00155628aa100000,
     "42d0cdb1ee7c48e552705d18e061abb70ae7957027db8ae8db37ec756472a70a"},
    {1282314, 0x001909a0a1400000,
     "819721c2457426eb4f4c7565050c44c32076a56fa9b4515a1c7796441730eb58"},
    {1093738, 0x0017f5d048880000,
     "5dddfa7a241b68f65d267744bdb082ee865f3c2f0d8b946ea0ee47868a01bbff"},
    {962003, 0x000b921f7ef80000,
     "0cb5c9ebba196b441c715c8d805f6e7143a81cd5b0d2c65c6aacf59ca9124af9"},
    {856384, 0x00030ce2d9400000,
     "7734b206d46f3f387e8661e81edf5b1a91ea681867beb5831c18aaa86632d7fb"},
    {533758, 0x0004435c53c00000,
     "4da778a25b72a9a0d53529eccfe2e5865a789116cb1800f470d8df685a8ab05d"},
    {1128303, 0x0000c48517800000,
     "08c6b0b38095b348d80300f0be4c5184d2744a17147c2cba5cc4315abf4c048f"},
    {800374, 0x000968473f900000,
     "820284d2c8fd243429674c996d8eb8d3450cbc32421f43113e980f516282c7bf"},
    {2453512, 0x001e197c92600000,
     "5fa870ed107c67704258e5e50abe67509fb73562caf77caa843b5f243425d853"},
    {665901, 0x00118c842cb80000,
     "deceec26163842fdef6560311c69bf8a9871a56e16d719e2c4b7e4d668ceb61f"},
    {1986074, 0x000ae6c868000000,
     "64cd64bf3c3bc389eb20df8310f0427d1c36ab2eaaf09e346bfa7f0453fc1a18"},
    {237392, 0x0000000000000001,
     "fcd567f5d866357a8e299fd5b2359bb2c8157c30395229c4e9b0a353944a7978"},
};

// Checks a chunk list against restic's, chunk by chunk: the last chunk was
// cut by the end of the stream, where restic reports its leftover digest
// and we report 0.
template <size_t N>
void ExpectResticVectors(const std::vector<Chunk>& chunks, const Bytes& data,
                         const ResticChunk (&want)[N]) {
  ASSERT_EQ(chunks.size(), N);
  uint64_t offset = 0;
  for (size_t i = 0; i < N; ++i) {
    const Chunk& c = chunks[i];
    EXPECT_EQ(c.offset, offset) << i;
    EXPECT_EQ(c.length, want[i].length) << i;
    EXPECT_EQ(c.hash, i + 1 < N ? want[i].cut : 0) << i;
    EXPECT_EQ(Sha256Hex(data.data() + c.offset, c.length), want[i].sha256) << i;
    offset += c.length;
  }
  EXPECT_EQ(offset, data.size());
}

// Every kernel this CPU runs, 1 and 3 threads, every strategy: the same
// chunks as the reference.
void ExpectEngineEqualsReference(const ChunkerOptions& options,
                                 const Bytes& data,
                                 const std::vector<Chunk>& reference) {
  static ThreadPoolExecutor* const kThree = new ThreadPoolExecutor(3);
  for (const kernels::KernelSet* kernel : kernels::AllKernelSets()) {
    if (!kernel->supported()) continue;
    for (Executor* executor :
         {static_cast<Executor*>(nullptr), static_cast<Executor*>(kThree)}) {
      for (Strategy strategy :
           {Strategy::kAuto, Strategy::kTwoStage, Strategy::kSequentialScan,
            Strategy::kReference}) {
        EngineOptions engine;
        engine.kernel = kernel;
        engine.executor = executor;
        engine.strategy = strategy;
        absl::StatusOr<std::vector<Chunk>> chunks =
            FastChunks(options, data, engine);
        ASSERT_TRUE(chunks.ok()) << chunks.status();
        ASSERT_EQ(*chunks, reference)
            << kernel->name << " threads " << (executor ? 3 : 1) << " "
            << StrategyName(strategy);
      }
    }
  }
}

const Bytes& ResticData() {
  static const Bytes* const kData =
      new Bytes(testing::GoRandomBytes(23, 32 << 20));
  return *kData;
}

TEST(RabinVectorsTest, Chunks1) {
  const ChunkerOptions options = Rabin(512 << 10, 1 << 20, 8 << 20);
  const std::vector<Chunk> chunks = ReferenceChunks(options, ResticData());
  ExpectResticVectors(chunks, ResticData(), kChunks1);
  // restic's own last Cut is 1: the digest of its reset, nothing slid since.
  EXPECT_EQ(ResticChunks(ResticData(), 512 << 10, 8 << 20, (1 << 20) - 1,
                         MakeRabinTables(kTestPol))
                .back()
                .cut,
            1u);
  ExpectEngineEqualsReference(options, ResticData(), chunks);
}

TEST(RabinVectorsTest, Chunks3AverageBits19) {
  const ChunkerOptions options = Rabin(512 << 10, 1 << 19, 8 << 20);
  const std::vector<Chunk> chunks = ReferenceChunks(options, ResticData());
  ExpectResticVectors(chunks, ResticData(), kChunks3);
  ExpectEngineEqualsReference(options, ResticData(), chunks);
}

// Zeros: the window digest of zeros is 0, a candidate, so every chunk is
// min_size long, also when the input is a multiple of it (chunks2).
TEST(RabinVectorsTest, Chunks2Zeros) {
  const ChunkerOptions options = Rabin(512 << 10, 1 << 20, 8 << 20);
  const Bytes zeros(4 * (512 << 10), 0);
  const std::vector<Chunk> chunks = ReferenceChunks(options, zeros);
  ASSERT_EQ(chunks.size(), 4u);
  for (const Chunk& c : chunks) {
    EXPECT_EQ(c.length, 512u << 10);
    EXPECT_EQ(c.hash, 0u);
    EXPECT_EQ(
        Sha256Hex(zeros.data() + c.offset, c.length),
        "07854d2fef297a06ba81685e660c332de36d5d18d546927d30daad6d7fda1541");
  }
  ExpectEngineEqualsReference(options, zeros, chunks);
}

// -------------------------------------------- reference vs. independent --

struct Params {
  uint32_t min, avg, max;
};

// Small sizes so that a buffer holds many chunks: avg below, between and
// above min and max; min == max; the smallest min (the window).
const Params kSmallParams[] = {
    {64, 256, 1024}, {64, 64, 64},    {100, 64, 333},  {300, 128, 1000},
    {128, 512, 200}, {64, 4096, 512}, {255, 256, 257}, {1000, 1024, 4096},
};

std::vector<std::pair<std::string, Bytes>> Inputs(size_t size) {
  return {{"random", testing::RandomBytes(size, 5)},
          {"text", testing::TextBytes(size, 6)},
          {"zeros", Bytes(size, 0)},
          {"ff", Bytes(size, 0xFF)},
          {"pattern", testing::RepeatingBytes(size, "abcdefghij")}};
}

TEST(RabinReferenceTest, EqualsResticLoopAndDirectDefinition) {
  for (const Params& q : kSmallParams) {
    for (const auto& [name, data] : Inputs(60000)) {
      const ChunkerOptions options = Rabin(q.min, q.avg, q.max);
      const std::vector<Chunk> chunks = ReferenceChunks(options, data);
      const std::string what =
          absl::StrCat(name, " ", q.min, "/", q.avg, "/", q.max);
      ASSERT_TRUE(testing::CoversStream(chunks, data.size(), options)) << what;
      ASSERT_EQ(chunks, AsChunks(ResticChunks(data, q.min, q.max, q.avg - 1,
                                              MakeRabinTables(kTestPol))))
          << what;
      ASSERT_EQ(chunks, DirectChunks(data, q.min, q.avg, q.max, kTestPol))
          << what;
    }
  }
}

TEST(RabinReferenceTest, OtherPolynomialGivesOtherCuts) {
  const Bytes data = testing::RandomBytes(1 << 18, 8);
  const uint64_t other = 0x2482734cacca49;
  const std::vector<Chunk> a = ReferenceChunks(Rabin(256, 1024, 8192), data);
  const std::vector<Chunk> b =
      ReferenceChunks(Rabin(256, 1024, 8192, other), data);
  EXPECT_NE(a, b);
  EXPECT_EQ(
      b, AsChunks(ResticChunks(data, 256, 8192, 1023, MakeRabinTables(other))));
  EXPECT_EQ(b, DirectChunks(data, 256, 1024, 8192, other));
}

// Stream lengths around every edge: empty, shorter than the window, than
// min, around max and its multiples.
TEST(RabinReferenceTest, EdgeSizes) {
  for (const Params& q :
       {Params{64, 256, 1024}, Params{100, 128, 300}, Params{300, 64, 301}}) {
    std::vector<size_t> sizes = {0, 1, 63, 64, 65};
    for (size_t base : {size_t{q.min}, size_t{q.max}, size_t{2} * q.max}) {
      for (size_t d : {base - 1, base, base + 1}) sizes.push_back(d);
    }
    const ChunkerOptions options = Rabin(q.min, q.avg, q.max);
    for (const auto& [name, full] : Inputs(2 * q.max + 1)) {
      for (size_t size : sizes) {
        const Bytes data(full.begin(), full.begin() + size);
        const std::string what = absl::StrCat(name, " size ", size, " ", q.min,
                                              "/", q.avg, "/", q.max);
        const std::vector<Chunk> chunks = ReferenceChunks(options, data);
        ASSERT_EQ(chunks.empty(), size == 0) << what;
        ASSERT_TRUE(testing::CoversStream(chunks, size, options)) << what;
        if (size < q.min && size > 0) {
          ASSERT_EQ(chunks, (std::vector<Chunk>{{0, uint32_t(size), 0}}))
              << what;
        }
        ASSERT_EQ(chunks, AsChunks(ResticChunks(data, q.min, q.max, q.avg - 1,
                                                MakeRabinTables(kTestPol))))
            << what;
        ASSERT_EQ(chunks, DirectChunks(data, q.min, q.avg, q.max, kTestPol))
            << what;
        ExpectEngineEqualsReference(options, data, chunks);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(RabinReferenceTest, HashIsTheCandidateDigestElseZero) {
  const Bytes data = testing::RandomBytes(1 << 20, 9);
  const ChunkerOptions options = Rabin(2048, 4096, 8192);
  RabinCutter cutter(2048, 4096, 8192, kTestPol);
  const std::vector<Chunk> chunks = ReferenceChunks(options, data);
  size_t candidates = 0, by_max = 0;
  for (const Chunk& c : chunks) {
    const size_t last = c.offset + c.length - 1;
    const uint64_t d = cutter.WindowDigest(&data[last]);
    if ((d & 4095) == 0) {
      ++candidates;
      EXPECT_EQ(c.hash, d);
    } else {
      EXPECT_EQ(c.hash, 0u);
      EXPECT_TRUE(c.length == 8192 || last == data.size() - 1);
      by_max += c.length == 8192 ? 1 : 0;
    }
  }
  // Cuts at a candidate, and at max (probability exp(-6144 / 4096) each).
  EXPECT_GT(candidates, chunks.size() / 2);
  EXPECT_GT(by_max, 10u);
}

// ------------------------------------------------------ the scalar kernel --

TEST(RabinKernelTest, ScalarIsTheWindowDefinition) {
  const Bytes data = testing::RandomBytes(1500, 12);
  const RabinTables tab = MakeRabinTables(kTestPol);
  for (uint64_t mask : {uint64_t{0x3}, uint64_t{0xFF}, uint64_t{0}}) {
    const kernels::RabinParams params{tab.out.data(), tab.mod.data(), mask};
    for (size_t begin : {0, 1, 62, 63, 64, 65, 100, 1499}) {
      const size_t n = data.size() - begin;
      std::vector<uint64_t> hits(kernels::BitmapWords(n) + 1, ~uint64_t{0});
      kernels::ScalarKernelSet().rabin(data.data(), begin, data.size(), params,
                                       hits.data());
      for (size_t p = begin; p < data.size(); ++p) {
        const bool want =
            (WindowFingerprint(data.data(), p, kTestPol) & mask) == 0;
        ASSERT_EQ((hits[(p - begin) / 64] >> ((p - begin) % 64)) & 1,
                  uint64_t{want})
            << "begin " << begin << " p " << p;
      }
      if (n % 64 != 0) {
        EXPECT_EQ(hits[n / 64] >> (n % 64), 0u);  // bits past `end` are 0
      }
      EXPECT_EQ(hits.back(), ~uint64_t{0});  // nothing written past the end
    }
  }
}

// ------------------------------------------------------------ the engine --

TEST(RabinEngineTest, FastChunksEqualReference) {
  for (const Params& q : {Params{64, 256, 1024}, Params{300, 64, 301},
                          Params{4096, 16384, 65536}}) {
    for (const auto& [name, data] : Inputs(1 << 20)) {
      const ChunkerOptions options = Rabin(q.min, q.avg, q.max);
      SCOPED_TRACE(absl::StrCat(name, " ", q.min, "/", q.avg, "/", q.max));
      ExpectEngineEqualsReference(options, data,
                                  ReferenceChunks(options, data));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(RabinEngineTest, StreamChunkerEqualsReferenceInAnyPieces) {
  static ThreadPoolExecutor* const kThree = new ThreadPoolExecutor(3);
  const Bytes data = testing::RandomBytes(3 << 20, 13);
  const ChunkerOptions options = Rabin(4096, 8192, 32768);
  const std::vector<Chunk> reference = ReferenceChunks(options, data);
  std::mt19937_64 rng(14);
  for (const kernels::KernelSet* kernel : kernels::AllKernelSets()) {
    if (!kernel->supported()) continue;
    for (Executor* executor :
         {static_cast<Executor*>(nullptr), static_cast<Executor*>(kThree)}) {
      EngineOptions engine;
      engine.kernel = kernel;
      engine.executor = executor;
      absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
          StreamChunker::Create(options, engine);
      ASSERT_TRUE(chunker.ok()) << chunker.status();
      std::vector<Chunk> chunks;
      for (size_t pos = 0; pos < data.size();) {
        const size_t n = std::min<size_t>(data.size() - pos, rng() % 200000);
        (*chunker)->Append(
            absl::string_view(reinterpret_cast<const char*>(&data[pos]), n),
            &chunks);
        pos += n;
      }
      (*chunker)->Finish(&chunks);
      ASSERT_EQ(chunks, reference) << kernel->name;
    }
  }
}

}  // namespace
}  // namespace chunkd::chunking
