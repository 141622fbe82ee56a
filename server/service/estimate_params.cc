#include "service/estimate_params.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "index/fingerprint_index.h"
#include "service/params.h"

namespace chunkd::service {
namespace {

// "sets[3] (label \"fastcdc:avg=7\")".
std::string SetName(int i, const std::string& label) {
  return absl::StrCat("sets[", i, "] (label \"", absl::CEscape(label), "\")");
}

absl::StatusOr<estimate::FingerprintKind> EstimateFingerprint(
    v1::FingerprintAlgorithm fingerprint, bool has_namespace) {
  if (fingerprint == v1::FINGERPRINT_ALGORITHM_UNSPECIFIED) {
    return has_namespace ? estimate::FingerprintKind::kSha256
                         : estimate::FingerprintKind::kXxh128;
  }
  auto kind = FingerprintFromProto(fingerprint);
  if (!kind.ok()) return kind.status();
  switch (*kind) {
    case fingerprint::Kind::kSha256:
      return estimate::FingerprintKind::kSha256;
    case fingerprint::Kind::kXxh128:
      return estimate::FingerprintKind::kXxh128;
    default:
      return absl::InvalidArgumentError(
          "fingerprint FINGERPRINT_ALGORITHM_NONE cannot be used with "
          "Estimate: distinct chunks are told apart by their fingerprint; use "
          "FINGERPRINT_ALGORITHM_XXH128 (2), FINGERPRINT_ALGORITHM_SHA256 (1) "
          "or leave it unset");
  }
}

absl::Status SetsFromProto(const v1::EstimateParams& p,
                           estimate::EstimatorOptions* o) {
  if (p.sets().empty() || static_cast<size_t>(p.sets_size()) >
                              estimate::kMaxSets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sets has ", p.sets_size(), " entries; give 1 to ",
        estimate::kMaxSets, " parameter sets"));
  }
  for (int i = 0; i < p.sets_size(); ++i) {
    const v1::EstimateSet& set = p.sets(i);
    if (set.label().size() > estimate::kMaxLabelBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sets[", i, "].label has ", set.label().size(),
          " bytes; at most ", estimate::kMaxLabelBytes));
    }
    auto chunking = ChunkerOptionsFromProto(set.chunking());
    if (!chunking.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          SetName(i, set.label()), ": ", chunking.status().message()));
    }
    o->sets.push_back({set.label(), *chunking});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<estimate::EstimatorOptions> EstimatorOptionsFromProto(
    const v1::EstimateParams& p, const chunking::EngineOptions& engine,
    uint64_t max_entries) {
  estimate::EstimatorOptions o;
  if (absl::Status sets = SetsFromProto(p, &o); !sets.ok()) return sets;
  if (p.sample_rate() > estimate::kMaxSampleRate) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample_rate ", p.sample_rate(), " is above ",
        estimate::kMaxSampleRate, "; give 0 or 1 (exact) up to ",
        estimate::kMaxSampleRate, " (1 in that many distinct chunks)"));
  }
  o.sample_rate = p.sample_rate() == 0 ? 1 : p.sample_rate();
  const bool has_namespace = !p.namespace_().empty();
  if (has_namespace) {
    absl::Status ns = index::ValidateNamespace(p.namespace_());
    if (!ns.ok()) return ns;
  }
  auto kind = EstimateFingerprint(p.fingerprint(), has_namespace);
  if (!kind.ok()) return kind.status();
  o.fingerprint = *kind;
  o.engine = engine;
  o.max_entries = max_entries;
  return o;
}

void ChunkingParamsToProto(const chunking::ChunkerOptions& o,
                           v1::ChunkingParams* p) {
  p->set_algorithm(AlgorithmToProto(o.algorithm));
  auto takes = [&o](absl::string_view name) {
    return chunking::TakesParameter(o.algorithm, name);
  };
  if (takes("min_size")) p->set_min_size(o.min_size);
  if (takes("avg_size")) p->set_avg_size(o.avg_size);
  if (takes("max_size")) p->set_max_size(o.max_size);
  if (takes("normalization_level")) {
    p->set_normalization_level(o.normalization_level);
  }
  if (takes("seed")) p->set_seed(o.seed);
  if (takes("seq_mode")) {
    p->set_seq_mode(o.seq_mode == chunking::SeqMode::kDecreasing
                        ? v1::SEQ_CDC_MODE_DECREASING
                        : v1::SEQ_CDC_MODE_INCREASING);
  }
  if (takes("seq_length")) p->set_seq_length(o.seq_length);
  if (takes("skip_trigger")) p->set_skip_trigger(o.skip_trigger);
  if (takes("skip_size")) p->set_skip_size(o.skip_size);
  if (takes("horizon_size")) p->set_horizon_size(o.horizon_size);
  if (takes("polynomial")) p->set_polynomial(o.polynomial);
}

void SetEstimateToProto(const estimate::SetResult& r, v1::SetEstimate* out) {
  out->set_label(r.label);
  ChunkingParamsToProto(r.options, out->mutable_chunking());
  out->set_bytes(r.bytes);
  out->set_chunks(r.chunks);
  out->set_unique_chunks(r.unique_chunks);
  out->set_unique_bytes(r.unique_bytes);
  out->set_dedup_ratio(r.dedup_ratio);
  for (const estimate::SizeBucket& b : r.histogram) {
    v1::SizeBucket* bucket = out->add_histogram();
    bucket->set_lower_bound(b.lower_bound);
    bucket->set_chunks(b.chunks);
    bucket->set_bytes(b.bytes);
  }
  out->set_mean_chunk_size(r.mean_chunk_size);
  out->set_min_chunk_size(r.min_chunk_size);
  out->set_p50_chunk_size(r.p50_chunk_size);
  out->set_p90_chunk_size(r.p90_chunk_size);
  out->set_p99_chunk_size(r.p99_chunk_size);
  out->set_max_chunk_size(r.max_chunk_size);
  out->set_sampled(r.sampled);
  out->set_sampled_unique_chunks(r.sampled_unique_chunks);
  if (r.has_interval) {
    out->set_ratio_low(r.ratio_low);
    out->set_ratio_high(r.ratio_high);
  }
  for (const estimate::IndexCostEstimate& c : r.index_costs) {
    v1::IndexCost* cost = out->add_index_costs();
    cost->set_backend(c.backend);
    cost->set_entries(c.entries);
    cost->set_bytes(c.bytes);
    cost->set_medium(c.medium);
  }
}

}  // namespace chunkd::service
