#include "clients/cli/chunk_options.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ChunkFlags> FromWords(const std::vector<std::string>& words) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, ChunkFlagSpecs());
  if (!args.ok()) return args.status();
  return ChunkFlagsFromArgs(*args);
}

void ExpectSameOptions(const chunking::ChunkerOptions& a,
                       const chunking::ChunkerOptions& b) {
  EXPECT_EQ(a.algorithm, b.algorithm);
  EXPECT_EQ(a.min_size, b.min_size);
  EXPECT_EQ(a.avg_size, b.avg_size);
  EXPECT_EQ(a.max_size, b.max_size);
  EXPECT_EQ(a.normalization_level, b.normalization_level);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.seq_mode, b.seq_mode);
  EXPECT_EQ(a.seq_length, b.seq_length);
  EXPECT_EQ(a.skip_trigger, b.skip_trigger);
  EXPECT_EQ(a.skip_size, b.skip_size);
}

TEST(ChunkOptionsTest, NothingGivenLeavesTheRequestEmpty) {
  absl::StatusOr<ChunkFlags> flags = FromWords({});
  ASSERT_TRUE(flags.ok()) << flags.status();
  chunkd::v1::ChunkingParams params;
  ToProto(*flags, &params);
  // Unset means "the server's default": nothing may be sent.
  EXPECT_EQ(params.ByteSizeLong(), 0u) << params.DebugString();
  EXPECT_EQ(ToProtoFingerprint(*flags),
            chunkd::v1::FINGERPRINT_ALGORITHM_UNSPECIFIED);
  EXPECT_EQ(EffectiveFingerprint(*flags), fingerprint::Kind::kSha256);
  ExpectSameOptions(ToChunkerOptions(*flags),
                    chunking::DefaultOptions(chunking::Algorithm::kFastCdc));
  EXPECT_TRUE(Validate(*flags).ok());
}

TEST(ChunkOptionsTest, UnsetFieldsTakeTheAlgorithmsDefaults) {
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    absl::StatusOr<ChunkFlags> flags = FromWords(
        {"--algorithm", std::string(chunking::AlgorithmName(algorithm))});
    ASSERT_TRUE(flags.ok()) << flags.status();
    ExpectSameOptions(ToChunkerOptions(*flags),
                      chunking::DefaultOptions(algorithm));
    chunkd::v1::ChunkingParams params;
    ToProto(*flags, &params);
    EXPECT_EQ(static_cast<int>(params.algorithm()),
              static_cast<int>(algorithm));
    EXPECT_FALSE(params.has_min_size());
    EXPECT_FALSE(params.has_avg_size());
    EXPECT_FALSE(params.has_max_size());
    EXPECT_FALSE(params.has_normalization_level());
    EXPECT_FALSE(params.has_seq_length());
  }
}

TEST(ChunkOptionsTest, GivenFieldsAreSetInBoth) {
  absl::StatusOr<ChunkFlags> flags =
      FromWords({"--min", "4096", "--avg", "16384", "--max", "65535", "--level",
                 "2", "--seed", "666", "--fingerprint", "xxh128"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  chunkd::v1::ChunkingParams params;
  ToProto(*flags, &params);
  EXPECT_EQ(params.algorithm(), chunkd::v1::ALGORITHM_UNSPECIFIED);
  EXPECT_EQ(params.min_size(), 4096u);
  EXPECT_EQ(params.avg_size(), 16384u);
  EXPECT_EQ(params.max_size(), 65535u);
  EXPECT_TRUE(params.has_normalization_level());
  EXPECT_EQ(params.normalization_level(), 2u);
  EXPECT_EQ(params.seed(), 666u);
  EXPECT_EQ(ToProtoFingerprint(*flags),
            chunkd::v1::FINGERPRINT_ALGORITHM_XXH128);
  chunking::ChunkerOptions options = ToChunkerOptions(*flags);
  EXPECT_EQ(options.min_size, 4096u);
  EXPECT_EQ(options.avg_size, 16384u);
  EXPECT_EQ(options.max_size, 65535u);
  EXPECT_EQ(options.normalization_level, 2u);
  EXPECT_EQ(options.seed, 666u);
}

TEST(ChunkOptionsTest, SeqCdcFields) {
  absl::StatusOr<ChunkFlags> flags = FromWords(
      {"--algorithm", "seqcdc", "--seq-mode", "decreasing", "--seq-length", "7",
       "--skip-trigger", "40", "--skip-size", "256"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  chunkd::v1::ChunkingParams params;
  ToProto(*flags, &params);
  EXPECT_EQ(params.algorithm(), chunkd::v1::ALGORITHM_SEQCDC);
  EXPECT_EQ(params.seq_mode(), chunkd::v1::SEQ_CDC_MODE_DECREASING);
  EXPECT_EQ(params.seq_length(), 7u);
  EXPECT_EQ(params.skip_trigger(), 40u);
  EXPECT_EQ(params.skip_size(), 256u);
  EXPECT_FALSE(params.has_min_size());
  chunking::ChunkerOptions options = ToChunkerOptions(*flags);
  EXPECT_EQ(options.seq_mode, chunking::SeqMode::kDecreasing);
  EXPECT_EQ(options.seq_length, 7u);
  EXPECT_EQ(options.skip_trigger, 40u);
  EXPECT_EQ(options.skip_size, 256u);
}

TEST(ChunkOptionsTest, PresetIsSentInFullAndFlagsOverrideIt) {
  absl::StatusOr<chunking::ChunkerOptions> reapi =
      chunking::Preset("fastcdc-reapi");
  ASSERT_TRUE(reapi.ok()) << reapi.status();
  absl::StatusOr<ChunkFlags> flags =
      FromWords({"--preset", "fastcdc-reapi", "--max", "1000000"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  chunking::ChunkerOptions expected = *reapi;
  expected.max_size = 1000000;
  ExpectSameOptions(ToChunkerOptions(*flags), expected);
  chunkd::v1::ChunkingParams params;
  ToProto(*flags, &params);
  EXPECT_EQ(params.algorithm(), chunkd::v1::ALGORITHM_FASTCDC);
  EXPECT_EQ(params.min_size(), reapi->min_size);
  EXPECT_EQ(params.avg_size(), reapi->avg_size);
  EXPECT_EQ(params.max_size(), 1000000u);
  EXPECT_TRUE(params.has_normalization_level());
  EXPECT_EQ(params.normalization_level(), reapi->normalization_level);
}

TEST(ChunkOptionsTest, SeqCdcPresetSetsItsFields) {
  absl::StatusOr<chunking::ChunkerOptions> preset =
      chunking::Preset("seqcdc-16k");
  ASSERT_TRUE(preset.ok()) << preset.status();
  absl::StatusOr<ChunkFlags> flags =
      FromWords({"--preset", "seqcdc-16k", "--algorithm", "seqcdc"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  ExpectSameOptions(ToChunkerOptions(*flags), *preset);
  chunkd::v1::ChunkingParams params;
  ToProto(*flags, &params);
  EXPECT_EQ(params.algorithm(), chunkd::v1::ALGORITHM_SEQCDC);
  EXPECT_TRUE(params.has_seq_length());
  EXPECT_TRUE(params.has_skip_trigger());
  EXPECT_TRUE(params.has_skip_size());
  EXPECT_FALSE(params.has_normalization_level());
}

TEST(ChunkOptionsTest, RejectsBadAndMisappliedFlags) {
  struct Case {
    std::vector<std::string> words;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--algorithm", "gear"}, "--algorithm"},
           {{"--algorithm", "rabin", "--polynomial", "0xZZ"},
            "--polynomial: expected an integer"},
           {{"--algorithm", "repmaxcdc", "--horizon", "-1"},
            "--horizon: expected an integer"},
           {{"--algorithm", "rabin", "--horizon", "5"},
            "--horizon does not apply to rabin; rabin takes --min, --avg, "
            "--max and --polynomial"},
           {{"--algorithm", "repmaxcdc", "--avg", "4096"},
            "--avg does not apply to repmaxcdc; repmaxcdc takes --min and "
            "--horizon"},
           {{"--fingerprint", "md5"}, "--fingerprint"},
           {{"--min", "x"}, "--min: expected an integer"},
           {{"--max", "4294967296"}, "--max: expected an integer"},
           {{"--seq-mode", "up"}, "--seq-mode"},
           {{"--preset", "nope"}, "--preset"},
           {{"--preset", "fastcdc-reapi", "--algorithm", "crc32"},
            "is a fastcdc preset, but --algorithm is crc32"},
           {{"--algorithm", "crc32", "--level", "2"},
            "--level does not apply to crc32; crc32 takes --min, --avg and "
            "--max"},
           {{"--level", "2", "--algorithm", "crc32"},
            "--level does not apply to crc32;"},
           {{"--preset", "seqcdc-8k", "--seed", "1"},
            "--seed does not apply to seqcdc (the algorithm of --preset "
            "seqcdc-8k); seqcdc takes --min, --max, --seq-mode, --seq-length, "
            "--skip-trigger and --skip-size"},
           {{"--seq-length", "5"},
            "--seq-length does not apply to fastcdc (the default "
            "--algorithm); fastcdc takes --min, --avg, --max, --level and "
            "--seed"},
           {{"--algorithm", "fixed", "--skip-size", "5"},
            "--skip-size does not apply to fixed; fixed takes only --avg"},
           {{"--algorithm", "fixed", "--min", "8192"},
            "--min does not apply to fixed; fixed takes only --avg"},
           {{"--algorithm", "fixed", "--max", "4096"},
            "--max does not apply to fixed;"},
           {{"--algorithm", "seqcdc", "--avg", "8192"},
            "--avg does not apply to seqcdc; seqcdc takes --min, --max, "},
           {{"--preset", "seqcdc-16k", "--avg", "16384"},
            "--avg does not apply to seqcdc (the algorithm of --preset "
            "seqcdc-16k);"},
           {{"--preset", "seqcdc-8k", "--algorithm", "seqcdc", "--avg", "1"},
            "--avg does not apply to seqcdc; seqcdc takes"},
       }) {
    absl::StatusOr<ChunkFlags> flags = FromWords(c.words);
    ASSERT_FALSE(flags.ok()) << c.words[0];
    EXPECT_THAT(std::string(flags.status().message()), HasSubstr(c.message));
  }
}

// The fields each algorithm reads, as the server enforces them: any other
// field in a request is INVALID_ARGUMENT.
const std::vector<std::pair<std::string, std::vector<std::string>>>&
FlagsTaken() {
  static const auto* const table =
      new std::vector<std::pair<std::string, std::vector<std::string>>>{
          {"fastcdc", {"min", "avg", "max", "level", "seed"}},
          {"crc32", {"min", "avg", "max"}},
          {"seqcdc",
           {"min", "max", "seq-mode", "seq-length", "skip-trigger",
            "skip-size"}},
          {"fixed", {"avg"}},
      };
  return *table;
}

// The field ToProto sets for each chunking flag.
bool HasField(const chunkd::v1::ChunkingParams& p, const std::string& flag) {
  if (flag == "min") return p.has_min_size();
  if (flag == "avg") return p.has_avg_size();
  if (flag == "max") return p.has_max_size();
  if (flag == "level") return p.has_normalization_level();
  if (flag == "seed") return p.seed() != 0;
  if (flag == "seq-mode") {
    return p.seq_mode() != chunkd::v1::SEQ_CDC_MODE_UNSPECIFIED;
  }
  if (flag == "seq-length") return p.has_seq_length();
  if (flag == "skip-trigger") return p.has_skip_trigger();
  if (flag == "skip-size") return p.has_skip_size();
  if (flag == "horizon") return p.has_horizon_size();
  if (flag == "polynomial") return p.has_polynomial();
  ADD_FAILURE() << "unknown flag " << flag;
  return false;
}

const std::vector<std::string> kChunkingFlags = {
    "min",        "avg",          "max",       "level",   "seed",
    "seq-mode",   "seq-length",   "skip-trigger", "skip-size", "horizon",
    "polynomial"};

TEST(ChunkOptionsTest, HorizonAndPolynomialReachBothDestinations) {
  absl::StatusOr<ChunkFlags> flags = FromWords(
      {"--algorithm", "rabin", "--min", "4096", "--polynomial", "0x3DA3358B4DC173"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(ToChunkerOptions(*flags).polynomial, uint64_t{0x3DA3358B4DC173});
  chunkd::v1::ChunkingParams params;
  ToProto(*flags, &params);
  EXPECT_EQ(params.algorithm(), chunkd::v1::ALGORITHM_RABIN);
  EXPECT_EQ(params.polynomial(), uint64_t{0x3DA3358B4DC173});
  EXPECT_FALSE(params.has_horizon_size());

  flags = FromWords({"--algorithm", "repmaxcdc", "--horizon", "0"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(ToChunkerOptions(*flags).horizon_size, 0u);
  params.Clear();
  ToProto(*flags, &params);
  EXPECT_EQ(params.algorithm(), chunkd::v1::ALGORITHM_REP_MAX_CDC);
  ASSERT_TRUE(params.has_horizon_size());  // 0 is a value, not "unset"
  EXPECT_EQ(params.horizon_size(), 0u);
  EXPECT_FALSE(params.has_polynomial());
}

TEST(ChunkOptionsTest, EachAlgorithmTakesExactlyTheFieldsItReads) {
  for (const auto& [algorithm, taken] : FlagsTaken()) {
    for (const std::string& flag : kChunkingFlags) {
      const bool takes =
          std::find(taken.begin(), taken.end(), flag) != taken.end();
      const std::string value = flag == "seq-mode" ? "decreasing" : "7";
      absl::StatusOr<ChunkFlags> flags =
          FromWords({"--algorithm", algorithm, "--" + flag, value});
      if (!takes) {
        EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument)
            << algorithm << " --" << flag;
        EXPECT_THAT(std::string(flags.status().message()),
                    HasSubstr("--" + flag + " does not apply to " + algorithm))
            << algorithm << " --" << flag;
        continue;
      }
      ASSERT_TRUE(flags.ok()) << algorithm << " --" << flag << ": "
                              << flags.status();
      EXPECT_TRUE(AlgorithmTakesFlag(EffectiveAlgorithm(*flags), flag));
      chunkd::v1::ChunkingParams params;
      ToProto(*flags, &params);
      for (const std::string& other : kChunkingFlags) {
        EXPECT_EQ(HasField(params, other), other == flag)
            << algorithm << " --" << flag << ": " << params.DebugString();
      }
    }
  }
}

TEST(ChunkOptionsTest, RequestNeverCarriesAFieldTheAlgorithmDoesNotRead) {
  // Every field set, as no command line can: ToProto still sends only the
  // algorithm's own.
  for (const auto& [name, taken] : FlagsTaken()) {
    ChunkFlags flags;
    flags.algorithm = *chunking::ParseAlgorithm(name);
    flags.min_size = 4096;
    flags.avg_size = 8192;
    flags.max_size = 65536;
    flags.normalization_level = 2;
    flags.seed = 9;
    flags.seq_mode = chunking::SeqMode::kDecreasing;
    flags.seq_length = 4;
    flags.skip_trigger = 40;
    flags.skip_size = 256;
    chunkd::v1::ChunkingParams params;
    ToProto(flags, &params);
    for (const std::string& flag : kChunkingFlags) {
      EXPECT_EQ(HasField(params, flag),
                std::find(taken.begin(), taken.end(), flag) != taken.end())
          << name << " --" << flag;
    }
  }
}

TEST(ChunkOptionsTest, PresetsSendOnlyTheirAlgorithmsFieldsAndKeepLocal) {
  for (const char* name : {"fastcdc-reapi", "seqcdc-8k", "seqcdc-16k"}) {
    absl::StatusOr<chunking::ChunkerOptions> preset = chunking::Preset(name);
    ASSERT_TRUE(preset.ok()) << preset.status();
    absl::StatusOr<ChunkFlags> flags = FromWords({"--preset", name});
    ASSERT_TRUE(flags.ok()) << name << ": " << flags.status();
    // --local chunks with all of the preset's options, as before.
    ExpectSameOptions(ToChunkerOptions(*flags), *preset);
    EXPECT_TRUE(Validate(*flags).ok()) << name;
    chunkd::v1::ChunkingParams params;
    ToProto(*flags, &params);
    const std::string algorithm(chunking::AlgorithmName(preset->algorithm));
    for (const auto& [each, taken] : FlagsTaken()) {
      if (each != algorithm) continue;
      for (const std::string& flag : kChunkingFlags) {
        const bool takes =
            std::find(taken.begin(), taken.end(), flag) != taken.end();
        // A preset sends every field its algorithm reads (seed 0 is the
        // proto's unset) and none other.
        if (flag == "seed" && preset->seed == 0) continue;
        EXPECT_EQ(HasField(params, flag), takes) << name << " --" << flag;
      }
    }
  }
  // seqcdc-8k's average (8 KiB) is not the default's (16 KiB): kept for
  // --local, never sent.
  absl::StatusOr<ChunkFlags> flags = FromWords({"--preset", "seqcdc-8k"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(ToChunkerOptions(*flags).avg_size, 8192u);
  chunkd::v1::ChunkingParams params;
  ToProto(*flags, &params);
  EXPECT_FALSE(params.has_avg_size());
  EXPECT_EQ(params.min_size(), ToChunkerOptions(*flags).min_size);
}

TEST(ChunkOptionsTest, HelpListsTheFlagsEachAlgorithmTakes) {
  const std::string help(ChunkFlagsHelp());
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const std::string name(chunking::AlgorithmName(algorithm));
    std::string line = "\n  " + name + std::string(11 - name.size(), ' ');
    for (const std::string& flag : kChunkingFlags) {
      if (AlgorithmTakesFlag(algorithm, flag)) line += "--" + flag + " ";
    }
    line.back() = '\n';
    EXPECT_THAT(help, HasSubstr(line));
  }
}

TEST(ChunkOptionsTest, ValidateUsesTheLibrary) {
  absl::StatusOr<ChunkFlags> flags = FromWords({"--min", "70000"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  absl::Status status = Validate(*flags);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("min_size"));
}


TEST(ChunkOptionsTest, HintsNamesAreTheProtoNames) {
  EXPECT_EQ(HintsName(chunkd::v1::HINT_TEST_FF_RWT_FPT), "ff_rwt_fpt");
  for (const auto& [name, test] :
       std::vector<std::pair<std::string, chunkd::v1::HintTest>>{
           {"off", chunkd::v1::HINT_TEST_OFF},
           {"ff", chunkd::v1::HINT_TEST_FF},
           {"ff_mt", chunkd::v1::HINT_TEST_FF_MT},
           {"FF_RWT", chunkd::v1::HINT_TEST_FF_RWT},
           {"ff_rwt_fpt", chunkd::v1::HINT_TEST_FF_RWT_FPT}}) {
    absl::StatusOr<chunkd::v1::HintTest> parsed = ParseHints(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    EXPECT_EQ(*parsed, test) << name;
  }
  for (const char* bad : {"", "unspecified", "ff-rwt", "rwt"}) {
    absl::StatusOr<chunkd::v1::HintTest> parsed = ParseHints(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(std::string(parsed.status().message()),
                HasSubstr("off, ff, ff_mt"));
  }
}

}  // namespace
}  // namespace chunkd::cli
