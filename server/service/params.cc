#include "service/params.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chunkd::service {
namespace {

// Whether the client set each ChunkingParams field: presence for the
// optional fields, a value other than the default for the two plain ones.
// Which algorithm reads which field is chunking::ParametersOf's.
using P = v1::ChunkingParams;
struct FieldPresence {
  absl::string_view name;
  bool (*is_set)(const P&);
};
constexpr FieldPresence kFields[] = {
    {"min_size", [](const P& p) { return p.has_min_size(); }},
    {"avg_size", [](const P& p) { return p.has_avg_size(); }},
    {"max_size", [](const P& p) { return p.has_max_size(); }},
    {"normalization_level",
     [](const P& p) { return p.has_normalization_level(); }},
    {"seed", [](const P& p) { return p.seed() != 0; }},
    {"seq_mode",
     [](const P& p) { return p.seq_mode() != v1::SEQ_CDC_MODE_UNSPECIFIED; }},
    {"seq_length", [](const P& p) { return p.has_seq_length(); }},
    {"skip_trigger", [](const P& p) { return p.has_skip_trigger(); }},
    {"skip_size", [](const P& p) { return p.has_skip_size(); }},
    {"horizon_size", [](const P& p) { return p.has_horizon_size(); }},
    {"polynomial", [](const P& p) { return p.has_polynomial(); }},
};

// The API numbers the algorithms as the library does: both come from the
// table (proto/chunkd/v1/tables.json; params_test holds the proto's enum to
// it).
v1::Algorithm ProtoOf(chunking::Algorithm algorithm) {
  return static_cast<v1::Algorithm>(static_cast<int>(algorithm));
}

// "ALGORITHM_FASTCDC (1), ALGORITHM_CRC32 (2), ... or ALGORITHM_X (n)".
std::string KnownAlgorithms() {
  std::vector<std::string> names;
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    names.push_back(absl::StrCat(v1::Algorithm_Name(ProtoOf(algorithm)), " (",
                                 static_cast<int>(algorithm), ")"));
  }
  const std::string last = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), " or ", last);
}

}  // namespace

absl::Status CheckFieldsUsed(const v1::ChunkingParams& params,
                             chunking::Algorithm algorithm) {
  for (const FieldPresence& field : kFields) {
    if (chunking::TakesParameter(algorithm, field.name) ||
        !field.is_set(params)) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "chunking.", field.name, " is not a parameter of ",
        chunking::AlgorithmName(algorithm), " (it takes ",
        absl::StrJoin(chunking::ParametersOf(algorithm), ", "), "); leave ",
        field.name, " unset"));
  }
  return absl::OkStatus();
}

absl::StatusOr<chunking::ChunkerOptions> ChunkerOptionsFromProto(
    const v1::ChunkingParams& p) {
  std::optional<chunking::Algorithm> found;
  if (p.algorithm() == v1::ALGORITHM_UNSPECIFIED) {
    found = chunking::Algorithm::kFastCdc;
  }
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    if (ProtoOf(algorithm) == p.algorithm()) found = algorithm;
  }
  if (!found.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("algorithm ", static_cast<int>(p.algorithm()),
                     " is unknown; use ", KnownAlgorithms()));
  }
  const chunking::Algorithm algorithm = *found;
  if (absl::Status s = CheckFieldsUsed(p, algorithm); !s.ok()) return s;
  chunking::ChunkerOptions o = chunking::DefaultOptions(algorithm);
  if (p.has_min_size()) o.min_size = p.min_size();
  if (p.has_avg_size()) o.avg_size = p.avg_size();
  if (p.has_max_size()) o.max_size = p.max_size();
  if (p.has_normalization_level()) {
    o.normalization_level = p.normalization_level();
  }
  o.seed = p.seed();
  switch (p.seq_mode()) {
    case v1::SEQ_CDC_MODE_UNSPECIFIED:
      break;
    case v1::SEQ_CDC_MODE_INCREASING:
      o.seq_mode = chunking::SeqMode::kIncreasing;
      break;
    case v1::SEQ_CDC_MODE_DECREASING:
      o.seq_mode = chunking::SeqMode::kDecreasing;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "seq_mode ", static_cast<int>(p.seq_mode()),
          " is unknown; use SEQ_CDC_MODE_INCREASING (1) or "
          "SEQ_CDC_MODE_DECREASING (2)"));
  }
  if (p.has_seq_length()) o.seq_length = p.seq_length();
  if (p.has_skip_trigger()) o.skip_trigger = p.skip_trigger();
  if (p.has_skip_size()) o.skip_size = p.skip_size();
  if (p.has_horizon_size()) o.horizon_size = p.horizon_size();
  if (p.has_polynomial()) o.polynomial = p.polynomial();
  absl::Status valid = chunking::ValidateOptions(o);
  if (!valid.ok()) return valid;
  return o;
}

absl::StatusOr<fingerprint::Kind> FingerprintFromProto(
    v1::FingerprintAlgorithm algorithm) {
  switch (algorithm) {
    case v1::FINGERPRINT_ALGORITHM_UNSPECIFIED:
    case v1::FINGERPRINT_ALGORITHM_SHA256:
      return fingerprint::Kind::kSha256;
    case v1::FINGERPRINT_ALGORITHM_XXH128:
      return fingerprint::Kind::kXxh128;
    case v1::FINGERPRINT_ALGORITHM_NONE:
      return fingerprint::Kind::kNone;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "fingerprint ", static_cast<int>(algorithm),
          " is unknown; use FINGERPRINT_ALGORITHM_SHA256 (1), "
          "FINGERPRINT_ALGORITHM_XXH128 (2) or FINGERPRINT_ALGORITHM_NONE (3)"));
  }
}

absl::StatusOr<pipeline::HintTest> HintTestFromProto(
    v1::HintTest hints, chunking::Algorithm algorithm) {
  const bool fastcdc = algorithm == chunking::Algorithm::kFastCdc;
  pipeline::HintTest test;
  switch (hints) {
    case v1::HINT_TEST_UNSPECIFIED:
      return fastcdc ? pipeline::HintTest::kFFRWTFPT : pipeline::HintTest::kOff;
    case v1::HINT_TEST_OFF:
      return pipeline::HintTest::kOff;
    case v1::HINT_TEST_FF:
      test = pipeline::HintTest::kFF;
      break;
    case v1::HINT_TEST_FF_MT:
      test = pipeline::HintTest::kFFMT;
      break;
    case v1::HINT_TEST_FF_RWT:
      test = pipeline::HintTest::kFFRWT;
      break;
    case v1::HINT_TEST_FF_RWT_FPT:
      test = pipeline::HintTest::kFFRWTFPT;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "hints ", static_cast<int>(hints),
          " is unknown; use HINT_TEST_OFF (1), HINT_TEST_FF (2), "
          "HINT_TEST_FF_MT (3), HINT_TEST_FF_RWT (4) or HINT_TEST_FF_RWT_FPT "
          "(5)"));
  }
  if (!fastcdc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hints ", v1::HintTest_Name(hints), " needs algorithm ALGORITHM_FASTCDC, "
        "not ", chunking::AlgorithmName(algorithm),
        "; use HINT_TEST_OFF or leave hints unset"));
  }
  return test;
}

v1::Algorithm AlgorithmToProto(chunking::Algorithm algorithm) {
  for (chunking::Algorithm known : chunking::AllAlgorithms()) {
    if (known == algorithm) return ProtoOf(algorithm);
  }
  return v1::ALGORITHM_UNSPECIFIED;
}

void FillAlgorithmInfo(chunking::Algorithm algorithm, v1::AlgorithmInfo* info) {
  const chunking::AlgorithmLimits& limits = chunking::LimitsFor(algorithm);
  info->set_algorithm(AlgorithmToProto(algorithm));
  info->set_name(std::string(chunking::AlgorithmName(algorithm)));
  // Only the ranges of the parameters the algorithm takes: a range listed is
  // a field a caller may set (seqcdc keeps an average inside the library,
  // fixed a minimum and maximum, but a caller may set none of them).
  using Field = v1::ParamRange* (v1::AlgorithmInfo::*)();
  auto set = [algorithm, info](absl::string_view parameter,
                               const chunking::ParamRange& from, Field field) {
    if (!chunking::TakesParameter(algorithm, parameter)) return;
    v1::ParamRange* to = (info->*field)();
    to->set_min(from.min);
    to->set_max(from.max);
    to->set_default_value(from.default_value);
  };
  set("min_size", limits.min_size, &v1::AlgorithmInfo::mutable_min_size);
  set("avg_size", limits.avg_size, &v1::AlgorithmInfo::mutable_avg_size);
  set("max_size", limits.max_size, &v1::AlgorithmInfo::mutable_max_size);
  info->set_avg_size_power_of_two(limits.avg_power_of_two);
  set("normalization_level", limits.normalization_level,
      &v1::AlgorithmInfo::mutable_normalization_level);
  set("horizon_size", limits.horizon_size,
      &v1::AlgorithmInfo::mutable_horizon_size);
  set("polynomial", limits.polynomial, &v1::AlgorithmInfo::mutable_polynomial);
}

}  // namespace chunkd::service
