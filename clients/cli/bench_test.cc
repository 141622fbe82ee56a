#include "clients/cli/bench.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "chunkd/chunker.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using chunking::Algorithm;
using chunking::kernels::BitmapWords;
using chunking::kernels::Kernel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<BenchConfig> Config(const std::vector<std::string>& words) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, BenchFlagSpecs());
  if (!args.ok()) return args.status();
  return BenchConfigFromArgs(*args);
}

std::string ReadAll(std::FILE* file) {
  std::rewind(file);
  std::string contents;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    contents.append(buffer, n);
  }
  return contents;
}

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
  for (const Kernel* k : chunking::kernels::AllKernels()) {
    supported += k->supported() ? 1 : 0;
  }
  EXPECT_EQ(config->kernels.size(), supported);
  EXPECT_EQ(config->kernels.size() + config->skipped.size(),
            chunking::kernels::AllKernels().size());
  ASSERT_FALSE(config->threads.empty());
  EXPECT_EQ(config->threads[0], 1u);
  EXPECT_EQ(config->strategy, chunking::Strategy::kAuto);
  EXPECT_EQ(config->dataset, workload::Dataset::kRandom);
  EXPECT_EQ(config->size, size_t{64} << 20);
  EXPECT_EQ(config->seconds, 1.0);
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

TEST(BenchConfigTest, RejectsBadValuesNamingTheFlag) {
  struct Case {
    std::vector<std::string> words;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--algorithm", "rabin"}, "--algorithm: "},
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
  config.kernels = {&chunking::kernels::ScalarKernel()};
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
bool Yes() { return true; }
const Kernel kBroken = {"broken", &Yes, &NoFastCdc, &NoCrc32, &NoSeqCdc};

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

}  // namespace
}  // namespace chunkd::cli
