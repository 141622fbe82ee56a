#include "clients/cli/estimate_sets.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;

chunking::ChunkerOptions Options(const std::string& spec) {
  absl::StatusOr<EstimateSetFlag> set = ParseEstimateSet(spec);
  EXPECT_TRUE(set.ok()) << spec << ": " << set.status();
  if (!set.ok()) return {};
  EXPECT_EQ(set->label, spec);
  return ToChunkerOptions(set->flags);
}

// The message of the error ParseEstimateSet gives for `spec`.
std::string Error(const std::string& spec) {
  absl::StatusOr<EstimateSetFlag> set = ParseEstimateSet(spec);
  EXPECT_FALSE(set.ok()) << spec;
  if (set.ok()) return "";
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(set.status().message());
  EXPECT_THAT(message, HasSubstr("--set \"" + spec + "\": ")) << spec;
  return message;
}

TEST(EstimateSetTest, AlgorithmAloneTakesItsDefaults) {
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const std::string name(chunking::AlgorithmName(algorithm));
    chunking::ChunkerOptions expected = chunking::DefaultOptions(algorithm);
    chunking::ChunkerOptions got = Options(name);
    EXPECT_EQ(got.algorithm, algorithm) << name;
    EXPECT_EQ(got.min_size, expected.min_size) << name;
    EXPECT_EQ(got.avg_size, expected.avg_size) << name;
    EXPECT_EQ(got.max_size, expected.max_size) << name;
  }
}

TEST(EstimateSetTest, KeysSetTheirParameters) {
  chunking::ChunkerOptions o =
      Options("fastcdc:min=4096,avg=16384,max=65536,level=2,seed=7");
  EXPECT_EQ(o.algorithm, chunking::Algorithm::kFastCdc);
  EXPECT_EQ(o.min_size, 4096u);
  EXPECT_EQ(o.avg_size, 16384u);
  EXPECT_EQ(o.max_size, 65536u);
  EXPECT_EQ(o.normalization_level, 2u);
  EXPECT_EQ(o.seed, 7u);
  o = Options("repmaxcdc:min=262144,horizon=2097152");
  EXPECT_EQ(o.algorithm, chunking::Algorithm::kRepMaxCdc);
  EXPECT_EQ(o.min_size, 262144u);
  EXPECT_EQ(o.horizon_size, 2097152u);
  o = Options("rabin:polynomial=0x3DA3358B4DC173");
  EXPECT_EQ(o.polynomial, 0x3DA3358B4DC173u);
  o = Options("seqcdc:seq-mode=decreasing,seq-length=6,skip-trigger=40,"
              "skip-size=256");
  EXPECT_EQ(o.seq_mode, chunking::SeqMode::kDecreasing);
  EXPECT_EQ(o.seq_length, 6u);
  EXPECT_EQ(o.skip_trigger, 40u);
  EXPECT_EQ(o.skip_size, 256u);
  EXPECT_EQ(Options("fixed:avg=8192").avg_size, 8192u);
}

TEST(EstimateSetTest, KeysOverrideThePresetWhateverTheirOrder) {
  const chunking::ChunkerOptions preset = *chunking::Preset("seqcdc-16k");
  chunking::ChunkerOptions o = Options("seqcdc:preset=seqcdc-16k");
  EXPECT_EQ(o.min_size, preset.min_size);
  EXPECT_EQ(o.max_size, preset.max_size);
  EXPECT_EQ(o.skip_size, preset.skip_size);
  for (const std::string spec :
       {"seqcdc:max=65536,preset=seqcdc-16k",
        "seqcdc:preset=seqcdc-16k,max=65536"}) {
    o = Options(spec);
    EXPECT_EQ(o.max_size, 65536u) << spec;
    EXPECT_EQ(o.min_size, preset.min_size) << spec;
  }
}

TEST(EstimateSetTest, ErrorsNameTheSetAndTheProblem) {
  EXPECT_THAT(Error("fastcd:min=1"),
              HasSubstr("unknown algorithm \"fastcd\" (known: fastcdc, "));
  EXPECT_THAT(Error(""), HasSubstr("unknown algorithm \"\""));
  EXPECT_THAT(Error("fastcdc:size=1"),
              HasSubstr("unknown key \"size\" (keys: min, avg, max, level"));
  // Only the flag's spelling is a key, not the field's.
  EXPECT_THAT(Error("fastcdc:min_size=1"), HasSubstr("unknown key"));
  EXPECT_THAT(Error("fixed:min=4096"),
              HasSubstr("fixed does not take min (fixed takes avg)"));
  EXPECT_THAT(Error("crc32:level=2"), HasSubstr("crc32 does not take level"));
  EXPECT_THAT(Error("fastcdc:min=4096,min=8192"),
              HasSubstr("key min given twice"));
  EXPECT_THAT(Error("seqcdc:preset=seqcdc-8k,preset=seqcdc-16k"),
              HasSubstr("key preset given twice"));
  EXPECT_THAT(
      Error("fastcdc:min=4k"),
      HasSubstr("min: expected an integer in 0..4294967295, got \"4k\""));
  EXPECT_THAT(Error("fastcdc:min="), HasSubstr("min: expected an integer"));
  EXPECT_THAT(Error("fastcdc:min=99999999999"),
              HasSubstr("min: expected an integer"));
  EXPECT_THAT(Error("seqcdc:seq-mode=up"),
              HasSubstr("seq-mode: expected increasing or decreasing"));
  EXPECT_THAT(Error("fastcdc:preset=seqcdc-16k"),
              HasSubstr("preset seqcdc-16k is a seqcdc preset, not fastcdc"));
  EXPECT_THAT(Error("fastcdc:preset=nope"),
              HasSubstr("unknown preset \"nope\" (presets: fastcdc-reapi, "));
  EXPECT_THAT(Error("fastcdc:"), HasSubstr("expected KEY=VALUE, got \"\""));
  EXPECT_THAT(Error("fastcdc:min"), HasSubstr("expected KEY=VALUE"));
  EXPECT_THAT(Error("fastcdc:min=4096,,avg=8192"),
              HasSubstr("expected KEY=VALUE, got \"\""));
}

TEST(EstimateSetTest, RangesAreLeftToTheEstimator) {
  // min above max parses; chunking::ValidateOptions refuses it later.
  EXPECT_EQ(Options("fastcdc:min=65536,max=4096").min_size, 65536u);
}

TEST(EstimateSetsTest, OneToSixteenSetsInOrder) {
  absl::StatusOr<std::vector<EstimateSetFlag>> none = ParseEstimateSets({});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("missing --set SPEC"));

  std::vector<std::string> specs;
  for (int i = 1; i <= 16; ++i) {
    specs.push_back("fixed:avg=" + std::to_string(4096 * i));
  }
  absl::StatusOr<std::vector<EstimateSetFlag>> sets = ParseEstimateSets(specs);
  ASSERT_TRUE(sets.ok()) << sets.status();
  ASSERT_EQ(sets->size(), 16u);
  EXPECT_EQ((*sets)[15].label, "fixed:avg=65536");
  EXPECT_EQ(*(*sets)[15].flags.avg_size, 65536u);

  specs.push_back("fastcdc");
  absl::StatusOr<std::vector<EstimateSetFlag>> many = ParseEstimateSets(specs);
  ASSERT_FALSE(many.ok());
  EXPECT_THAT(many.status().message(),
              HasSubstr("--set given 17 times; at most 16 sets"));

  absl::StatusOr<std::vector<EstimateSetFlag>> bad =
      ParseEstimateSets({"fastcdc", "nope"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--set \"nope\": "));
}

}  // namespace
}  // namespace chunkd::cli
