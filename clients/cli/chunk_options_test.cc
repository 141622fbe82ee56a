#include "clients/cli/chunk_options.h"

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
           {{"--algorithm", "rabin"}, "--algorithm"},
           {{"--fingerprint", "md5"}, "--fingerprint"},
           {{"--min", "x"}, "--min: expected an integer"},
           {{"--max", "4294967296"}, "--max: expected an integer"},
           {{"--seq-mode", "up"}, "--seq-mode"},
           {{"--preset", "nope"}, "--preset"},
           {{"--preset", "fastcdc-reapi", "--algorithm", "crc32"},
            "is a fastcdc preset, but --algorithm is crc32"},
           {{"--algorithm", "crc32", "--level", "2"},
            "--level applies only to fastcdc, not crc32"},
           {{"--preset", "seqcdc-8k", "--seed", "1"},
            "--seed applies only to fastcdc, not seqcdc"},
           {{"--seq-length", "5"},
            "--seq-length applies only to seqcdc, not fastcdc"},
           {{"--algorithm", "fixed", "--skip-size", "5"},
            "--skip-size applies only to seqcdc, not fixed"},
           {{"--algorithm", "fixed", "--min", "4096"},
            "--min does not apply to fixed: every chunk is --avg bytes"},
           {{"--algorithm", "fixed", "--max", "4096"},
            "--max does not apply to fixed"},
       }) {
    absl::StatusOr<ChunkFlags> flags = FromWords(c.words);
    ASSERT_FALSE(flags.ok()) << c.words[0];
    EXPECT_THAT(std::string(flags.status().message()), HasSubstr(c.message));
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
