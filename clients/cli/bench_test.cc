#include "clients/cli/bench.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chunkd/chunker.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/args.h"
#include "clients/cli/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "workload/datagen.h"
#include "workload/harness.h"

namespace chunkd::cli {
namespace {

using chunking::Algorithm;
using chunking::kernels::BitmapWords;
using chunking::kernels::KernelSet;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<BenchConfig> Config(const std::vector<std::string>& words) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, BenchFlagSpecs());
  if (!args.ok()) return args.status();
  return BenchConfigFromArgs(*args);
}

using ::chunkd::cli::testing::ReadAll;

struct BenchRun {
  absl::Status status;
  std::string out;
};

BenchRun RunConfig(const BenchConfig& config) {
  std::FILE* out = std::tmpfile();
  BenchRun run;
  run.status = RunBench(config, out);
  run.out = ReadAll(out);
  std::fclose(out);
  return run;
}

TEST(BenchConfigTest, Defaults) {
  absl::StatusOr<BenchConfig> config = Config({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->algorithms, chunking::AllAlgorithms());
  size_t supported = 0;
  for (const KernelSet* k : chunking::kernels::AllKernelSets()) {
    supported += k->supported() ? 1 : 0;
  }
  EXPECT_EQ(config->kernels.size(), supported);
  EXPECT_EQ(config->kernels.size() + config->skipped.size(),
            chunking::kernels::AllKernelSets().size());
  ASSERT_FALSE(config->threads.empty());
  EXPECT_EQ(config->threads[0], 1u);
  EXPECT_EQ(config->strategy, chunking::Strategy::kAuto);
  EXPECT_EQ(config->dataset, workload::Dataset::kRandom);
  EXPECT_EQ(config->size, size_t{64} << 20);
  EXPECT_EQ(config->seconds, 1.0);
  EXPECT_EQ(config->input, "");
  EXPECT_TRUE(config->auto_kernel);
}

TEST(BenchConfigTest, AllCoversTheUpstreamAlgorithms) {
  absl::StatusOr<BenchConfig> config = Config({});
  ASSERT_TRUE(config.ok()) << config.status();
  for (Algorithm a :
       {Algorithm::kRepMaxCdc, Algorithm::kRabin, Algorithm::kBuzhash}) {
    EXPECT_THAT(config->algorithms, ::testing::Contains(a))
        << chunking::AlgorithmName(a);
  }
  config = Config({"--algorithm", "buzhash,repmaxcdc,rabin,buzhash"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->algorithms,
              ElementsAre(Algorithm::kBuzhash, Algorithm::kRepMaxCdc,
                          Algorithm::kRabin));
}

TEST(BenchConfigTest, InputExcludesTheGeneratedDataFlags) {
  absl::StatusOr<BenchConfig> config = Config({"--input", "/some/file"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->input, "/some/file");
  for (const std::vector<std::string>& words :
       std::vector<std::vector<std::string>>{
           {"--input", "f", "--size", "1000"},
           {"--input", "f", "--dataset", "random"},
           {"--input", ""},
       }) {
    config = Config(words);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument)
        << words.size();
    EXPECT_THAT(config.status().message(), HasSubstr("--input: "))
        << words.size();
  }
}

TEST(BenchConfigTest, ParsesEveryFlag) {
  absl::StatusOr<BenchConfig> config =
      Config({"--algorithm", "crc32,fastcdc,crc32", "--backend", "scalar",
              "--threads", "2,1,2", "--strategy", "two-stage", "--dataset",
              "versioned", "--size", "1000", "--seconds", "0.25"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->algorithms,
              ElementsAre(Algorithm::kCrc32, Algorithm::kFastCdc));
  ASSERT_EQ(config->kernels.size(), 1u);
  EXPECT_STREQ(config->kernels[0]->name, "scalar");
  EXPECT_THAT(config->threads, ElementsAre(2u, 1u));
  EXPECT_EQ(config->strategy, chunking::Strategy::kTwoStage);
  EXPECT_EQ(config->dataset, workload::Dataset::kVersioned);
  EXPECT_EQ(config->size, 1000u);
  EXPECT_EQ(config->seconds, 0.25);
}

TEST(BenchConfigTest, PresetTakesItsAlgorithmAndParameters) {
  absl::StatusOr<BenchConfig> config = Config({"--preset", "fastcdc-reapi"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->algorithms, ElementsAre(Algorithm::kFastCdc));
  EXPECT_EQ(config->preset, "fastcdc-reapi");
  ASSERT_TRUE(config->preset_options.has_value());
  EXPECT_EQ(config->preset_options->min_size, 128u << 10);
  EXPECT_EQ(config->preset_options->avg_size, 512u << 10);
  EXPECT_EQ(config->preset_options->max_size, 2u << 20);
  EXPECT_EQ(config->preset_options->normalization_level, 2u);
  config = Config({"--preset", "seqcdc-8k", "--algorithm", "seqcdc"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->algorithms, ElementsAre(Algorithm::kSeqCdc));
  EXPECT_FALSE(Config({})->preset_options.has_value());
}

TEST(BenchConfigTest, RejectsBadValuesNamingTheFlag) {
  struct Case {
    std::vector<std::string> words;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--algorithm", "rabin64"}, "--algorithm: "},
           {{"--algorithm", "rabin64"}, "repmaxcdc, rabin, buzhash"},
           {{"--algorithm", "fastcdc,"}, "--algorithm: "},
           {{"--backend", "neon"}, "--backend: "},
           {{"--backend", "neon"}, "scalar"},
           {{"--threads", "0"}, "--threads: expected thread counts in 1..256"},
           {{"--threads", "1,x"}, "--threads: "},
           {{"--threads", "257"}, "--threads: "},
           {{"--strategy", "fastest"}, "--strategy: "},
           {{"--dataset", "zeros"}, "--dataset: "},
           {{"--size", "0"}, "--size: expected a byte count in 1..4294967296"},
           {{"--size", "4294967297"}, "--size: "},
           {{"--preset", "fastcdc-16k"}, "--preset: unknown preset"},
           {{"--preset", "fastcdc-reapi", "--algorithm", "crc32"},
            "--preset fastcdc-reapi is fastcdc: --algorithm must be"},
           {{"--preset", "seqcdc-8k", "--algorithm", "seqcdc,fastcdc"},
            "--preset seqcdc-8k is seqcdc"},
           {{"--seconds", "0"}, "--seconds: expected a number of seconds"},
           {{"--seconds", "-1"}, "--seconds: "},
           {{"--seconds", "1e3"}, "--seconds: "},
           {{"--seconds", "nan"}, "--seconds: "},
           {{"--seconds", "3601"}, "--seconds: "},
       }) {
    absl::StatusOr<BenchConfig> config = Config(c.words);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument)
        << c.words[1];
    EXPECT_THAT(config.status().message(), HasSubstr(c.message)) << c.words[1];
  }
}

TEST(RunBenchTest, PrintsARowPerMeasurementAndChecksThem) {
  BenchConfig config;
  config.algorithms = {Algorithm::kFastCdc, Algorithm::kSeqCdc};
  config.kernels = {&chunking::kernels::ScalarKernelSet()};
  config.threads = {1, 2};
  config.size = 300000;
  config.seconds = 0.001;
  BenchRun run = RunConfig(config);
  ASSERT_TRUE(run.status.ok()) << run.status << "\n" << run.out;
  EXPECT_THAT(run.out,
              HasSubstr("chunkctl bench: 300000 bytes of random data (seed "
                        "42); backends scalar; strategy auto\n"));
  EXPECT_THAT(run.out,
              HasSubstr("memory read (sum of 64-bit words): 1 thread "));
  EXPECT_THAT(run.out, HasSubstr(", 2 threads "));
  EXPECT_THAT(run.out, HasSubstr("algorithm  backend    threads  strategy"));
  // Per algorithm: the reference and one row per thread count.
  int ok_rows = 0, reference_rows = 0;
  for (size_t pos = 0; (pos = run.out.find("  ok\n", pos)) != std::string::npos;
       ++pos) {
    ++ok_rows;
  }
  for (size_t pos = 0;
       (pos = run.out.find("(the reference)", pos)) != std::string::npos;
       ++pos) {
    ++reference_rows;
  }
  EXPECT_EQ(ok_rows, 4);
  EXPECT_EQ(reference_rows, 2);
  EXPECT_THAT(run.out, HasSubstr("\nfastcdc    scalar           1  "));
  EXPECT_THAT(run.out, HasSubstr("\nseqcdc     scalar           2  "));
}

TEST(BenchConfigTest, AutoIsABackendChoice) {
  absl::StatusOr<BenchConfig> config = Config({"--backend", "auto"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->auto_kernel);
  EXPECT_TRUE(config->kernels.empty());
  config = Config({"--backend", "scalar"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->auto_kernel);
  config = Config({"--backend", "scalar,auto"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->auto_kernel);
  ASSERT_EQ(config->kernels.size(), 1u);
}

// The auto row comes after the explicit ones of its algorithm and names the
// kernel auto chose and its ratio to the fastest explicit row.
TEST(RunBenchTest, AutoRowComparesWithTheFastestExplicitKernel) {
  BenchConfig config;
  config.algorithms = {Algorithm::kCrc32};
  config.kernels = {&chunking::kernels::ScalarKernelSet()};
  config.auto_kernel = true;
  config.threads = {1, 2};
  config.size = 300000;
  config.seconds = 0.001;
  BenchRun run = RunConfig(config);
  ASSERT_TRUE(run.status.ok()) << run.status << "\n" << run.out;
  EXPECT_THAT(run.out, HasSubstr("; backends scalar, auto; "));
  for (const char* threads : {"1", "2"}) {
    const std::string prefix =
        absl::StrCat("\ncrc32      auto             ", threads, "  ");
    const size_t at = run.out.find(prefix);
    ASSERT_NE(at, std::string::npos) << run.out;
    EXPECT_GT(at, run.out.find(absl::StrCat("\ncrc32      scalar           ",
                                            threads, "  ")));
    const std::string row =
        run.out.substr(at + 1, run.out.find('\n', at + 1) - at - 1);
    EXPECT_THAT(row, HasSubstr("  ok; auto = "));
    EXPECT_THAT(row, HasSubstr("x the best (scalar)"));
  }
}

// The chunk count of `algorithm`'s reference row in `out`; -1 if none.
int ReferenceChunkCount(const std::string& out, absl::string_view algorithm) {
  const size_t at = out.find(absl::StrCat("\n", algorithm, " "));
  if (at == std::string::npos) return -1;
  const size_t end = out.find('\n', at + 1);
  const std::vector<std::string> fields =
      absl::StrSplit(out.substr(at + 1, end - at - 1), ' ', absl::SkipEmpty());
  int chunks = -1;
  if (fields.size() < 8 || fields[1] != "reference" ||
      !absl::SimpleAtoi(fields[7], &chunks)) {
    return -1;
  }
  return chunks;
}

// The upstream algorithms at their defaults: every fast path gives the
// reference's chunks, of the sizes their parameters allow.
TEST(RunBenchTest, MeasuresTheUpstreamAlgorithmsAtTheirDefaults) {
  BenchConfig config;
  config.algorithms = {Algorithm::kRepMaxCdc, Algorithm::kRabin,
                       Algorithm::kBuzhash};
  config.kernels = {&chunking::kernels::ScalarKernelSet()};
  config.threads = {1, 3};
  config.size = 24 << 20;  // several chunks even at rabin's 1 MiB average
  config.seconds = 0.001;
  BenchRun run = RunConfig(config);
  ASSERT_TRUE(run.status.ok()) << run.status << "\n" << run.out;
  for (const char* row : {"\nrepmaxcdc  scalar           1  ",
                          "\nrepmaxcdc  scalar           3  ",
                          "\nrabin      scalar           1  ",
                          "\nrabin      scalar           3  ",
                          "\nbuzhash    scalar           1  ",
                          "\nbuzhash    scalar           3  "}) {
    EXPECT_THAT(run.out, HasSubstr(row));
  }
  // repmaxcdc: every chunk but the last in [256 KiB, 512 KiB).
  const int repmaxcdc = ReferenceChunkCount(run.out, "repmaxcdc");
  EXPECT_GE(repmaxcdc, 48) << run.out;
  EXPECT_LE(repmaxcdc, 97) << run.out;
  // rabin: chunks in [512 KiB, 8 MiB]; buzhash: in [16 KiB, 256 KiB].
  const int rabin = ReferenceChunkCount(run.out, "rabin");
  EXPECT_GE(rabin, 3) << run.out;
  EXPECT_LE(rabin, 48) << run.out;
  const int buzhash = ReferenceChunkCount(run.out, "buzhash");
  EXPECT_GE(buzhash, 96) << run.out;
  EXPECT_LE(buzhash, 1536) << run.out;
}

TEST(RunBenchTest, TimesTheBytesOfAnInputFile) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/bench_test_input_", ::getpid());
  const std::vector<uint8_t> bytes = workload::RandomBytes(200000, 7);
  {
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  BenchConfig config;
  config.algorithms = {Algorithm::kFastCdc};
  config.kernels = {&chunking::kernels::ScalarKernelSet()};
  config.threads = {1};
  config.input = path;
  config.seconds = 0.001;
  BenchRun run = RunConfig(config);
  ASSERT_TRUE(run.status.ok()) << run.status << "\n" << run.out;
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat(
                           "chunkctl bench: 200000 bytes of the file ", path,
                           "; backends scalar")));
  // The chunks are those of the file's bytes, not of the generated data's.
  const int want =
      static_cast<int>(chunking::ReferenceChunks(
                           workload::BenchOptions(Algorithm::kFastCdc), bytes)
                           .size());
  EXPECT_EQ(ReferenceChunkCount(run.out, "fastcdc"), want) << run.out;

  std::ofstream(path, std::ios::binary | std::ios::trunc).close();
  run = RunConfig(config);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status.message(), HasSubstr("is empty"));
  std::remove(path.c_str());

  run = RunConfig(config);
  EXPECT_FALSE(run.status.ok());
  EXPECT_THAT(run.status.message(), HasSubstr(path));
}

// --preset: the rows use the preset's parameters, not the benchmark's.
TEST(RunBenchTest, MeasuresAPresetWithItsParameters) {
  constexpr size_t kSize = 6 << 20;  // a dozen REAPI chunks
  absl::StatusOr<BenchConfig> config =
      Config({"--preset", "fastcdc-reapi", "--backend", "scalar", "--threads",
              "1,2", "--size", absl::StrCat(kSize), "--seconds", "0.001"});
  ASSERT_TRUE(config.ok()) << config.status();
  BenchRun run = RunConfig(*config);
  ASSERT_TRUE(run.status.ok()) << run.status << "\n" << run.out;
  EXPECT_THAT(run.out, HasSubstr("; strategy auto; preset fastcdc-reapi\n"));
  const std::vector<uint8_t> data =
      workload::MakeDataset(workload::Dataset::kRandom, kSize);
  const size_t reapi =
      chunking::ReferenceChunks(*config->preset_options, data).size();
  const size_t bench = chunking::ReferenceChunks(
                           workload::BenchOptions(Algorithm::kFastCdc), data)
                           .size();
  ASSERT_NE(reapi, bench);  // else the check below would tell nothing
  EXPECT_EQ(ReferenceChunkCount(run.out, "fastcdc"), static_cast<int>(reapi))
      << run.out;
  EXPECT_THAT(run.out, HasSubstr("\nfastcdc    scalar           2  "));
  EXPECT_THAT(run.out, Not(HasSubstr("\ncrc32 ")));
}

// A kernel that finds no candidates anywhere: fast, and wrong.
void NoFastCdc(const uint8_t*, size_t begin, size_t end,
               const chunking::kernels::GearParams&, uint64_t* s, uint64_t* l) {
  std::memset(s, 0, BitmapWords(end - begin) * sizeof(uint64_t));
  std::memset(l, 0, BitmapWords(end - begin) * sizeof(uint64_t));
}
void NoCrc32(const uint8_t*, size_t begin, size_t end, uint32_t,
             uint64_t* hits) {
  std::memset(hits, 0, BitmapWords(end - begin) * sizeof(uint64_t));
}
void NoSeqCdc(const uint8_t*, size_t begin, size_t end, uint64_t* gt,
              uint64_t* lt) {
  std::memset(gt, 0, BitmapWords(end - begin) * sizeof(uint64_t));
  std::memset(lt, 0, BitmapWords(end - begin) * sizeof(uint64_t));
}
void NoRabin(const uint8_t*, size_t begin, size_t end,
             const chunking::kernels::RabinParams&, uint64_t* hits) {
  std::memset(hits, 0, BitmapWords(end - begin) * sizeof(uint64_t));
}
void NoBuzhash(const uint8_t*, size_t begin, size_t end,
               const chunking::kernels::BuzhashParams&, uint64_t* hits) {
  std::memset(hits, 0, BitmapWords(end - begin) * sizeof(uint64_t));
}
void NoRepMaxCdc(const uint8_t*, size_t begin, size_t end, const uint64_t*,
                 uint64_t* max) {
  std::memset(max, 0, BitmapWords(end - begin) * sizeof(uint64_t));
}
bool Yes() { return true; }
const KernelSet kBroken = {"broken",  &Yes,     &NoFastCdc, &NoCrc32,
                        &NoSeqCdc, &NoRabin, &NoBuzhash, &NoRepMaxCdc};

TEST(RunBenchTest, AWrongKernelFails) {
  for (chunking::Strategy strategy :
       {chunking::Strategy::kTwoStage, chunking::Strategy::kSequentialScan}) {
    BenchConfig config;
    config.algorithms = {Algorithm::kFastCdc, Algorithm::kCrc32};
    config.kernels = {&kBroken};
    config.threads = {1};
    config.strategy = strategy;
    config.size = 500000;
    config.seconds = 0.001;
    BenchRun run = RunConfig(config);
    EXPECT_EQ(run.status.code(), absl::StatusCode::kInternal) << run.out;
    EXPECT_THAT(run.status.message(),
                HasSubstr("chunks differ from the reference: fastcdc broken "
                          "1 thread: chunk "));
    EXPECT_THAT(run.status.message(), HasSubstr("; crc32 broken 1 thread: "));
    EXPECT_THAT(run.out, HasSubstr("  MISMATCH: chunk 0 of "));
  }
}

TEST(RunBenchTest, AWrongKernelFailsTheUpstreamAlgorithms) {
  BenchConfig config;
  config.algorithms = {Algorithm::kRabin, Algorithm::kBuzhash};
  config.kernels = {&kBroken};
  config.threads = {1};
  config.strategy = chunking::Strategy::kTwoStage;
  // Past rabin's 8 MiB maximum: without candidates it cuts there, where the
  // reference has cut several times.
  config.size = 12 << 20;
  config.seconds = 0.001;
  BenchRun run = RunConfig(config);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInternal) << run.out;
  EXPECT_THAT(run.status.message(),
              HasSubstr("chunks differ from the reference: rabin broken 1 "
                        "thread: "));
  EXPECT_THAT(std::string(run.status.message()),
              HasSubstr("; buzhash broken 1 thread: "));
}

}  // namespace
}  // namespace chunkd::cli
