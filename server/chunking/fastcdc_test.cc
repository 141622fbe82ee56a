#include "chunking/fastcdc.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "chunkd/chunker.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;
using testing::FastCdcOptions;
using testing::ReadTestFile;

std::string Digest(const EVP_MD* md, const uint8_t* data, size_t n) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EXPECT_EQ(EVP_Digest(data, n, out, &len, md, nullptr), 1);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex;
}

TEST(FastCdcTableTest, GearIsMd5OfSixtyFourEqualBytes) {
  const std::array<uint64_t, 256>& gear = FastCdcGearTable();
  for (int i = 0; i < 256; ++i) {
    const std::vector<uint8_t> block(64, static_cast<uint8_t>(i));
    const std::string md5 = Digest(EVP_md5(), block.data(), block.size());
    uint64_t expected = 0;
    for (int j = 0; j < 8; ++j) {
      expected = (expected << 8) | static_cast<uint8_t>(md5[j]);
    }
    EXPECT_EQ(gear[i], expected) << "GEAR[" << i << "]";
  }
  // Spot checks against the crate's published GEAR and GEAR_LS constants.
  EXPECT_EQ(gear[0], 0x3b5d3c7d207e37dcu);
  EXPECT_EQ(gear[255], 0xaabd2b2a451504e1u);
  FastCdcCutter cutter(64, 256, 1024, 1, 0);
  EXPECT_EQ(cutter.gear_ls()[0], 0x76ba78fa40fc6fb8u);
  EXPECT_EQ(cutter.gear_ls()[1], 0xf09ad1752224610cu);
  EXPECT_EQ(cutter.gear_ls()[255], 0x557a56548a2a09c2u);
}

TEST(FastCdcTableTest, SeedIsXoredIntoBothTables) {
  const uint64_t seed = 0x0123456789abcdefu;
  FastCdcCutter cutter(64, 256, 1024, 1, seed);
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(cutter.gear()[i], FastCdcGearTable()[i] ^ seed);
    EXPECT_EQ(cutter.gear_ls()[i], (FastCdcGearTable()[i] << 1) ^ (seed << 1));
    // Which keeps the two-bytes-at-a-time loop equal to one byte at a time.
    EXPECT_EQ(cutter.gear_ls()[i], cutter.gear()[i] << 1);
  }
}

TEST(FastCdcTableTest, Log2RoundMatchesCrate) {
  const std::vector<std::pair<uint32_t, uint32_t>> cases = {
      {0, 0},           {1, 0},         {2, 1},         {3, 2},
      {5, 2},           {6, 3},         {11, 3},        {12, 4},
      {19, 4},          {64, 6},        {128, 7},       {256, 8},
      {512, 9},         {1024, 10},     {16383, 14},    {16384, 14},
      {16385, 14},      {32767, 15},    {32768, 15},    {32769, 15},
      {65535, 16},      {65536, 16},    {65537, 16},    {1048575, 20},
      {1048576, 20},    {1048577, 20},  {4194303, 22},  {4194304, 22},
      {4194305, 22},    {16777215, 24}, {16777216, 24}, {16777217, 24},
      {0xFFFFFFFFu, 32}};
  for (const auto& [value, expected] : cases) {
    EXPECT_EQ(FastCdcLog2Round(value), expected) << value;
  }
}

TEST(FastCdcTableTest, MasksMatchCrate) {
  FastCdcCutter small(64, 256, 1024, 1, 0);
  EXPECT_EQ(small.mask_l(), kFastCdcMasks[7]);
  EXPECT_EQ(small.mask_s(), kFastCdcMasks[9]);
  FastCdcCutter mid(8192, 16384, 32768, 1, 0);
  EXPECT_EQ(mid.mask_l(), kFastCdcMasks[13]);
  EXPECT_EQ(mid.mask_s(), kFastCdcMasks[15]);
  FastCdcCutter large(1048576, 4194304, 16777216, 1, 0);
  EXPECT_EQ(large.mask_l(), kFastCdcMasks[21]);
  EXPECT_EQ(large.mask_s(), kFastCdcMasks[23]);
  FastCdcCutter level3(64, 256, 1024, 3, 0);
  EXPECT_EQ(level3.mask_l(), kFastCdcMasks[5]);
  EXPECT_EQ(level3.mask_s(), kFastCdcMasks[11]);
  FastCdcCutter level3_top(1048576, 4194304, 16777216, 3, 0);
  EXPECT_EQ(level3_top.mask_s(), kFastCdcMasks[25]);
}

struct VectorChunk {
  uint64_t offset;
  uint32_t length;
  std::string sha256_hex;
  uint64_t hash;
};

// tests/data/fastcdc2020_test_vectors.txt: "# Seed: N" sections of
// "offset<TAB>length<TAB>sha256<TAB>hash" lines.
std::vector<std::pair<uint64_t, std::vector<VectorChunk>>> ParseVectors() {
  const Bytes text = ReadTestFile("fastcdc2020_test_vectors.txt");
  std::vector<std::pair<uint64_t, std::vector<VectorChunk>>> sections;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view(reinterpret_cast<const char*>(text.data()),
                             text.size()),
           '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (absl::ConsumePrefix(&line, "# Seed:")) {
      uint64_t seed = 0;
      EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &seed));
      sections.emplace_back(seed, std::vector<VectorChunk>{});
      continue;
    }
    if (line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, '\t', absl::SkipEmpty());
    EXPECT_EQ(fields.size(), 4u) << line;
    if (fields.size() != 4 || sections.empty()) continue;
    VectorChunk chunk;
    EXPECT_TRUE(absl::SimpleAtoi(fields[0], &chunk.offset));
    EXPECT_TRUE(absl::SimpleAtoi(fields[1], &chunk.length));
    chunk.sha256_hex = std::string(fields[2]);
    EXPECT_TRUE(absl::SimpleAtoi(fields[3], &chunk.hash));
    sections.back().second.push_back(chunk);
  }
  return sections;
}

TEST(FastCdcVectorsTest, PublicVectorsSeeds0And666) {
  const Bytes image = ReadTestFile("SekienAkashita.jpg");
  ASSERT_EQ(image.size(), 109466u);
  EXPECT_EQ(Hex(Digest(EVP_sha256(), image.data(), image.size())),
            "d9e749d9367fc908876749d6502eb212fee88c9a94892fb07da5ef3ba8bc39ed");
  const auto sections = ParseVectors();
  ASSERT_EQ(sections.size(), 2u);
  EXPECT_EQ(sections[0].first, 0u);
  EXPECT_EQ(sections[1].first, 666u);
  for (const auto& [seed, expected] : sections) {
    SCOPED_TRACE(seed);
    ASSERT_EQ(expected.size(), 6u);
    const std::vector<Chunk> chunks =
        ReferenceChunks(FastCdcOptions(4096, 16384, 65535, 2, seed), image);
    ASSERT_EQ(chunks.size(), expected.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_EQ(chunks[i].offset, expected[i].offset) << i;
      EXPECT_EQ(chunks[i].length, expected[i].length) << i;
      EXPECT_EQ(chunks[i].hash, expected[i].hash) << i;
      EXPECT_EQ(Hex(Digest(EVP_sha256(), image.data() + chunks[i].offset,
                           chunks[i].length)),
                expected[i].sha256_hex)
          << i;
    }
  }
}

// The crate's own unit tests (src/v2020/mod.rs): (hash, length) per chunk.
struct CrateCase {
  const char* name;
  uint32_t min, avg, max, level;
  std::vector<std::pair<uint64_t, uint32_t>> expected;
};

TEST(FastCdcVectorsTest, CrateUnitTestsOnSekien) {
  const Bytes image = ReadTestFile("SekienAkashita.jpg");
  const std::vector<CrateCase> cases = {
      {"16k",
       4096,
       16384,
       65535,
       1,
       {{17968276318003433923u, 21325},
        {8197189939299398838u, 17140},
        {13019990849178155730u, 28084},
        {4509236223063678303u, 18217},
        {2504464741100432583u, 24700}}},
      {"32k",
       8192,
       32768,
       131072,
       1,
       {{15733367461443853673u, 66549}, {6321136627705800457u, 42917}}},
      {"64k", 16384, 65536, 262144, 1, {{2504464741100432583u, 109466}}},
      {"16k_nc0",
       4096,
       16384,
       65535,
       0,
       {{443122261039895162u, 6634},
        {15733367461443853673u, 59915},
        {10460176299449652894u, 25597},
        {6197802202431009942u, 5237},
        {6321136627705800457u, 12083}}},
      {"16k_nc3",
       8192,
       16384,
       32768,
       3,
       {{10718006254707412376u, 17350},
        {13104072099671895560u, 19911},
        {12322483109039221194u, 17426},
        {16009206469796846404u, 17519},
        {2473608525189754172u, 19940},
        {2504464741100432583u, 17320}}},
  };
  for (const CrateCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<Chunk> chunks =
        ReferenceChunks(FastCdcOptions(c.min, c.avg, c.max, c.level), image);
    ASSERT_EQ(chunks.size(), c.expected.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_EQ(chunks[i].hash, c.expected[i].first) << i;
      EXPECT_EQ(chunks[i].length, c.expected[i].second) << i;
    }
  }
}

TEST(FastCdcVectorsTest, CrateAllZerosCutsAtMax) {
  const Bytes zeros(10240, 0);
  const std::vector<Chunk> chunks =
      ReferenceChunks(FastCdcOptions(64, 256, 1024, 1), zeros);
  ASSERT_EQ(chunks.size(), 10u);
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].offset, i * 1024);
    EXPECT_EQ(chunks[i].length, 1024u);
    EXPECT_EQ(chunks[i].hash, 14169102344523991076u);
  }
}

// An independent formulation: roll one byte at a time, hash = (hash << 1) +
// GEAR[b], and test position i with mask_s when i < 2 * (center / 2), else
// mask_l, for i in [2 * (min / 2), 2 * (remaining / 2)). The crate's
// two-bytes-at-a-time loop must cut at the same places; its hash at an even
// cut is the one-byte hash doubled.
size_t OneByteAtATimeCut(const FastCdcCutter& cutter, size_t min, size_t avg,
                         size_t max, const uint8_t* data, size_t avail,
                         uint64_t* hash) {
  if (avail <= min) {
    *hash = 0;
    return avail;
  }
  size_t remaining = avail;
  size_t center = avg;
  if (remaining > max) {
    remaining = max;
  } else if (remaining < center) {
    center = remaining;
  }
  uint64_t h = 0;
  const size_t end = 2 * (remaining / 2);
  for (size_t i = 2 * (min / 2); i < end; ++i) {
    h = (h << 1) + cutter.gear()[data[i]];
    const uint64_t mask =
        i < 2 * (center / 2) ? cutter.mask_s() : cutter.mask_l();
    if ((h & mask) == 0) {
      *hash = i % 2 == 0 ? h << 1 : h;
      return i;
    }
  }
  *hash = h;
  return remaining;
}

TEST(FastCdcCutTest, TwoBytesAtATimeEqualsOneByteAtATime) {
  const Bytes data = testing::RandomBytes(1 << 20, 2020);
  for (uint32_t level = 0; level <= 3; ++level) {
    for (const auto& [min, avg, max] :
         std::vector<std::tuple<uint32_t, uint32_t, uint32_t>>{
             {64, 256, 1024}, {65, 300, 1025}, {4096, 16384, 65535}}) {
      SCOPED_TRACE(
          absl::StrCat("level ", level, " sizes ", min, "/", avg, "/", max));
      FastCdcCutter cutter(min, avg, max, level, 77);
      size_t pos = 0;
      while (pos < data.size()) {
        uint64_t h1 = 0;
        uint64_t h2 = 0;
        const size_t expected = OneByteAtATimeCut(
            cutter, min, avg, max, data.data() + pos, data.size() - pos, &h1);
        const size_t got =
            cutter.Cut(data.data() + pos, data.size() - pos, pos, &h2);
        ASSERT_EQ(got, expected) << "at " << pos;
        ASSERT_EQ(h2, h1) << "at " << pos;
        pos += got;
      }
    }
  }
}

// CutTwoLanes against Cut, chunk after chunk, on parameters where both
// regions run two lanes (4 KiB / 16 KiB / 64 KiB, 64 KiB min), where hits
// are frequent enough for both lanes of a block to have one (512 / 2 KiB /
// 8 KiB at level 0: lanes of 768 and 512 bytes), where the lanes are too
// short (64 / 256 / 1 KiB) and with odd sizes; on random bytes, on zeros
// (no hit: max_size) and on random bytes with zero runs. Every chunk is
// also cut from a shorter `avail`, so that the strict region ends early.
TEST(FastCdcCutTest, TwoLanesEqualsCut) {
  Bytes mixed = testing::RandomBytes(1 << 20, 7);
  for (size_t i = 0; i < mixed.size(); i += 40000) {
    std::fill(mixed.begin() + i,
              mixed.begin() + std::min(mixed.size(), i + 9000), 0);
  }
  const std::vector<std::pair<const char*, Bytes>> inputs = {
      {"random", testing::RandomBytes(1 << 20, 2020)},
      {"zeros", Bytes(300000, 0)},
      {"zero runs", mixed}};
  for (uint32_t level = 0; level <= 3; ++level) {
    for (const auto& [min, avg, max] :
         std::vector<std::tuple<uint32_t, uint32_t, uint32_t>>{
             {64, 256, 1024},
             {65, 300, 1025},
             {512, 2048, 8192},
             {4096, 16384, 65536},
             {4097, 16385, 65535},
             {65536, 65536, 262144}}) {
      FastCdcCutter cutter(min, avg, max, level, 77);
      for (const auto& [name, data] : inputs) {
        SCOPED_TRACE(absl::StrCat(name, " level ", level, " sizes ", min, "/",
                                  avg, "/", max));
        size_t pos = 0;
        while (pos < data.size()) {
          const size_t rest = data.size() - pos;
          for (const size_t avail :
               {rest, std::min(rest, size_t{1} + (pos * 7919) % (max + 9))}) {
            uint64_t want_hash = 1;
            uint64_t got_hash = 2;
            const size_t want =
                cutter.Cut(data.data() + pos, avail, 0, &want_hash);
            const size_t got =
                cutter.CutTwoLanes(data.data() + pos, avail, &got_hash);
            ASSERT_EQ(got, want) << "at " << pos << " avail " << avail;
            ASSERT_EQ(got_hash, want_hash)
                << "at " << pos << " avail " << avail;
          }
          uint64_t hash = 0;
          pos += cutter.Cut(data.data() + pos, rest, 0, &hash);
        }
      }
    }
  }
}

TEST(FastCdcCutTest, OddMinSizeCanCutOneByteEarlier) {
  // min 65: the crate scans from byte 64, so a hit there gives a 64-byte
  // chunk. mask_s for 256 bytes at level 0 has 8 bits: ~1/256 of chunks.
  const ChunkerOptions options = FastCdcOptions(65, 256, 1024, 0);
  const Bytes data = testing::RandomBytes(1 << 20, 65);
  const std::vector<Chunk> chunks = ReferenceChunks(options, data);
  size_t short_chunks = 0;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    ASSERT_GE(chunks[i].length, 64u);
    if (chunks[i].length == 64) ++short_chunks;
  }
  EXPECT_GT(short_chunks, 0u);
  EXPECT_TRUE(testing::CoversStream(chunks, data.size(), options));
}

TEST(FastCdcCutTest, RemainingRules) {
  FastCdcCutter cutter(64, 256, 1024, 1, 0);
  const Bytes zeros(5000, 0);
  uint64_t hash = 1;
  // remaining <= min: everything, hash 0.
  EXPECT_EQ(cutter.Cut(zeros.data(), 64, 0, &hash), 64u);
  EXPECT_EQ(hash, 0u);
  EXPECT_EQ(cutter.Cut(zeros.data(), 1, 0, &hash), 1u);
  EXPECT_EQ(hash, 0u);
  // No hit in zeros: the whole remainder (odd: its last byte is never
  // examined), or max_size.
  EXPECT_EQ(cutter.Cut(zeros.data(), 65, 0, &hash), 65u);
  EXPECT_EQ(cutter.Cut(zeros.data(), 101, 0, &hash), 101u);
  EXPECT_EQ(cutter.Cut(zeros.data(), 1024, 0, &hash), 1024u);
  EXPECT_EQ(cutter.Cut(zeros.data(), 1025, 0, &hash), 1024u);
  EXPECT_EQ(cutter.Cut(zeros.data(), 5000, 0, &hash), 1024u);
  EXPECT_EQ(hash, 14169102344523991076u);
}

}  // namespace
}  // namespace chunkd::chunking
