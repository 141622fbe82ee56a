// buzhash against desync v1.0.4: its published vectors (tests/data/desync),
// chunk lengths desync produced for generated inputs, its discriminators and
// a model of its pair loop; the cutting rules; and the engine against the
// reference (docs/algorithms/buzhash.md, "Tests").
#include "chunking/buzhash.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "chunking/limits.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;

ChunkerOptions Buzhash(uint32_t min, uint32_t avg, uint32_t max) {
  ChunkerOptions options = DefaultOptions(Algorithm::kBuzhash);
  options.min_size = min;
  options.avg_size = avg;
  options.max_size = max;
  return options;
}

uint32_t Rotl(uint32_t x, unsigned n) {
  n %= 32;
  return n == 0 ? x : (x << n) | (x >> (32 - n));
}

// The definition: XOR over i in [0, 47] of rotl32(table[data[p - i]], i).
uint32_t DirectHash(const uint8_t* data, size_t p) {
  uint32_t h = 0;
  for (size_t i = 0; i < 48; ++i) h ^= Rotl(BuzhashTable()[data[p - i]], i);
  return h;
}

std::vector<uint64_t> Lengths(const std::vector<Chunk>& chunks) {
  std::vector<uint64_t> lengths;
  for (const Chunk& c : chunks) lengths.push_back(c.length);
  return lengths;
}

// desync's loop as a model, written from its structure rather than from
// the reference: when at most min bytes remain they are the last chunk;
// else m = min(remaining, max), the window is filled over [min - 48, min)
// and bytes are rolled in two at a time while both lie below m, the first of
// a pair tested before the second; no boundary: m (an odd count leaves the
// last byte unexamined).
std::vector<uint64_t> DesyncModel(const Bytes& data, uint32_t min, uint32_t avg,
                                  uint32_t max) {
  const uint32_t d = BuzhashDiscriminator(avg);
  std::vector<uint64_t> lengths;
  size_t pos = 0;
  while (pos < data.size()) {
    const uint8_t* buf = data.data() + pos;
    const size_t remaining = data.size() - pos;
    size_t len = remaining;
    if (remaining > min) {
      const size_t m = std::min<size_t>(remaining, max);
      len = m;
      uint32_t h = 0;
      for (size_t i = 0; i < 48; ++i) {
        h ^= Rotl(BuzhashTable()[buf[min - 48 + i]], 47 - i);
      }
      auto roll = [&](size_t at) {
        h = Rotl(h, 1) ^ Rotl(BuzhashTable()[buf[at - 48]], 48) ^
            BuzhashTable()[buf[at]];
        return h % d == d - 1;
      };
      for (size_t i = 0; i + 1 < m - min; i += 2) {
        if (roll(min + i)) {
          len = min + i + 1;
          break;
        }
        if (roll(min + i + 1)) {
          len = min + i + 2;
          break;
        }
      }
    }
    lengths.push_back(len);
    pos += len;
  }
  return lengths;
}

// ------------------------------------------------------------ the hash --

TEST(BuzhashTest, TableIsCasyncs) {
  const std::array<uint32_t, 256>& t = BuzhashTable();
  EXPECT_EQ(t[0], 0x458be752u);
  EXPECT_EQ(t[1], 0xc10748ccu);
  EXPECT_EQ(t[127], 0xf9bd6ce2u);
  EXPECT_EQ(t[128], 0xa268e64eu);
  EXPECT_EQ(t[255], 0xd95ddf11u);
}

TEST(BuzhashTest, WindowHashIsTheDefinitionAndRolls) {
  const Bytes data = testing::RandomBytes(5000, 3);
  uint32_t rolled = BuzhashWindow(data.data() + 47);
  for (size_t p = 47; p < data.size(); ++p) {
    ASSERT_EQ(BuzhashWindow(data.data() + p), DirectHash(data.data(), p)) << p;
    if (p > 47) {
      rolled = Rotl(rolled, 1) ^ Rotl(BuzhashTable()[data[p - 48]], 48) ^
               BuzhashTable()[data[p]];
    }
    ASSERT_EQ(rolled, DirectHash(data.data(), p)) << p;
  }
}

// ------------------------------------------------------- discriminator --

// Printed by desync v1.0.4's formula in Go (GOAMD64=v1, the default).
TEST(BuzhashTest, DiscriminatorMatchesDesync) {
  const std::vector<std::pair<uint32_t, uint32_t>> vectors = {
      {48, 36},         {49, 36},          {64, 48},          {100, 75},
      {256, 192},       {300, 225},        {1000, 750},       {1024, 768},
      {4096, 3075},     {16384, 12318},    {65536, 49535},    {100000, 75867},
      {262144, 202440}, {1048576, 886711}, {4194304, 5721670}};
  for (const auto& [avg, d] : vectors) {
    EXPECT_EQ(BuzhashDiscriminator(avg), d) << "avg " << avg;
  }
  EXPECT_EQ(BuzhashCutter(16384, 65536, 262144).discriminator(), 49535u);
}

// Each operation rounded, as Go evaluates it without FMA — and, for every
// average buzhash accepts, also what a fused multiply-add would give, so a
// compiler contracting the formula could not change d either.
TEST(BuzhashTest, DiscriminatorIsTheRoundedFormulaForEveryAverage) {
  const AlgorithmLimits& limits = LimitsFor(Algorithm::kBuzhash);
  ASSERT_EQ(limits.avg_size.min, kBuzhashAvgSizeLowerBound);
  for (uint64_t avg = limits.avg_size.min; avg <= limits.avg_size.max; ++avg) {
    volatile double a = static_cast<double>(avg);
    volatile double product = -1.42888852e-7 * a;  // rounded: no contraction
    const double rounded = a / (product + 1.33237515);
    const double fused = a / std::fma(-1.42888852e-7, a, 1.33237515);
    const uint32_t d = BuzhashDiscriminator(static_cast<uint32_t>(avg));
    ASSERT_EQ(d, static_cast<uint32_t>(rounded)) << "avg " << avg;
    ASSERT_EQ(d, static_cast<uint32_t>(fused)) << "avg " << avg;
    ASSERT_GE(d, 1u) << "avg " << avg;
  }
}

// ------------------------------------------------- desync's own vectors --

uint64_t Le64(const Bytes& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

// A caibx file as desync's index.go reads it: a FormatIndex element
// (size 48, type CaFormatIndex, feature flags, min, avg, max), then a
// FormatTable (size 2^64 - 1, type CaFormatTable) of (end offset, chunk ID)
// items ended by a zero offset, a zero, the index offset, the table size and
// the tail marker. All integers little-endian.
struct Caibx {
  uint64_t flags = 0;
  uint64_t min = 0;
  uint64_t avg = 0;
  uint64_t max = 0;
  std::vector<uint64_t> ends;
  std::vector<std::string> ids;  // 32 raw bytes each
};

constexpr uint64_t kCaFormatIndex = 0x96824d9c7b129ff9;
constexpr uint64_t kCaFormatTable = 0xe75b9e112f17417d;
constexpr uint64_t kCaFormatTableTailMarker = 0x4b4f050e5549ecd1;
constexpr uint64_t kCaFormatSha512256 = 0x2000000000000000;

::testing::AssertionResult ParseCaibx(const Bytes& file, Caibx* out) {
  auto fail = [](const std::string& what) {
    return ::testing::AssertionFailure() << what;
  };
  if (file.size() < 64 + 16) return fail("too short");
  if (Le64(file, 0) != 48 || Le64(file, 8) != kCaFormatIndex) {
    return fail("no FormatIndex header");
  }
  out->flags = Le64(file, 16);
  out->min = Le64(file, 24);
  out->avg = Le64(file, 32);
  out->max = Le64(file, 40);
  if (Le64(file, 48) != ~uint64_t{0} || Le64(file, 56) != kCaFormatTable) {
    return fail("no FormatTable header");
  }
  size_t at = 64;
  for (;;) {
    if (at + 8 > file.size()) return fail("table not terminated");
    const uint64_t end = Le64(file, at);
    at += 8;
    if (end == 0) break;
    if (at + 32 > file.size()) return fail("truncated chunk ID");
    out->ends.push_back(end);
    out->ids.emplace_back(reinterpret_cast<const char*>(&file[at]), 32);
    at += 32;
  }
  if (at + 32 != file.size()) return fail("tail of unexpected size");
  if (Le64(file, at) != 0) return fail("second zero fill missing");
  if (Le64(file, at + 24) != kCaFormatTableTailMarker) {
    return fail("tail marker missing");
  }
  return ::testing::AssertionSuccess();
}

std::string Sha512_256(const uint8_t* data, size_t n) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EXPECT_EQ(EVP_Digest(data, n, out, &len, EVP_sha512_256(), nullptr), 1);
  return std::string(reinterpret_cast<const char*>(out), len);
}

// desync's chunker test: testdata/chunker.input cut with the parameters of
// testdata/chunker.index gives exactly that index's chunks (ends and
// SHA-512/256 IDs, desync's default digest).
TEST(BuzhashTest, DesyncPublishedVectors) {
  const Bytes input = testing::ReadTestFile("desync/chunker.input");
  const Bytes index_file = testing::ReadTestFile("desync/chunker.index");
  ASSERT_EQ(input.size(), 1048576u);
  Caibx index;
  ASSERT_TRUE(ParseCaibx(index_file, &index));
  EXPECT_NE(index.flags & kCaFormatSha512256, 0u);
  ASSERT_EQ(index.min, 16384u);
  ASSERT_EQ(index.avg, 65536u);
  ASSERT_EQ(index.max, 262144u);
  ASSERT_EQ(index.ends.size(), 20u);
  ASSERT_EQ(index.ends.back(), input.size());
  // Spot checks from desync's chunker_test.go (start, size).
  EXPECT_EQ(index.ends[0], 81590u);
  EXPECT_EQ(index.ends[10] - index.ends[9], 103873u);
  EXPECT_EQ(index.ends[18], 982644u);

  const ChunkerOptions options = Buzhash(static_cast<uint32_t>(index.min),
                                         static_cast<uint32_t>(index.avg),
                                         static_cast<uint32_t>(index.max));
  ASSERT_TRUE(ValidateOptions(options).ok());
  const std::vector<Chunk> chunks = ReferenceChunks(options, input);
  ASSERT_EQ(chunks.size(), index.ends.size());
  uint64_t start = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].offset, start) << "chunk " << i;
    EXPECT_EQ(chunks[i].offset + chunks[i].length, index.ends[i])
        << "chunk " << i;
    EXPECT_EQ(Sha512_256(input.data() + chunks[i].offset, chunks[i].length),
              index.ids[i])
        << "chunk " << i;
    start = index.ends[i];
  }
}

// desync v1.0.4's chunks of inputs made here (test_util.h), as printed by a
// Go program over NewChunker/Next: the count and FNV-1a 64 of the lengths
// (each as 8 little-endian bytes). min - max odd in two sets, so that
// desync's pair loop leaves a byte unexamined; zeros never hit.
TEST(BuzhashTest, DesyncChunkLengthsOnGeneratedInputs) {
  struct Case {
    const char* name;
    Bytes data;
    uint32_t min, avg, max;
    size_t count;
    uint64_t fnv;
  };
  const Case cases[] = {
      {"random 64/256/1024", testing::RandomBytes(1 << 20, 11), 64, 256, 1024,
       4118, 0x331a5636482d5e4f},
      {"random 65/300/1000", testing::RandomBytes(1 << 20, 11), 65, 300, 1000,
       3632, 0x91a5ec945547265d},
      {"random 4096/4096/4096", testing::RandomBytes(1 << 20, 11), 4096, 4096,
       4096, 256, 0x9c73dbe23743c325},
      {"text 48/100/101", testing::TextBytes(1 << 20, 5), 48, 100, 101, 12123,
       0x6c84144beb32c79d},
      {"text 64/256/1024", testing::TextBytes(1 << 20, 5), 64, 256, 1024, 4144,
       0x161a0be6735b1e57},
      {"random defaults", testing::RandomBytes(3 << 20, 12), 16384, 65536,
       262144, 45, 0x575d658a8580f7ea},
      {"zeros defaults", testing::ConstantBytes(1 << 20, 0), 16384, 65536,
       262144, 4, 0x1dfac984c47bcca5},
  };
  for (const Case& c : cases) {
    const std::vector<Chunk> chunks =
        ReferenceChunks(Buzhash(c.min, c.avg, c.max), c.data);
    uint64_t fnv = 14695981039346656037u;
    for (const Chunk& chunk : chunks) {
      for (int i = 0; i < 8; ++i) {
        fnv ^= (uint64_t{chunk.length} >> (8 * i)) & 0xFF;
        fnv *= 1099511628211u;
      }
    }
    EXPECT_EQ(chunks.size(), c.count) << c.name;
    EXPECT_EQ(fnv, c.fnv) << c.name;
    EXPECT_EQ(Lengths(chunks), DesyncModel(c.data, c.min, c.avg, c.max))
        << c.name;
  }
}

// ------------------------------------------------------------- cutting --

TEST(BuzhashTest, EdgeSizesMatchDesyncsLoop) {
  const Bytes random = testing::RandomBytes(3000, 5);
  const Bytes text = testing::TextBytes(3000, 6);
  const std::vector<std::array<uint32_t, 3>> params = {
      {48, 48, 48}, {48, 60, 97}, {64, 256, 1024}, {100, 120, 141}};
  for (const auto& [min, avg, max] : params) {
    const ChunkerOptions options = Buzhash(min, avg, max);
    ASSERT_TRUE(ValidateOptions(options).ok());
    for (size_t n :
         {size_t{0}, size_t{1}, size_t{47}, size_t{48}, size_t{49},
          size_t{min} - 1, size_t{min}, size_t{min} + 1, size_t{max} - 1,
          size_t{max}, size_t{max} + 1, size_t{max} + min, size_t{2999}}) {
      for (const Bytes* source : {&random, &text}) {
        const Bytes data(source->begin(), source->begin() + n);
        const std::vector<Chunk> chunks = ReferenceChunks(options, data);
        ASSERT_TRUE(testing::CoversStream(chunks, n, options));
        ASSERT_EQ(Lengths(chunks), DesyncModel(data, min, avg, max))
            << min << "/" << avg << "/" << max << " n " << n;
        if (n == 0) {
          EXPECT_TRUE(chunks.empty());
        } else if (n <= min) {
          ASSERT_EQ(chunks.size(), 1u);
          EXPECT_EQ(chunks[0].hash, 0u);
        }
      }
    }
  }
}

// Every candidate cut ends on a byte whose window hash passes the test and
// reports that hash; no byte from offset min to the cut passes it; a chunk
// without a candidate ends at max or at the end of the stream, hash 0.
TEST(BuzhashTest, CutsAreTheFirstCandidateFromMin) {
  const Bytes data = testing::RandomBytes(1 << 20, 8);
  const ChunkerOptions options = Buzhash(200, 1000, 3000);
  const uint32_t d = BuzhashDiscriminator(options.avg_size);
  const std::vector<Chunk> chunks = ReferenceChunks(options, data);
  ASSERT_TRUE(testing::CoversStream(chunks, data.size(), options));
  int candidates = 0, at_max = 0;
  for (const Chunk& c : chunks) {
    const size_t last = c.offset + c.length - 1;
    const bool at_end = c.offset + c.length == data.size();
    for (size_t p = c.offset + options.min_size; p < last; ++p) {
      ASSERT_NE(DirectHash(data.data(), p) % d, d - 1) << p;
    }
    const uint32_t h = DirectHash(data.data(), last);
    if (c.length > options.min_size && h % d == d - 1) {
      EXPECT_EQ(c.hash, h) << c.offset;
      ++candidates;
    } else {
      EXPECT_EQ(c.hash, 0u) << c.offset;
      EXPECT_TRUE(c.length == options.max_size || at_end) << c.offset;
      at_max += c.length == options.max_size;
    }
  }
  EXPECT_GT(candidates, 500);
  EXPECT_GT(at_max, 10);
}

TEST(BuzhashTest, ZerosCutAtMax) {
  const Bytes zeros = testing::ConstantBytes(1 << 20, 0);
  const ChunkerOptions options = DefaultOptions(Algorithm::kBuzhash);
  const std::vector<Chunk> chunks = ReferenceChunks(options, zeros);
  ASSERT_EQ(chunks.size(), 4u);
  for (const Chunk& c : chunks) {
    EXPECT_EQ(c.length, options.max_size);
    EXPECT_EQ(c.hash, 0u);
  }
}

TEST(BuzhashTest, DefaultsAreCasyncs) {
  const ChunkerOptions options = DefaultOptions(Algorithm::kBuzhash);
  EXPECT_EQ(options.min_size, 16u * 1024);
  EXPECT_EQ(options.avg_size, 64u * 1024);
  EXPECT_EQ(options.max_size, 256u * 1024);
  EXPECT_TRUE(ValidateOptions(options).ok());
}

// -------------------------------------------------------------- engine --

// FastChunks and StreamChunker with every kernel, 1 and 3 threads and every
// strategy equal ReferenceChunks.
TEST(BuzhashTest, EngineEqualsReference) {
  ThreadPoolExecutor three(3);
  struct Input {
    std::string name;
    Bytes data;
  };
  const std::vector<Input> inputs = {
      {"random", testing::RandomBytes((3 << 20) + 4321, 21)},
      {"text", testing::TextBytes((1 << 20) + 77, 22)},
      {"zeros", testing::ConstantBytes((1 << 20) + 5, 0)},
  };
  const std::vector<ChunkerOptions> option_sets = {
      Buzhash(64, 256, 1024), Buzhash(48, 100, 101), Buzhash(1000, 3001, 5001),
      DefaultOptions(Algorithm::kBuzhash)};
  int checked = 0;
  for (const kernels::KernelSet* kernel : kernels::AllKernelSets()) {
    if (!kernels::FindKernelSet(kernel->name).ok()) continue;  // CPU lacks it
    for (const ChunkerOptions& options : option_sets) {
      if (!ValidateOptions(options).ok()) continue;
      for (const Input& input : inputs) {
        const std::vector<Chunk> reference =
            ReferenceChunks(options, input.data);
        for (Executor* executor : {static_cast<Executor*>(nullptr),
                                   static_cast<Executor*>(&three)}) {
          for (Strategy strategy :
               {Strategy::kAuto, Strategy::kTwoStage, Strategy::kSequentialScan,
                Strategy::kReference}) {
            EngineOptions engine;
            engine.kernel = kernel;
            engine.executor = executor;
            engine.strategy = strategy;
            const std::string what = absl::StrCat(
                kernel->name, " ", input.name, " min ", options.min_size,
                " strategy ", StrategyName(strategy), " threads ",
                executor == nullptr ? 1 : 3);
            absl::StatusOr<std::vector<Chunk>> fast =
                FastChunks(options, input.data, engine);
            ASSERT_TRUE(fast.ok()) << fast.status();
            ASSERT_EQ(*fast, reference) << what;
            absl::StatusOr<std::unique_ptr<StreamChunker>> stream =
                StreamChunker::Create(options, engine);
            ASSERT_TRUE(stream.ok()) << stream.status();
            std::vector<Chunk> streamed;
            const absl::string_view all(
                reinterpret_cast<const char*>(input.data.data()),
                input.data.size());
            for (size_t pos = 0; pos < all.size(); pos += 100003) {
              (*stream)->Append(all.substr(pos, 100003), &streamed);
            }
            (*stream)->Finish(&streamed);
            ASSERT_EQ(streamed, reference) << what << " (stream)";
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 4 * 3 * 2 * 4);  // scalar at least
}

}  // namespace
}  // namespace chunkd::chunking
