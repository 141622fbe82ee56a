#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chunkd/chunker.h"
#include "chunking/limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using ::testing::HasSubstr;

TEST(AlgorithmNameTest, RoundTripsEveryAlgorithm) {
  EXPECT_EQ(AllAlgorithms(),
            (std::vector<Algorithm>{Algorithm::kFastCdc, Algorithm::kCrc32,
                                    Algorithm::kSeqCdc, Algorithm::kFixed,
                                    Algorithm::kRepMaxCdc, Algorithm::kRabin,
                                    Algorithm::kBuzhash}));
  EXPECT_EQ(AlgorithmName(Algorithm::kFastCdc), "fastcdc");
  EXPECT_EQ(AlgorithmName(Algorithm::kCrc32), "crc32");
  EXPECT_EQ(AlgorithmName(Algorithm::kSeqCdc), "seqcdc");
  EXPECT_EQ(AlgorithmName(Algorithm::kFixed), "fixed");
  EXPECT_EQ(AlgorithmName(Algorithm::kRepMaxCdc), "repmaxcdc");
  EXPECT_EQ(AlgorithmName(Algorithm::kRabin), "rabin");
  EXPECT_EQ(AlgorithmName(Algorithm::kBuzhash), "buzhash");
  for (Algorithm algorithm : AllAlgorithms()) {
    absl::StatusOr<Algorithm> parsed = ParseAlgorithm(AlgorithmName(algorithm));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, algorithm);
  }
}

TEST(AlgorithmNameTest, UnknownNameIsInvalidArgumentListingNames) {
  absl::StatusOr<Algorithm> parsed = ParseAlgorithm("FastCDC");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(),
            "unknown algorithm \"FastCDC\"; expected one of fastcdc, crc32, "
            "seqcdc, fixed, repmaxcdc, rabin, buzhash");
  EXPECT_EQ(AlgorithmName(static_cast<Algorithm>(99)), "unknown");
}

TEST(LimitsTest, FastCdcBoundsAreTheCrates) {
  const AlgorithmLimits& limits = LimitsFor(Algorithm::kFastCdc);
  EXPECT_EQ(limits.min_size.min, 64u);
  EXPECT_EQ(limits.min_size.max, 1048576u);
  EXPECT_EQ(limits.avg_size.min, 256u);
  EXPECT_EQ(limits.avg_size.max, 4194304u);
  EXPECT_EQ(limits.max_size.min, 1024u);
  EXPECT_EQ(limits.max_size.max, 16777216u);
  EXPECT_FALSE(limits.avg_power_of_two);
  EXPECT_EQ(limits.normalization_level.min, 0u);
  EXPECT_EQ(limits.normalization_level.max, 3u);
  EXPECT_EQ(limits.normalization_level.default_value, 1u);
}

TEST(LimitsTest, PerAlgorithmFieldsAreZeroElsewhere) {
  EXPECT_TRUE(LimitsFor(Algorithm::kCrc32).avg_power_of_two);
  EXPECT_EQ(LimitsFor(Algorithm::kCrc32).normalization_level.max, 0u);
  EXPECT_EQ(LimitsFor(Algorithm::kCrc32).seq_length.max, 0u);
  EXPECT_EQ(LimitsFor(Algorithm::kFastCdc).skip_size.max, 0u);
  EXPECT_EQ(LimitsFor(Algorithm::kSeqCdc).seq_length.max, 255u);
  EXPECT_EQ(LimitsFor(Algorithm::kSeqCdc).skip_trigger.max, 65535u);
  // fixed reports min = avg = max.
  const AlgorithmLimits& fixed = LimitsFor(Algorithm::kFixed);
  EXPECT_EQ(fixed.min_size.default_value, fixed.avg_size.default_value);
  EXPECT_EQ(fixed.max_size.default_value, fixed.avg_size.default_value);
  EXPECT_EQ(LimitsFor(static_cast<Algorithm>(0)).max_size.max, 0u);
}

TEST(DefaultOptionsTest, MatchDesign) {
  ChunkerOptions fastcdc = DefaultOptions(Algorithm::kFastCdc);
  EXPECT_EQ(fastcdc.min_size, 4096u);
  EXPECT_EQ(fastcdc.avg_size, 16384u);
  EXPECT_EQ(fastcdc.max_size, 65536u);
  EXPECT_EQ(fastcdc.normalization_level, 1u);
  EXPECT_EQ(fastcdc.seed, 0u);

  ChunkerOptions crc32 = DefaultOptions(Algorithm::kCrc32);
  EXPECT_EQ(crc32.algorithm, Algorithm::kCrc32);
  EXPECT_EQ(crc32.min_size, 2048u);
  EXPECT_EQ(crc32.avg_size, 16384u);
  EXPECT_EQ(crc32.max_size, 65536u);

  ChunkerOptions seqcdc = DefaultOptions(Algorithm::kSeqCdc);
  EXPECT_EQ(seqcdc.seq_mode, SeqMode::kIncreasing);
  EXPECT_EQ(seqcdc.min_size, 8192u);
  EXPECT_EQ(seqcdc.avg_size, 16384u);
  EXPECT_EQ(seqcdc.max_size, 32768u);
  EXPECT_EQ(seqcdc.seq_length, 5u);
  EXPECT_EQ(seqcdc.skip_trigger, 50u);
  EXPECT_EQ(seqcdc.skip_size, 512u);

  ChunkerOptions fixed = DefaultOptions(Algorithm::kFixed);
  EXPECT_EQ(fixed.avg_size, 16384u);
  EXPECT_EQ(fixed.min_size, 16384u);
  EXPECT_EQ(fixed.max_size, 16384u);

  for (Algorithm algorithm : AllAlgorithms()) {
    EXPECT_TRUE(ValidateOptions(DefaultOptions(algorithm)).ok())
        << AlgorithmName(algorithm);
  }
}

TEST(PresetTest, SeqCdcProfilesAreTheAuthors) {
  absl::StatusOr<ChunkerOptions> p16 = Preset("seqcdc-16k");
  ASSERT_TRUE(p16.ok()) << p16.status();
  EXPECT_EQ(p16->algorithm, Algorithm::kSeqCdc);
  EXPECT_EQ(p16->seq_mode, SeqMode::kIncreasing);
  EXPECT_EQ(p16->seq_length, 5u);
  EXPECT_EQ(p16->skip_trigger, 50u);
  EXPECT_EQ(p16->skip_size, 512u);
  EXPECT_EQ(p16->min_size, 8192u);
  EXPECT_EQ(p16->avg_size, 16384u);
  EXPECT_EQ(p16->max_size, 32768u);

  absl::StatusOr<ChunkerOptions> p8 = Preset("seqcdc-8k");
  ASSERT_TRUE(p8.ok()) << p8.status();
  EXPECT_EQ(p8->algorithm, Algorithm::kSeqCdc);
  EXPECT_EQ(p8->seq_mode, SeqMode::kIncreasing);
  EXPECT_EQ(p8->seq_length, 5u);
  EXPECT_EQ(p8->skip_trigger, 50u);
  EXPECT_EQ(p8->skip_size, 256u);
  EXPECT_EQ(p8->min_size, 4096u);
  EXPECT_EQ(p8->avg_size, 8192u);
  EXPECT_EQ(p8->max_size, 16384u);
  EXPECT_TRUE(ValidateOptions(*p8).ok());
  EXPECT_TRUE(ValidateOptions(*p16).ok());
}

TEST(PresetTest, FastCdcReapiIsRemoteApisDefault) {
  absl::StatusOr<ChunkerOptions> reapi = Preset("fastcdc-reapi");
  ASSERT_TRUE(reapi.ok()) << reapi.status();
  EXPECT_EQ(reapi->algorithm, Algorithm::kFastCdc);
  EXPECT_EQ(reapi->avg_size, 512u * 1024);
  EXPECT_EQ(reapi->min_size, reapi->avg_size / 4);
  EXPECT_EQ(reapi->max_size, reapi->avg_size * 4);
  EXPECT_EQ(reapi->normalization_level, 2u);
  EXPECT_EQ(reapi->seed, 0u);
  EXPECT_TRUE(ValidateOptions(*reapi).ok());
}

TEST(PresetTest, UnknownIsNotFound) {
  absl::StatusOr<ChunkerOptions> preset = Preset("seqcdc-4k");
  EXPECT_EQ(preset.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(preset.status().message(),
            "unknown preset \"seqcdc-4k\"; expected one of fastcdc-reapi, "
            "seqcdc-8k, seqcdc-16k");
}

struct InvalidCase {
  std::string name;
  Algorithm algorithm;
  std::function<void(ChunkerOptions*)> mutate;
  std::string message;
};

class ValidateOptionsErrorTest : public ::testing::TestWithParam<InvalidCase> {
};

TEST_P(ValidateOptionsErrorTest, NamesFieldValueAndRange) {
  const InvalidCase& c = GetParam();
  ChunkerOptions options = DefaultOptions(c.algorithm);
  c.mutate(&options);
  absl::Status status = ValidateOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), c.message);
  // The same check guards every entry point.
  absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
      StreamChunker::Create(options);
  EXPECT_EQ(chunker.status(), status);
  const std::vector<uint8_t> data(100000, 7);
  EXPECT_TRUE(ReferenceChunks(options, data).empty());
}

INSTANTIATE_TEST_SUITE_P(
    All, ValidateOptionsErrorTest,
    ::testing::ValuesIn(std::vector<InvalidCase>{
        {"FastCdcMinTooSmall", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->min_size = 10; },
         "min_size 10 is out of range [64, 1048576]"},
        {"FastCdcMinBelowBound", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->min_size = kFastCdcMinSizeLowerBound - 1; },
         "min_size 63 is out of range [64, 1048576]"},
        {"FastCdcMinTooLarge", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->min_size = 1048577; },
         "min_size 1048577 is out of range [64, 1048576]"},
        {"FastCdcAvgTooSmall", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->avg_size = 255; },
         "avg_size 255 is out of range [256, 4194304]"},
        {"FastCdcAvgTooLarge", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->avg_size = 4194305; },
         "avg_size 4194305 is out of range [256, 4194304]"},
        {"FastCdcMaxTooSmall", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->max_size = 1023; },
         "max_size 1023 is out of range [1024, 16777216]"},
        {"FastCdcMaxTooLarge", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->max_size = 16777217; },
         "max_size 16777217 is out of range [1024, 16777216]"},
        {"FastCdcMinAboveAvg", Algorithm::kFastCdc,
         [](ChunkerOptions* o) {
           o->min_size = 9000;
           o->avg_size = 8192;
         },
         "min_size 9000 must not exceed avg_size 8192"},
        {"FastCdcAvgAboveMax", Algorithm::kFastCdc,
         [](ChunkerOptions* o) {
           o->avg_size = 65536;
           o->max_size = 32768;
         },
         "avg_size 65536 must not exceed max_size 32768"},
        {"FastCdcLevel", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->normalization_level = 4; },
         "normalization_level 4 is out of range [0, 3]"},
        {"Crc32MinTooSmall", Algorithm::kCrc32,
         [](ChunkerOptions* o) { o->min_size = 10; },
         "min_size 10 is out of range [64, 1048576]"},
        {"Crc32AvgNotPowerOfTwo", Algorithm::kCrc32,
         [](ChunkerOptions* o) { o->avg_size = 1000; },
         "avg_size 1000 must be a power of two"},
        {"Crc32MinAboveAvg", Algorithm::kCrc32,
         [](ChunkerOptions* o) {
           o->min_size = 9000;
           o->avg_size = 8192;
         },
         "min_size 9000 must not exceed avg_size 8192"},
        {"Crc32MaxTooLarge", Algorithm::kCrc32,
         [](ChunkerOptions* o) { o->max_size = 1u << 30; },
         "max_size 1073741824 is out of range [1024, 16777216]"},
        {"SeqCdcMinTooSmall", Algorithm::kSeqCdc,
         [](ChunkerOptions* o) { o->min_size = 0; },
         "min_size 0 is out of range [64, 1048576]"},
        {"SeqCdcMinAboveMax", Algorithm::kSeqCdc,
         [](ChunkerOptions* o) {
           o->min_size = 16384;
           o->max_size = 12288;
         },
         "min_size 16384 must not exceed max_size 12288"},
        {"SeqCdcMode", Algorithm::kSeqCdc,
         [](ChunkerOptions* o) { o->seq_mode = static_cast<SeqMode>(0); },
         "seq_mode 0 is not one of 1 (increasing), 2 (decreasing)"},
        {"SeqCdcSeqLengthZero", Algorithm::kSeqCdc,
         [](ChunkerOptions* o) { o->seq_length = 0; },
         "seq_length 0 is out of range [1, 255]"},
        {"SeqCdcSeqLengthTooLong", Algorithm::kSeqCdc,
         [](ChunkerOptions* o) { o->seq_length = 256; },
         "seq_length 256 is out of range [1, 255]"},
        {"SeqCdcSkipTriggerZero", Algorithm::kSeqCdc,
         [](ChunkerOptions* o) { o->skip_trigger = 0; },
         "skip_trigger 0 is out of range [1, 65535]"},
        {"SeqCdcSkipTriggerTooLarge", Algorithm::kSeqCdc,
         [](ChunkerOptions* o) { o->skip_trigger = 65536; },
         "skip_trigger 65536 is out of range [1, 65535]"},
        {"SeqCdcSkipSizeTooLarge", Algorithm::kSeqCdc,
         [](ChunkerOptions* o) { o->skip_size = 2 * 1048576; },
         "skip_size 2097152 is out of range [0, 1048576]"},
        {"FixedSizeTooSmall", Algorithm::kFixed,
         [](ChunkerOptions* o) { o->avg_size = 10; },
         "avg_size 10 is out of range [64, 16777216]"},
        {"FixedSizeTooLarge", Algorithm::kFixed,
         [](ChunkerOptions* o) { o->avg_size = 16777217; },
         "avg_size 16777217 is out of range [64, 16777216]"},
        {"UnknownAlgorithm", Algorithm::kFastCdc,
         [](ChunkerOptions* o) { o->algorithm = static_cast<Algorithm>(9); },
         "algorithm 9 is not one of 1 (fastcdc), 2 (crc32), 3 (seqcdc), "
         "4 (fixed), 5 (repmaxcdc), 6 (rabin), 7 (buzhash)"},
        {"RepMaxCdcMinBelowWindow", Algorithm::kRepMaxCdc,
         [](ChunkerOptions* o) { o->min_size = 63; },
         "min_size 63 is out of range [64, 4194304]"},
        {"RepMaxCdcHorizonTooLarge", Algorithm::kRepMaxCdc,
         [](ChunkerOptions* o) { o->horizon_size = 16777217; },
         "horizon_size 16777217 is out of range [0, 16777216]"},
        {"RabinAvgZero", Algorithm::kRabin,
         [](ChunkerOptions* o) { o->avg_size = 0; },
         "avg_size 0 is out of range [1, 16777216]"},
        {"RabinAvgNotPowerOfTwo", Algorithm::kRabin,
         [](ChunkerOptions* o) { o->avg_size = 1000000; },
         "avg_size 1000000 must be a power of two"},
        {"RabinMinAboveMax", Algorithm::kRabin,
         [](ChunkerOptions* o) { o->min_size = 8388608; o->max_size = 4096; },
         "min_size 8388608 must not exceed max_size 4096"},
        {"RabinPolynomialDegree", Algorithm::kRabin,
         [](ChunkerOptions* o) { o->polynomial = 0x3DA3358B4DC17; },
         "polynomial 0x3da3358b4dc17 does not have degree 53 (it must lie in "
         "[0x20000000000000, 0x3fffffffffffff])"},
        {"RabinPolynomialReducible", Algorithm::kRabin,
         [](ChunkerOptions* o) { o->polynomial = 0x3DA3358B4DC172; },
         "polynomial 0x3da3358b4dc172 is not irreducible over GF(2)"},
        {"BuzhashMinBelowWindow", Algorithm::kBuzhash,
         [](ChunkerOptions* o) { o->min_size = 47; },
         "min_size 47 is out of range [48, 4194304]"},
        {"BuzhashAvgAboveMax", Algorithm::kBuzhash,
         [](ChunkerOptions* o) { o->avg_size = 4194304; o->max_size = 65536; },
         "avg_size 4194304 must not exceed max_size 65536"},
    }),
    [](const ::testing::TestParamInfo<InvalidCase>& info) {
      return info.param.name;
    });

TEST(ValidateOptionsTest, AcceptsBoundsExactly) {
  ChunkerOptions fastcdc = DefaultOptions(Algorithm::kFastCdc);
  fastcdc.min_size = kFastCdcMinSizeLowerBound;
  fastcdc.avg_size = kFastCdcAvgSizeLowerBound;
  fastcdc.max_size = kFastCdcMaxSizeLowerBound;
  fastcdc.normalization_level = 3;
  EXPECT_TRUE(ValidateOptions(fastcdc).ok());
  fastcdc.min_size = kFastCdcMinSizeUpperBound;
  fastcdc.avg_size = kFastCdcAvgSizeUpperBound;
  fastcdc.max_size = kFastCdcMaxSizeUpperBound;
  fastcdc.normalization_level = 0;
  EXPECT_TRUE(ValidateOptions(fastcdc).ok());

  ChunkerOptions seqcdc = DefaultOptions(Algorithm::kSeqCdc);
  seqcdc.seq_length = 255;
  seqcdc.skip_trigger = 65535;
  seqcdc.skip_size = 0;
  seqcdc.seq_mode = SeqMode::kDecreasing;
  EXPECT_TRUE(ValidateOptions(seqcdc).ok());
  seqcdc.seq_length = 1;
  seqcdc.skip_trigger = 1;
  seqcdc.skip_size = 1048576;
  EXPECT_TRUE(ValidateOptions(seqcdc).ok());
}

TEST(ValidateOptionsTest, FastCdcAcceptsAnyAverageLikeTheCrate) {
  ChunkerOptions options = DefaultOptions(Algorithm::kFastCdc);
  options.avg_size = 10000;  // round(log2) = 13 bits, as in the crate
  EXPECT_TRUE(ValidateOptions(options).ok());
  options.min_size = 4097;
  options.max_size = 65535;
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(ValidateOptionsTest, IgnoresFieldsOfOtherAlgorithms) {
  ChunkerOptions crc32 = DefaultOptions(Algorithm::kCrc32);
  crc32.normalization_level = 99;
  crc32.seq_length = 0;
  crc32.seq_mode = static_cast<SeqMode>(42);
  EXPECT_TRUE(ValidateOptions(crc32).ok());
  ChunkerOptions fastcdc = DefaultOptions(Algorithm::kFastCdc);
  fastcdc.skip_trigger = 0;
  EXPECT_TRUE(ValidateOptions(fastcdc).ok());
}

TEST(ParametersTest, EachAlgorithmReadsItsOwn) {
  using V = std::vector<absl::string_view>;
  EXPECT_EQ(ParametersOf(Algorithm::kFastCdc),
            V({"min_size", "avg_size", "max_size", "normalization_level",
               "seed"}));
  EXPECT_EQ(ParametersOf(Algorithm::kCrc32),
            V({"min_size", "avg_size", "max_size"}));
  EXPECT_EQ(ParametersOf(Algorithm::kSeqCdc),
            V({"min_size", "max_size", "seq_mode", "seq_length",
               "skip_trigger", "skip_size"}));
  EXPECT_EQ(ParametersOf(Algorithm::kFixed), V({"avg_size"}));
  EXPECT_EQ(ParametersOf(Algorithm::kRepMaxCdc),
            V({"min_size", "horizon_size"}));
  EXPECT_EQ(ParametersOf(Algorithm::kRabin),
            V({"min_size", "avg_size", "max_size", "polynomial"}));
  EXPECT_EQ(ParametersOf(Algorithm::kBuzhash),
            V({"min_size", "avg_size", "max_size"}));
  EXPECT_EQ(AllParameters().size(), 11u);
  EXPECT_TRUE(TakesParameter(Algorithm::kFastCdc, "seed"));
  EXPECT_FALSE(TakesParameter(Algorithm::kFixed, "min_size"));
  EXPECT_FALSE(TakesParameter(Algorithm::kFastCdc, "no_such_field"));
}

TEST(ValidateOptionsTest, RabinTakesAnyAverageBitsOfRestic) {
  // restic's SetAverageBits(0) is a mask of 0 (avg 1); the average is not
  // ordered against min and max.
  ChunkerOptions rabin = DefaultOptions(Algorithm::kRabin);
  for (uint32_t avg : {1u, 2u, 1u << 24}) {
    rabin.avg_size = avg;
    EXPECT_TRUE(ValidateOptions(rabin).ok()) << avg;
  }
}

TEST(ValidateOptionsTest, SeqCdcDoesNotCheckTheAverage) {
  // SeqCDC cuts by min_size and max_size alone; the profile's avg_size
  // (16 KiB by default) may lie outside them.
  ChunkerOptions seqcdc = DefaultOptions(Algorithm::kSeqCdc);
  seqcdc.min_size = 2048;
  seqcdc.max_size = 8192;
  EXPECT_TRUE(ValidateOptions(seqcdc).ok());
}

TEST(ValidateOptionsTest, FixedChecksMinAndMaxOnlyForRange) {
  ChunkerOptions fixed = DefaultOptions(Algorithm::kFixed);
  fixed.avg_size = 1 << 20;  // as when a client overrides only the size
  EXPECT_TRUE(ValidateOptions(fixed).ok());
  fixed.min_size = 1u << 31;
  absl::Status status = ValidateOptions(fixed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("min_size"));
  fixed.min_size = 64;
  fixed.max_size = 0;
  status = ValidateOptions(fixed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("max_size"));
}

TEST(ValidateOptionsTest, EveryPresetIsValid) {
  for (const char* name : {"fastcdc-reapi", "seqcdc-8k", "seqcdc-16k"}) {
    absl::StatusOr<ChunkerOptions> preset = Preset(name);
    ASSERT_TRUE(preset.ok()) << name;
    EXPECT_TRUE(ValidateOptions(*preset).ok()) << name;
    EXPECT_THAT(std::string(AlgorithmName(preset->algorithm)),
                HasSubstr(std::string(name).substr(0, 6)));
  }
}

}  // namespace
}  // namespace chunkd::chunking
