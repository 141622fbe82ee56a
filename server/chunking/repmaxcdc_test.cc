// Tests of repmaxcdc (docs/algorithms/repmaxcdc.md):
//   - the reference cutter against a literal transcription of go-cdc's
//     simple chunker (simple_rep_max_content_defined_chunker.go of
//     github.com/buildbarn/go-cdc v0.0.10, the definition) on random and
//     low-entropy data, many parameter sets and every edge size;
//   - the published vectors: Bazel's RepMaxCdcChunkerTest over
//     SekienAkashita.jpg (min 4096 / horizon 32768 and 8192 / 0), generated
//     by its authors with go-cdc, offsets, lengths and SHA-256 of each chunk;
//   - boundaries pinned from go-cdc v0.0.10 itself (NewRepMaxContentDefined-
//     Chunker with FastContentDefinedChunkerGearTable, run by a throwaway Go
//     program on the same file) for small parameters, where the file has
//     hundreds of chunks;
//   - FastChunks and StreamChunker equal ReferenceChunks on every kernel,
//     1 and 3 threads, several segment and window sizes, every strategy.

#include "chunking/repmaxcdc.h"

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

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "chunking/fastcdc.h"
#include "chunking/kernels/kernels.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;

// go-cdc's simple chunker over a whole stream, statement by statement: peek
// 2 * min + horizon bytes; fewer than 2 * min are the last chunk; else drop
// the last min of them, hash the 64 bytes before min, and look for the first
// strictly largest hash over the rest; a cut at min + best < 2 * min is the
// chunk, otherwise the range ends at best and the search repeats.
std::vector<Chunk> SimpleRepMax(absl::Span<const uint8_t> data, size_t min,
                                size_t horizon) {
  const std::array<uint64_t, 256>& gear = FastCdcGearTable();
  const size_t peek_size = 2 * min + horizon;
  std::vector<Chunk> chunks;
  size_t pos = 0;
  while (pos < data.size()) {
    const uint8_t* d = data.data() + pos;
    size_t len = std::min(peek_size, data.size() - pos);
    if (len < 2 * min) {
      chunks.push_back({pos, static_cast<uint32_t>(len), 0});
      break;
    }
    len -= min;
    uint64_t initial = 0;
    for (size_t i = min - 64; i < min; ++i)
      initial = (initial << 1) + gear[d[i]];
    // Each round shortens the range (best < len), so len rounds suffice.
    size_t chunk = 0;
    for (size_t round = 0; round < len && chunk == 0; ++round) {
      uint64_t hash = initial;
      uint64_t best_hash = hash;
      size_t best = 0;
      for (size_t i = 0; min + i < len; ++i) {
        hash = (hash << 1) + gear[d[min + i]];
        if (best_hash < hash) {
          best_hash = hash;
          best = i + 1;
        }
      }
      if (best < min) {
        chunk = min + best;
      } else {
        len = best;
      }
    }
    if (chunk == 0) {
      ADD_FAILURE() << "the simple chunker did not finish at " << pos;
      return chunks;
    }
    chunks.push_back({pos, static_cast<uint32_t>(chunk), 0});
    pos += chunk;
  }
  return chunks;
}

ChunkerOptions Options(uint32_t min, uint32_t horizon) {
  ChunkerOptions options = DefaultOptions(Algorithm::kRepMaxCdc);
  options.min_size = min;
  options.horizon_size = horizon;
  return options;
}

std::string Sha256Hex(const uint8_t* data, size_t n) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EXPECT_EQ(EVP_Digest(data, n, out, &len, EVP_sha256(), nullptr), 1);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(out), len));
}

TEST(RepMaxCdcCutterTest, SizesFollowTheMinimumAndHorizon) {
  const RepMaxCdcCutter cutter(256 * 1024, 2 * 1024 * 1024);
  EXPECT_EQ(cutter.max_size(), 512u * 1024 - 1);
  EXPECT_EQ(cutter.final_size(), 512u * 1024 + 2 * 1024 * 1024);
  const RepMaxCdcCutter uniform(64, 0);
  EXPECT_EQ(uniform.max_size(), 127u);
  EXPECT_EQ(uniform.final_size(), 128u);
  // The hash reported is always 0, also on a cut inside the horizon.
  const Bytes data = testing::RandomBytes(5000, 1);
  uint64_t hash = 123;
  const size_t len =
      RepMaxCdcCutter(64, 512).Cut(data.data(), data.size(), 0, &hash);
  EXPECT_EQ(hash, 0u);
  EXPECT_GE(len, 64u);
  EXPECT_LT(len, 128u);
}

// Bazel's RepMaxCdcChunkerTest (src/test/java/com/google/devtools/build/lib/
// remote/chunking), whose vectors its authors generated with go-cdc.
struct PublishedChunk {
  uint64_t offset;
  uint32_t length;
  const char* sha256;
};

void ExpectPublished(uint32_t min, uint32_t horizon,
                     const std::vector<PublishedChunk>& want) {
  const Bytes image = testing::ReadTestFile("SekienAkashita.jpg");
  ASSERT_EQ(image.size(), 109466u);
  const ChunkerOptions options = Options(min, horizon);
  const std::vector<Chunk> simple = SimpleRepMax(image, min, horizon);
  const std::vector<Chunk> chunks = ReferenceChunks(options, image);
  ASSERT_EQ(chunks.size(), want.size());
  ASSERT_EQ(simple, chunks);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(chunks[i].offset, want[i].offset);
    EXPECT_EQ(chunks[i].length, want[i].length);
    EXPECT_EQ(chunks[i].hash, 0u);
    EXPECT_EQ(Sha256Hex(image.data() + chunks[i].offset, chunks[i].length),
              want[i].sha256);
  }
}

TEST(RepMaxCdcCutterTest, BazelVectorsMin4096Horizon32768) {
  ExpectPublished(
      4096, 32768,
      {{0, 7026,
        "3c386537b8c3200dd2ab6623f6096a576d07844a4a0d5d2994d13e24887dae46"},
       {7026, 5198,
        "cc7fb08694b471e3ba660b700b347775d1e7a55db8f308c176e2eb6776b5222c"},
       {12224, 5310,
        "096a3e0e42f0a8b7a5a3a337e9b5b4c7fc59abcd6f69486fb68fe4c5c156300f"},
       {17534, 4271,
        "3f4a0b00f9a04959806c9ce9e530fa5d761930ef6c8477117b58eb93196342e8"},
       {21805, 5278,
        "d0c2f82664d8887bd2d289a75baea1d5688e6ee586f8767149bfef9c6df8fe63"},
       {27083, 5588,
        "558e6b58c659f7463c846a0d18c155a86520d1ca69102f102635c08e8b0897e2"},
       {32671, 5017,
        "c3c66478eb8e1632768e6e13dc31e492ac78befca38e9db85525b4b274c5b5d7"},
       {37688, 6761,
        "a5ce22ca3a02323451ddca6db5319c26b5fc1abc5621a033c98cd3de154cd29d"},
       {44449, 5541,
        "ec4752962eda083bf78b24cb087e07451ced85d8c0d719f32c474f7dae8fd764"},
       {49990, 7612,
        "3d9e8dc0a5f14dee7db5eabf99bb636352081423f122a84fdb160cecc2ad01bb"},
       {57602, 5501,
        "f8c747a292f7fd6433945356ee314b978b423ac4c3d248c8fdf36c0693eb6006"},
       {63103, 4695,
        "71249e1031dc237ab6393381a30a10ef90d9a93f532c135b11cc0df60a767b5f"},
       {67798, 4362,
        "95c42ec307be0ce1efde6de814c668f05a31887fde9501b478faca225cf9b8c7"},
       {72160, 6221,
        "8869f4871a0f3fb63775e0fb7f10e170a59b71a6fa0a91a18fa3cf5fff987eba"},
       {78381, 7190,
        "d2f91644457863f716071e76e9b1046408820aa95b36471d5e70ee5c91b611a2"},
       {85571, 5858,
        "3507024624db4ff48ee546e984d7c60461d6a526aba7e4aa33833b162785e79e"},
       {91429, 4382,
        "9b19e98bc5d9b6f486c7c7281fd61044b8e5333363048b20ce3dcb2ee0172980"},
       {95811, 8022,
        "e56dbfa2a82695fed3c565857dbc644af91c983b55c13fe20d9e03bb89e009e2"},
       {103833, 5633,
        "7d76fde9af9a911c4e580db9227e5109c5de28101f3f26637c527e80215aad38"}});
}

TEST(RepMaxCdcCutterTest, BazelVectorsMin8192HorizonZero) {
  ExpectPublished(
      8192, 0,
      {{0, 8192,
        "716c5e702f4bee5f18426da9e9eb77d22aa936486741768b86fff472bc18c363"},
       {8192, 8192,
        "33df8556634b77338abee984190d1aa21efb10411edeae3820fd61a93e489f58"},
       {16384, 8192,
        "a05018146657a5c999868a9e3f6e94da715c519f929005ca50404eb5a30caf1f"},
       {24576, 8192,
        "e124b2b4e8847def80e1b8da2fbfa5b483c3bcab6cf2d88e50d598d6c2d2e65c"},
       {32768, 8192,
        "7855d8367f097e33d0d3afbdba0e17749309a0dfb48f3d373bdf94b9b8f378e1"},
       {40960, 8192,
        "782a8f7b5367f177b94da16dc14026a3af3dcfc25b6b53f2060eafee0bc16922"},
       {49152, 8192,
        "3be28a5d9d67d5f8f9b30fbe742406cfefb46c139b48a47eeb98837fbb55128b"},
       {57344, 8192,
        "e6d7615aeefa30776bd0de14ad0e9ac5a738a767c63aa8c3310aa85c49d16d44"},
       {65536, 8192,
        "316e9ca063049a490d8f8431f109f2eaf0bf74739b4c3f4be9da46144733c327"},
       {73728, 8192,
        "2b4a043bd77df955a9fa30358597a90bca046474917e91d3715205f9d674a3bf"},
       {81920, 8192,
        "78abb22658ea5642440139f1bf86382d4bca2d33858fd8e15a170f1c1ac19651"},
       {90112, 8192,
        "076758af278b0fb9fd0313db8f6b796639c23241e2c8d831503e272e069d9aea"},
       {98304, 11162,
        "e776b8d90b880e10e4fdc4f99ba3b0bfbe471f26362007a1775d4cab46a539c7"}});
}

// Chunk lengths of go-cdc v0.0.10 on SekienAkashita.jpg for small
// parameters: their number, the first and last lengths and a hash of all of
// them (h = h * 1000003 + length, mod 2^64, from h = 0).
struct PinnedRun {
  uint32_t min;
  uint32_t horizon;
  size_t count;
  std::vector<uint32_t> first;
  std::vector<uint32_t> last;
  uint64_t lengths_hash;
};

TEST(RepMaxCdcCutterTest, GoCdcBoundariesOnSmallParameters) {
  const Bytes image = testing::ReadTestFile("SekienAkashita.jpg");
  ASSERT_EQ(image.size(), 109466u);
  const PinnedRun runs[] = {
      {64, 512, 1300, {77, 75, 98, 109}, {64, 71, 65}, 0x65044bebca4cf4c6},
      {65, 1000, 1277, {77, 75, 98, 109}, {67, 71, 65}, 0x3472e01587d036ee},
      {1000,
       37,
       107,
       {1034, 1000, 1007, 1027},
       {1018, 1022, 1502},
       0xd661cc814341d596},
      {100, 0, 1094, {100, 100, 100, 100}, {100, 100, 166}, 0xe4e5a656e76beb72},
      {127, 64, 689, {152, 173, 167, 140}, {176, 163, 136}, 0xf65fabb5bb655422},
  };
  for (const PinnedRun& run : runs) {
    SCOPED_TRACE(absl::StrCat("min ", run.min, " horizon ", run.horizon));
    const std::vector<Chunk> chunks =
        ReferenceChunks(Options(run.min, run.horizon), image);
    ASSERT_EQ(chunks.size(), run.count);
    std::vector<uint32_t> lengths;
    uint64_t hash = 0;
    for (const Chunk& c : chunks) {
      lengths.push_back(c.length);
      hash = hash * 1000003 + c.length;
    }
    EXPECT_EQ(std::vector<uint32_t>(lengths.begin(), lengths.begin() + 4),
              run.first);
    EXPECT_EQ(std::vector<uint32_t>(lengths.end() - 3, lengths.end()),
              run.last);
    EXPECT_EQ(hash, run.lengths_hash);
  }
}

struct Params {
  uint32_t min;
  uint32_t horizon;
};

// Horizon 0, below min, a few times min, 8 * min; min 64 (the window) and
// odd sizes.
const std::vector<Params>& ParameterSets() {
  static const auto* const kSets = new std::vector<Params>{
      {64, 0},     {64, 37},     {64, 512},    {65, 520},
      {100, 0},    {127, 64},    {128, 1024},  {300, 2400},
      {1000, 100}, {1000, 8000}, {4096, 32768}};
  return *kSets;
}

std::vector<std::pair<std::string, Bytes>> Inputs(size_t size) {
  Bytes mixed = testing::RandomBytes(size, 3);
  for (size_t i = 0; i < size; ++i) {
    if ((i / 700) % 3 == 1) mixed[i] = 0;
  }
  Bytes sawtooth(size);
  for (size_t i = 0; i < size; ++i) sawtooth[i] = static_cast<uint8_t>(i % 7);
  return {{"random", testing::RandomBytes(size, 1)},
          {"random2", testing::RandomBytes(size, 2)},
          {"zeros", testing::ConstantBytes(size, 0)},
          {"ff", testing::ConstantBytes(size, 0xFF)},
          {"ab", testing::RepeatingBytes(size, "ab")},
          {"sawtooth", sawtooth},
          {"text", testing::TextBytes(size, 4)},
          {"mixed", mixed}};
}

// Every chunk in [min, 2 * min) when the stream has at least min bytes (the
// last one too: every cut leaves at least min bytes), else one chunk.
void ExpectBounds(const std::vector<Chunk>& chunks, size_t size, size_t min) {
  ASSERT_TRUE(testing::CoversStream(chunks, size, Options(min, 0)));
  for (const Chunk& c : chunks) {
    if (size >= min) {
      ASSERT_GE(c.length, min) << c.offset;
    }
    ASSERT_LT(c.length, 2 * min) << c.offset;
  }
}

TEST(RepMaxCdcCutterTest, ReferenceIsTheSimpleChunker) {
  const auto inputs = Inputs(60000);
  for (const Params& p : ParameterSets()) {
    SCOPED_TRACE(absl::StrCat("min ", p.min, " horizon ", p.horizon));
    for (const auto& [name, data] : inputs) {
      SCOPED_TRACE(name);
      const std::vector<Chunk> chunks =
          ReferenceChunks(Options(p.min, p.horizon), data);
      ASSERT_EQ(chunks, SimpleRepMax(data, p.min, p.horizon));
      ExpectBounds(chunks, data.size(), p.min);
    }
  }
}

// Stream sizes around every threshold of the definition.
TEST(RepMaxCdcCutterTest, EdgeSizes) {
  const Bytes random = testing::RandomBytes(80000, 9);
  const Bytes text = testing::TextBytes(80000, 9);
  for (const Params& p : ParameterSets()) {
    SCOPED_TRACE(absl::StrCat("min ", p.min, " horizon ", p.horizon));
    const size_t m = p.min;
    const size_t peek = 2 * m + p.horizon;
    for (size_t size :
         {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, m - 1, m,
          m + 1, 2 * m - 1, 2 * m, 2 * m + 1, peek - 1, peek, peek + 1,
          2 * peek + 17, 3 * m + 5}) {
      for (const Bytes* data : {&random, &text}) {
        const absl::Span<const uint8_t> prefix(data->data(), size);
        const std::vector<Chunk> chunks =
            ReferenceChunks(Options(p.min, p.horizon), prefix);
        ASSERT_EQ(chunks, SimpleRepMax(prefix, p.min, p.horizon)) << size;
        ExpectBounds(chunks, size, m);
      }
    }
  }
}

TEST(RepMaxCdcCutterTest, ZeroHorizonCutsEveryMin) {
  const Bytes data = testing::RandomBytes(100 * 64 + 50, 4);
  const std::vector<Chunk> chunks = ReferenceChunks(Options(64, 0), data);
  ASSERT_EQ(chunks.size(), 100u);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].length, 64u) << i;
  }
  EXPECT_EQ(chunks.back().length, 64u + 50);
}

// A cut decided on final_size bytes does not change when more arrive.
TEST(RepMaxCdcCutterTest, CutIsFinalAfterFinalSize) {
  const Bytes data = testing::RandomBytes(200000, 6);
  std::mt19937_64 rng(6);
  for (const Params& p : ParameterSets()) {
    const RepMaxCdcCutter cutter(p.min, p.horizon);
    for (int i = 0; i < 50; ++i) {
      const size_t start = rng() % (data.size() - cutter.final_size() - 1000);
      uint64_t hash = 0;
      const size_t exact =
          cutter.Cut(data.data() + start, cutter.final_size(), 0, &hash);
      const size_t more =
          cutter.Cut(data.data() + start, data.size() - start, 0, &hash);
      ASSERT_EQ(exact, more) << p.min << " " << p.horizon << " " << start;
    }
  }
}

// ------------------------------------------------------------------ engine --

// The measured rule (docs/algorithms/repmaxcdc.md, "In the engine"): the
// two stages once the horizon reaches min_size, else the reference cutter;
// never the sequential scan, whatever the kernel and thread count.
TEST(RepMaxCdcPlanTest, AutomaticStrategyFollowsTheHorizon) {
  ThreadPoolExecutor two(2);
  const struct {
    Params params;
    Strategy want;
  } cases[] = {{{256 * 1024, 2 * 1024 * 1024}, Strategy::kTwoStage},
               {{1024, 1024}, Strategy::kTwoStage},
               {{64, 512}, Strategy::kTwoStage},
               {{1024, 1023}, Strategy::kReference},
               {{64, 0}, Strategy::kReference}};
  for (const kernels::KernelSet* kernel : kernels::AllKernelSets()) {
    if (!kernel->supported()) continue;
    for (Executor* executor :
         {static_cast<Executor*>(nullptr), static_cast<Executor*>(&two)}) {
      for (const auto& c : cases) {
        EngineOptions engine;
        engine.kernel = kernel;
        engine.executor = executor;
        absl::StatusOr<EnginePlan> plan =
            PlanEngine(Options(c.params.min, c.params.horizon), engine);
        ASSERT_TRUE(plan.ok()) << plan.status();
        EXPECT_EQ(plan->strategy, c.want)
            << kernel->name << " min " << c.params.min << " horizon "
            << c.params.horizon;
      }
    }
  }
}

class RepMaxCdcEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<const kernels::KernelSet*> kernel =
        kernels::FindKernelSet(GetParam());
    if (!kernel.ok()) {
      GTEST_SKIP() << "kernel " << GetParam()
                   << " unavailable: " << kernel.status();
    }
    kernel_ = *kernel;
  }

  EngineOptions Engine(Executor* executor, size_t segment, size_t window,
                       Strategy strategy) const {
    EngineOptions e;
    e.kernel = kernel_;
    e.executor = executor;
    e.segment_size = segment;
    e.window_size = window;
    e.strategy = strategy;
    return e;
  }

  // FastChunks over every thread count, segment, window and strategy.
  void ExpectFast(const ChunkerOptions& options,
                  absl::Span<const uint8_t> data) {
    const std::vector<Chunk> reference = ReferenceChunks(options, data);
    for (Executor* executor :
         {static_cast<Executor*>(nullptr), static_cast<Executor*>(&three_)}) {
      for (size_t segment :
           {size_t{64}, size_t{4097}, size_t{65536}, size_t{0}}) {
        for (size_t window : {size_t{0}, size_t{1000}, size_t{65539}}) {
          for (Strategy strategy :
               {Strategy::kAuto, Strategy::kTwoStage, Strategy::kReference,
                Strategy::kSequentialScan}) {
            const EngineOptions e = Engine(executor, segment, window, strategy);
            absl::StatusOr<std::vector<Chunk>> chunks =
                FastChunks(options, data, e);
            ASSERT_TRUE(chunks.ok()) << chunks.status();
            ASSERT_EQ(*chunks, reference)
                << "threads " << (executor == nullptr ? 1 : 3) << " segment "
                << segment << " window " << window << " strategy "
                << StrategyName(strategy);
          }
        }
      }
    }
  }

  // StreamChunker in pieces of random sizes: most inputs of the engine then
  // end inside a word, which the two-stage strategy computes again whole.
  void ExpectStream(const ChunkerOptions& options, const Bytes& data,
                    Executor* executor, size_t window, uint64_t seed) {
    const std::vector<Chunk> reference = ReferenceChunks(options, data);
    absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
        StreamChunker::Create(
            options, Engine(executor, 4097, window, Strategy::kTwoStage));
    ASSERT_TRUE(chunker.ok()) << chunker.status();
    std::mt19937_64 rng(seed);
    std::vector<Chunk> out;
    for (size_t pos = 0; pos < data.size();) {
      const uint64_t r = rng();
      const size_t n =
          std::min<size_t>(data.size() - pos, r % 3 == 0 ? r % 97 : r % 9000);
      (*chunker)->Append(
          absl::string_view(reinterpret_cast<const char*>(data.data()) + pos,
                            n),
          &out);
      pos += n;
    }
    (*chunker)->Finish(&out);
    ASSERT_EQ(out, reference) << "window " << window << " seed " << seed;
  }

  const kernels::KernelSet* kernel_ = nullptr;
  ThreadPoolExecutor three_{3};
};

TEST_P(RepMaxCdcEngineTest, FastChunksSmallParameters) {
  for (const Params& p :
       {Params{64, 512}, Params{100, 37}, Params{65, 0}, Params{127, 1000}}) {
    SCOPED_TRACE(absl::StrCat("min ", p.min, " horizon ", p.horizon));
    for (const auto& [name, data] : Inputs(150001)) {
      SCOPED_TRACE(name);
      ExpectFast(Options(p.min, p.horizon), data);
      if (HasFatalFailure()) return;
    }
  }
}

// Default parameters (min 256 KiB, horizon 2 MiB: 2.5 MiB looked at per
// cut) on 7 MiB, and every size up to a few chunks of small parameters.
TEST_P(RepMaxCdcEngineTest, FastChunksDefaultParametersAndEverySize) {
  ExpectFast(DefaultOptions(Algorithm::kRepMaxCdc),
             testing::RandomBytes((size_t{7} << 20) + 99, 8));
  if (HasFatalFailure()) return;
  const Bytes data = testing::RandomBytes(1200, 5);
  for (size_t size = 0; size <= data.size(); size += 7) {
    const absl::Span<const uint8_t> prefix(data.data(), size);
    const ChunkerOptions options = Options(64, 256);
    const std::vector<Chunk> reference = ReferenceChunks(options, prefix);
    for (size_t segment : {size_t{64}, size_t{0}}) {
      absl::StatusOr<std::vector<Chunk>> chunks = FastChunks(
          options, prefix, Engine(&three_, segment, 1, Strategy::kTwoStage));
      ASSERT_TRUE(chunks.ok()) << chunks.status();
      ASSERT_EQ(*chunks, reference) << size;
    }
  }
}

TEST_P(RepMaxCdcEngineTest, StreamChunkerPiecesEndingInsideWords) {
  const Bytes random = testing::RandomBytes(400000, 10);
  const Bytes text = testing::TextBytes(400000, 10);
  for (const Params& p : {Params{64, 512}, Params{300, 2400}}) {
    SCOPED_TRACE(absl::StrCat("min ", p.min, " horizon ", p.horizon));
    uint64_t seed = 1;
    for (const Bytes* data : {&random, &text}) {
      for (Executor* executor :
           {static_cast<Executor*>(nullptr), static_cast<Executor*>(&three_)}) {
        for (size_t window : {size_t{1}, size_t{777}, size_t{0}}) {
          ExpectStream(Options(p.min, p.horizon), *data, executor, window,
                       seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, RepMaxCdcEngineTest,
                         ::testing::ValuesIn(testing::KernelNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace chunkd::chunking
