#include "service/estimate_params.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "index/fingerprint_index.h"
#include "service/params.h"

namespace chunkd::service {
namespace {

using ::testing::HasSubstr;

v1::EstimateSet* AddSet(v1::EstimateParams* p, const std::string& label,
                        v1::Algorithm algorithm) {
  v1::EstimateSet* set = p->add_sets();
  set->set_label(label);
  set->mutable_chunking()->set_algorithm(algorithm);
  return set;
}

absl::Status Problem(const v1::EstimateParams& p) {
  return EstimatorOptionsFromProto(p, chunking::EngineOptions(), 0).status();
}

TEST(EstimatorOptionsFromProtoTest, SetsSamplingAndLimitsAreCarried) {
  v1::EstimateParams p;
  v1::EstimateSet* a = AddSet(&p, "fastcdc:avg=8192", v1::ALGORITHM_FASTCDC);
  a->mutable_chunking()->set_min_size(2048);
  a->mutable_chunking()->set_avg_size(8192);
  a->mutable_chunking()->set_max_size(32768);
  AddSet(&p, "fixed", v1::ALGORITHM_FIXED)->mutable_chunking()->set_avg_size(
      4096);
  p.set_sample_rate(64);
  auto o = EstimatorOptionsFromProto(p, chunking::EngineOptions(), 12345);
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->sets.size(), 2u);
  EXPECT_EQ(o->sets[0].label, "fastcdc:avg=8192");
  EXPECT_EQ(o->sets[0].options.avg_size, 8192u);
  EXPECT_EQ(o->sets[1].options.algorithm, chunking::Algorithm::kFixed);
  EXPECT_EQ(o->sets[1].options.avg_size, 4096u);
  EXPECT_EQ(o->sample_rate, 64u);
  EXPECT_EQ(o->max_entries, 12345u);
  EXPECT_EQ(o->fingerprint, estimate::FingerprintKind::kXxh128);
}

TEST(EstimatorOptionsFromProtoTest, SampleRateZeroAndOneAreExact) {
  v1::EstimateParams p;
  AddSet(&p, "a", v1::ALGORITHM_FASTCDC);
  for (uint32_t rate : {0u, 1u}) {
    p.set_sample_rate(rate);
    auto o = EstimatorOptionsFromProto(p, chunking::EngineOptions(), 0);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->sample_rate, 1u);
  }
  p.set_sample_rate(estimate::kMaxSampleRate);
  EXPECT_TRUE(Problem(p).ok());
  p.set_sample_rate(estimate::kMaxSampleRate + 1);
  EXPECT_THAT(Problem(p).message(), HasSubstr("sample_rate 1048577"));
  EXPECT_EQ(Problem(p).code(), absl::StatusCode::kInvalidArgument);
}

TEST(EstimatorOptionsFromProtoTest, FingerprintDefaultsToTheNamespaces) {
  v1::EstimateParams p;
  AddSet(&p, "a", v1::ALGORITHM_FASTCDC);
  auto o = EstimatorOptionsFromProto(p, chunking::EngineOptions(), 0);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->fingerprint, estimate::FingerprintKind::kXxh128);
  p.set_namespace_("tenant");
  o = EstimatorOptionsFromProto(p, chunking::EngineOptions(), 0);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->fingerprint, estimate::FingerprintKind::kSha256);
  p.set_fingerprint(v1::FINGERPRINT_ALGORITHM_XXH128);
  o = EstimatorOptionsFromProto(p, chunking::EngineOptions(), 0);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->fingerprint, estimate::FingerprintKind::kXxh128);
  p.set_fingerprint(v1::FINGERPRINT_ALGORITHM_NONE);
  EXPECT_THAT(Problem(p).message(),
              HasSubstr("FINGERPRINT_ALGORITHM_NONE cannot be used"));
  p.set_fingerprint(static_cast<v1::FingerprintAlgorithm>(9));
  EXPECT_THAT(Problem(p).message(), HasSubstr("fingerprint 9 is unknown"));
}

TEST(EstimatorOptionsFromProtoTest, SetCountAndLabelsAreBounded) {
  v1::EstimateParams p;
  EXPECT_THAT(Problem(p).message(), HasSubstr("sets has 0 entries"));
  for (size_t i = 0; i < estimate::kMaxSets; ++i) {
    AddSet(&p, "s" + std::to_string(i), v1::ALGORITHM_FASTCDC);
  }
  EXPECT_TRUE(Problem(p).ok());
  AddSet(&p, "one too many", v1::ALGORITHM_FASTCDC);
  EXPECT_THAT(Problem(p).message(), HasSubstr("sets has 17 entries"));

  v1::EstimateParams labels;
  AddSet(&labels, std::string(estimate::kMaxLabelBytes, 'x'),
         v1::ALGORITHM_FASTCDC);
  EXPECT_TRUE(Problem(labels).ok());
  AddSet(&labels, std::string(estimate::kMaxLabelBytes + 1, 'x'),
         v1::ALGORITHM_FASTCDC);
  EXPECT_THAT(Problem(labels).message(),
              HasSubstr("sets[1].label has 257 bytes; at most 256"));
}

TEST(EstimatorOptionsFromProtoTest, BadChunkingNamesTheSetAndTheField) {
  v1::EstimateParams p;
  AddSet(&p, "fine", v1::ALGORITHM_FASTCDC);
  AddSet(&p, "fastcdc:avg=7", v1::ALGORITHM_FASTCDC)
      ->mutable_chunking()
      ->set_avg_size(7);
  absl::Status s = Problem(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sets[1] (label \"fastcdc:avg=7\"): "));
  EXPECT_THAT(s.message(), HasSubstr("avg_size"));

  v1::EstimateParams unused;
  AddSet(&unused, "fixed:min=4096", v1::ALGORITHM_FIXED)
      ->mutable_chunking()
      ->set_min_size(4096);
  s = Problem(unused);
  EXPECT_THAT(s.message(), HasSubstr("sets[0] (label \"fixed:min=4096\"): "
                                     "chunking.min_size is not a parameter "
                                     "of fixed"));
}

TEST(EstimatorOptionsFromProtoTest, NamespaceIsValidatedLikeDedups) {
  v1::EstimateParams p;
  AddSet(&p, "a", v1::ALGORITHM_FASTCDC);
  p.set_namespace_(std::string(1000, 'n'));
  absl::Status s = Problem(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), index::ValidateNamespace(p.namespace_()).message());
}

TEST(ChunkingParamsToProtoTest, RoundTripsEveryAlgorithmsDefaults) {
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const chunking::ChunkerOptions defaults =
        chunking::DefaultOptions(algorithm);
    v1::ChunkingParams p;
    ChunkingParamsToProto(defaults, &p);
    // Only fields the algorithm takes are set: Chunk accepts them back.
    auto back = ChunkerOptionsFromProto(p);
    ASSERT_TRUE(back.ok()) << chunking::AlgorithmName(algorithm) << ": "
                           << back.status();
    v1::ChunkingParams again;
    ChunkingParamsToProto(*back, &again);
    EXPECT_EQ(again.SerializeAsString(), p.SerializeAsString())
        << chunking::AlgorithmName(algorithm);
  }
  chunking::ChunkerOptions seq =
      chunking::DefaultOptions(chunking::Algorithm::kSeqCdc);
  seq.seq_mode = chunking::SeqMode::kDecreasing;
  v1::ChunkingParams p;
  ChunkingParamsToProto(seq, &p);
  EXPECT_EQ(p.seq_mode(), v1::SEQ_CDC_MODE_DECREASING);
  EXPECT_EQ(p.min_size(), seq.min_size);
  EXPECT_FALSE(p.has_avg_size());
}

TEST(SetEstimateToProtoTest, IntervalOnlyWhenThereIsOne) {
  estimate::SetResult r;
  r.label = "x";
  r.options = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  r.bytes = 100;
  r.histogram.push_back({64, 1, 100});
  r.index_costs.push_back({"memory", "memory", 1, 190});
  r.ratio_low = 1.5;  // not valid without has_interval
  v1::SetEstimate out;
  SetEstimateToProto(r, &out);
  EXPECT_EQ(out.label(), "x");
  EXPECT_EQ(out.bytes(), 100u);
  EXPECT_EQ(out.ratio_low(), 0);
  ASSERT_EQ(out.histogram_size(), 1);
  EXPECT_EQ(out.histogram(0).lower_bound(), 64u);
  ASSERT_EQ(out.index_costs_size(), 1);
  EXPECT_EQ(out.index_costs(0).medium(), "memory");
  EXPECT_FALSE(out.has_namespace_bytes());
  r.has_interval = true;
  r.ratio_high = 2.5;
  SetEstimateToProto(r, &out);
  EXPECT_EQ(out.ratio_low(), 1.5);
  EXPECT_EQ(out.ratio_high(), 2.5);
}

}  // namespace
}  // namespace chunkd::service
