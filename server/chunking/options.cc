// Algorithm names, parameter limits, defaults, presets and validation.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/limits.h"
#include "chunking/rabin.h"

namespace chunkd::chunking {
namespace {

constexpr absl::string_view kPresetFastCdcReapi = "fastcdc-reapi";
constexpr absl::string_view kPresetSeqCdc8k = "seqcdc-8k";
constexpr absl::string_view kPresetSeqCdc16k = "seqcdc-16k";

bool IsKnown(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kFastCdc:
    case Algorithm::kCrc32:
    case Algorithm::kSeqCdc:
    case Algorithm::kFixed:
    case Algorithm::kRepMaxCdc:
    case Algorithm::kRabin:
    case Algorithm::kBuzhash:
      return true;
  }
  return false;
}

AlgorithmLimits MakeFastCdcLimits() {
  AlgorithmLimits limits;
  limits.min_size = {kFastCdcMinSizeLowerBound, kFastCdcMinSizeUpperBound,
                     kFastCdcDefaultMinSize};
  limits.avg_size = {kFastCdcAvgSizeLowerBound, kFastCdcAvgSizeUpperBound,
                     kFastCdcDefaultAvgSize};
  limits.max_size = {kFastCdcMaxSizeLowerBound, kFastCdcMaxSizeUpperBound,
                     kFastCdcDefaultMaxSize};
  limits.avg_power_of_two = false;
  limits.normalization_level = {kFastCdcLevelLowerBound,
                                kFastCdcLevelUpperBound, kFastCdcDefaultLevel};
  return limits;
}

AlgorithmLimits MakeCrc32Limits() {
  AlgorithmLimits limits;
  limits.min_size = {kCrc32MinSizeLowerBound, kCrc32MinSizeUpperBound,
                     kCrc32DefaultMinSize};
  limits.avg_size = {kCrc32AvgSizeLowerBound, kCrc32AvgSizeUpperBound,
                     kCrc32DefaultAvgSize};
  limits.max_size = {kCrc32MaxSizeLowerBound, kCrc32MaxSizeUpperBound,
                     kCrc32DefaultMaxSize};
  limits.avg_power_of_two = true;
  return limits;
}

AlgorithmLimits MakeSeqCdcLimits() {
  AlgorithmLimits limits;
  limits.min_size = {kSeqCdcMinSizeLowerBound, kSeqCdcMinSizeUpperBound,
                     kSeqCdc16kMinSize};
  limits.avg_size = {kSeqCdcAvgSizeLowerBound, kSeqCdcAvgSizeUpperBound,
                     kSeqCdc16kAvgSize};
  limits.max_size = {kSeqCdcMaxSizeLowerBound, kSeqCdcMaxSizeUpperBound,
                     kSeqCdc16kMaxSize};
  limits.avg_power_of_two = false;
  limits.seq_length = {kSeqCdcSeqLengthLowerBound, kSeqCdcSeqLengthUpperBound,
                       kSeqCdc16kSeqLength};
  limits.skip_trigger = {kSeqCdcSkipTriggerLowerBound,
                         kSeqCdcSkipTriggerUpperBound, kSeqCdc16kSkipTrigger};
  limits.skip_size = {kSeqCdcSkipSizeLowerBound, kSeqCdcSkipSizeUpperBound,
                      kSeqCdc16kSkipSize};
  return limits;
}

// fixed cuts at avg_size only; min_size and max_size are reported with the
// same range and default because every chunk but the last is exactly
// avg_size (min = avg = max).
AlgorithmLimits MakeFixedLimits() {
  AlgorithmLimits limits;
  const ParamRange size = {kFixedSizeLowerBound, kFixedSizeUpperBound,
                           kFixedDefaultSize};
  limits.min_size = size;
  limits.avg_size = size;
  limits.max_size = size;
  limits.avg_power_of_two = false;
  return limits;
}

// repmaxcdc reads min_size and horizon_size only (its chunks lie in
// [min, 2 min)): avg_size and max_size have no range.
AlgorithmLimits MakeRepMaxCdcLimits() {
  AlgorithmLimits limits;
  limits.min_size = {kRepMaxCdcMinSizeLowerBound, kRepMaxCdcMinSizeUpperBound,
                     kRepMaxCdcDefaultMinSize};
  limits.horizon_size = {kRepMaxCdcHorizonLowerBound,
                         kRepMaxCdcHorizonUpperBound, kRepMaxCdcDefaultHorizon};
  return limits;
}

AlgorithmLimits MakeRabinLimits() {
  AlgorithmLimits limits;
  limits.min_size = {kRabinMinSizeLowerBound, kRabinMinSizeUpperBound,
                     kRabinDefaultMinSize};
  limits.avg_size = {kRabinAvgSizeLowerBound, kRabinAvgSizeUpperBound,
                     kRabinDefaultAvgSize};
  limits.max_size = {kRabinMaxSizeLowerBound, kRabinMaxSizeUpperBound,
                     kRabinDefaultMaxSize};
  limits.avg_power_of_two = true;
  limits.polynomial = {kRabinPolynomialLowerBound, kRabinPolynomialUpperBound,
                       kRabinDefaultPolynomial};
  return limits;
}

AlgorithmLimits MakeBuzhashLimits() {
  AlgorithmLimits limits;
  limits.min_size = {kBuzhashMinSizeLowerBound, kBuzhashMinSizeUpperBound,
                     kBuzhashDefaultMinSize};
  limits.avg_size = {kBuzhashAvgSizeLowerBound, kBuzhashAvgSizeUpperBound,
                     kBuzhashDefaultAvgSize};
  limits.max_size = {kBuzhashMaxSizeLowerBound, kBuzhashMaxSizeUpperBound,
                     kBuzhashDefaultMaxSize};
  return limits;
}

absl::Status CheckRange(absl::string_view field, uint64_t value,
                        const ParamRange& range) {
  if (value < range.min || value > range.max) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", value, " is out of range [", range.min, ", ",
                     range.max, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckNotAbove(absl::string_view low_field, uint64_t low,
                           absl::string_view high_field, uint64_t high) {
  if (low > high) {
    return absl::InvalidArgumentError(absl::StrCat(
        low_field, " ", low, " must not exceed ", high_field, " ", high));
  }
  return absl::OkStatus();
}

// The size checks shared by the content-defined algorithms: each size in its
// range, the average a power of two where required, min <= avg <= max.
absl::Status CheckSizes(const ChunkerOptions& options,
                        const AlgorithmLimits& limits) {
  if (absl::Status s =
          CheckRange("min_size", options.min_size, limits.min_size);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckRange("avg_size", options.avg_size, limits.avg_size);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckRange("max_size", options.max_size, limits.max_size);
      !s.ok()) {
    return s;
  }
  if (limits.avg_power_of_two &&
      (options.avg_size & (options.avg_size - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("avg_size ", options.avg_size, " must be a power of two"));
  }
  if (absl::Status s = CheckNotAbove("min_size", options.min_size, "avg_size",
                                     options.avg_size);
      !s.ok()) {
    return s;
  }
  return CheckNotAbove("avg_size", options.avg_size, "max_size",
                       options.max_size);
}

// min_size and max_size each within their range.
absl::Status CheckMinAndMaxRanges(const ChunkerOptions& options,
                                  const AlgorithmLimits& limits) {
  if (absl::Status s =
          CheckRange("min_size", options.min_size, limits.min_size);
      !s.ok()) {
    return s;
  }
  return CheckRange("max_size", options.max_size, limits.max_size);
}

absl::Status CheckSeqParams(const ChunkerOptions& options,
                            const AlgorithmLimits& limits) {
  if (options.seq_mode != SeqMode::kIncreasing &&
      options.seq_mode != SeqMode::kDecreasing) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_mode ", static_cast<int>(options.seq_mode),
                     " is not one of 1 (increasing), 2 (decreasing)"));
  }
  if (absl::Status s =
          CheckRange("seq_length", options.seq_length, limits.seq_length);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckRange("skip_trigger", options.skip_trigger, limits.skip_trigger);
      !s.ok()) {
    return s;
  }
  return CheckRange("skip_size", options.skip_size, limits.skip_size);
}

// rabin: the sizes in range, the average a power of two, min <= max (restic
// does not order the average against them), and a polynomial of degree 53
// that is irreducible.
absl::Status CheckRabin(const ChunkerOptions& options,
                        const AlgorithmLimits& limits) {
  if (absl::Status s = CheckMinAndMaxRanges(options, limits); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckRange("avg_size", options.avg_size, limits.avg_size);
      !s.ok()) {
    return s;
  }
  if ((options.avg_size & (options.avg_size - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("avg_size ", options.avg_size, " must be a power of two"));
  }
  if (absl::Status s = CheckNotAbove("min_size", options.min_size, "max_size",
                                     options.max_size);
      !s.ok()) {
    return s;
  }
  if (options.polynomial < limits.polynomial.min ||
      options.polynomial > limits.polynomial.max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "polynomial 0x", absl::Hex(options.polynomial),
        " does not have degree 53 (it must lie in [0x",
        absl::Hex(limits.polynomial.min), ", 0x",
        absl::Hex(limits.polynomial.max), "])"));
  }
  if (!RabinPolynomialIsIrreducible(options.polynomial)) {
    return absl::InvalidArgumentError(
        absl::StrCat("polynomial 0x", absl::Hex(options.polynomial),
                     " is not irreducible over GF(2)"));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<Algorithm>& AllAlgorithms() {
  static const std::vector<Algorithm>* const kAll =
      new std::vector<Algorithm>{Algorithm::kFastCdc,   Algorithm::kCrc32,
                                 Algorithm::kSeqCdc,    Algorithm::kFixed,
                                 Algorithm::kRepMaxCdc, Algorithm::kRabin,
                                 Algorithm::kBuzhash};
  return *kAll;
}

absl::string_view AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kFastCdc:
      return "fastcdc";
    case Algorithm::kCrc32:
      return "crc32";
    case Algorithm::kSeqCdc:
      return "seqcdc";
    case Algorithm::kFixed:
      return "fixed";
    case Algorithm::kRepMaxCdc:
      return "repmaxcdc";
    case Algorithm::kRabin:
      return "rabin";
    case Algorithm::kBuzhash:
      return "buzhash";
  }
  return "unknown";
}

absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name) {
  for (Algorithm algorithm : AllAlgorithms()) {
    if (AlgorithmName(algorithm) == name) return algorithm;
  }
  std::vector<absl::string_view> names;
  for (Algorithm algorithm : AllAlgorithms()) {
    names.push_back(AlgorithmName(algorithm));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown algorithm \"", name, "\"; expected one of ",
      absl::StrJoin(names, ", ")));
}

namespace {

constexpr unsigned Bit(Algorithm a) { return 1u << static_cast<unsigned>(a); }

struct ParameterUse {
  absl::string_view name;
  unsigned used_by;  // Bit() of each algorithm that reads it
};
constexpr unsigned kFastCdcBit = Bit(Algorithm::kFastCdc);
constexpr unsigned kCrc32Bit = Bit(Algorithm::kCrc32);
constexpr unsigned kSeqCdcBit = Bit(Algorithm::kSeqCdc);
constexpr unsigned kFixedBit = Bit(Algorithm::kFixed);
constexpr unsigned kRepMaxCdcBit = Bit(Algorithm::kRepMaxCdc);
constexpr unsigned kRabinBit = Bit(Algorithm::kRabin);
constexpr unsigned kBuzhashBit = Bit(Algorithm::kBuzhash);
constexpr ParameterUse kParameterUse[] = {
    {"min_size", kFastCdcBit | kCrc32Bit | kSeqCdcBit | kRepMaxCdcBit |
                     kRabinBit | kBuzhashBit},
    {"avg_size", kFastCdcBit | kCrc32Bit | kFixedBit | kRabinBit | kBuzhashBit},
    {"max_size",
     kFastCdcBit | kCrc32Bit | kSeqCdcBit | kRabinBit | kBuzhashBit},
    {"normalization_level", kFastCdcBit},
    {"seed", kFastCdcBit},
    {"seq_mode", kSeqCdcBit},
    {"seq_length", kSeqCdcBit},
    {"skip_trigger", kSeqCdcBit},
    {"skip_size", kSeqCdcBit},
    {"horizon_size", kRepMaxCdcBit},
    {"polynomial", kRabinBit},
};

std::vector<absl::string_view> MakeParametersOf(unsigned bit) {
  std::vector<absl::string_view> names;
  for (const ParameterUse& use : kParameterUse) {
    if ((use.used_by & bit) != 0) names.push_back(use.name);
  }
  return names;
}

}  // namespace

const std::vector<absl::string_view>& ParametersOf(Algorithm algorithm) {
  static const auto* const kFastCdc =
      new std::vector<absl::string_view>(MakeParametersOf(kFastCdcBit));
  static const auto* const kCrc32 =
      new std::vector<absl::string_view>(MakeParametersOf(kCrc32Bit));
  static const auto* const kSeqCdc =
      new std::vector<absl::string_view>(MakeParametersOf(kSeqCdcBit));
  static const auto* const kFixed =
      new std::vector<absl::string_view>(MakeParametersOf(kFixedBit));
  static const auto* const kRepMaxCdc =
      new std::vector<absl::string_view>(MakeParametersOf(kRepMaxCdcBit));
  static const auto* const kRabin =
      new std::vector<absl::string_view>(MakeParametersOf(kRabinBit));
  static const auto* const kBuzhash =
      new std::vector<absl::string_view>(MakeParametersOf(kBuzhashBit));
  static const auto* const kNone = new std::vector<absl::string_view>();
  switch (algorithm) {
    case Algorithm::kRepMaxCdc:
      return *kRepMaxCdc;
    case Algorithm::kRabin:
      return *kRabin;
    case Algorithm::kBuzhash:
      return *kBuzhash;
    case Algorithm::kFastCdc:
      return *kFastCdc;
    case Algorithm::kCrc32:
      return *kCrc32;
    case Algorithm::kSeqCdc:
      return *kSeqCdc;
    case Algorithm::kFixed:
      return *kFixed;
  }
  return *kNone;
}

bool TakesParameter(Algorithm algorithm, absl::string_view parameter) {
  for (const ParameterUse& use : kParameterUse) {
    if (use.name == parameter) return (use.used_by & Bit(algorithm)) != 0;
  }
  return false;
}

const std::vector<absl::string_view>& AllParameters() {
  static const auto* const kAll = new std::vector<absl::string_view>(
      MakeParametersOf(~0u));
  return *kAll;
}

const AlgorithmLimits& LimitsFor(Algorithm algorithm) {
  static const AlgorithmLimits kFastCdc = MakeFastCdcLimits();
  static const AlgorithmLimits kCrc32 = MakeCrc32Limits();
  static const AlgorithmLimits kSeqCdc = MakeSeqCdcLimits();
  static const AlgorithmLimits kFixed = MakeFixedLimits();
  static const AlgorithmLimits kRepMaxCdc = MakeRepMaxCdcLimits();
  static const AlgorithmLimits kRabin = MakeRabinLimits();
  static const AlgorithmLimits kBuzhash = MakeBuzhashLimits();
  static const AlgorithmLimits kNone;
  switch (algorithm) {
    case Algorithm::kRepMaxCdc:
      return kRepMaxCdc;
    case Algorithm::kRabin:
      return kRabin;
    case Algorithm::kBuzhash:
      return kBuzhash;
    case Algorithm::kFastCdc:
      return kFastCdc;
    case Algorithm::kCrc32:
      return kCrc32;
    case Algorithm::kSeqCdc:
      return kSeqCdc;
    case Algorithm::kFixed:
      return kFixed;
  }
  return kNone;
}

ChunkerOptions DefaultOptions(Algorithm algorithm) {
  ChunkerOptions options;
  options.algorithm = algorithm;
  const AlgorithmLimits& limits = LimitsFor(algorithm);
  options.min_size = static_cast<uint32_t>(limits.min_size.default_value);
  options.avg_size = static_cast<uint32_t>(limits.avg_size.default_value);
  options.max_size = static_cast<uint32_t>(limits.max_size.default_value);
  // The per-algorithm fields keep their documented defaults everywhere, so
  // that switching the algorithm of a filled-in struct stays valid.
  options.normalization_level = kFastCdcDefaultLevel;
  options.seed = 0;
  options.seq_mode = SeqMode::kIncreasing;
  options.seq_length = kSeqCdc16kSeqLength;
  options.skip_trigger = kSeqCdc16kSkipTrigger;
  options.skip_size = kSeqCdc16kSkipSize;
  options.horizon_size = kRepMaxCdcDefaultHorizon;
  options.polynomial = kRabinDefaultPolynomial;
  return options;
}

absl::StatusOr<ChunkerOptions> Preset(absl::string_view name) {
  if (name == kPresetFastCdcReapi) {
    ChunkerOptions options = DefaultOptions(Algorithm::kFastCdc);
    options.avg_size = kFastCdcReapiAvgSize;
    options.min_size = kFastCdcReapiAvgSize / 4;
    options.max_size = kFastCdcReapiAvgSize * 4;
    options.normalization_level = kFastCdcReapiLevel;
    options.seed = 0;
    return options;
  }
  if (name == kPresetSeqCdc8k || name == kPresetSeqCdc16k) {
    const bool is_8k = name == kPresetSeqCdc8k;
    ChunkerOptions options = DefaultOptions(Algorithm::kSeqCdc);
    options.seq_mode = SeqMode::kIncreasing;
    options.min_size = is_8k ? kSeqCdc8kMinSize : kSeqCdc16kMinSize;
    options.avg_size = is_8k ? kSeqCdc8kAvgSize : kSeqCdc16kAvgSize;
    options.max_size = is_8k ? kSeqCdc8kMaxSize : kSeqCdc16kMaxSize;
    options.seq_length = is_8k ? kSeqCdc8kSeqLength : kSeqCdc16kSeqLength;
    options.skip_trigger = is_8k ? kSeqCdc8kSkipTrigger : kSeqCdc16kSkipTrigger;
    options.skip_size = is_8k ? kSeqCdc8kSkipSize : kSeqCdc16kSkipSize;
    return options;
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown preset \"", name, "\"; expected one of ", kPresetFastCdcReapi,
      ", ", kPresetSeqCdc8k, ", ", kPresetSeqCdc16k));
}

absl::Status ValidateOptions(const ChunkerOptions& options) {
  if (!IsKnown(options.algorithm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("algorithm ", static_cast<int>(options.algorithm),
                     " is not one of 1 (fastcdc), 2 (crc32), 3 (seqcdc), "
                     "4 (fixed), 5 (repmaxcdc), 6 (rabin), 7 (buzhash)"));
  }
  const AlgorithmLimits& limits = LimitsFor(options.algorithm);
  switch (options.algorithm) {
    case Algorithm::kFastCdc:
      if (absl::Status s = CheckSizes(options, limits); !s.ok()) return s;
      return CheckRange("normalization_level", options.normalization_level,
                        limits.normalization_level);
    case Algorithm::kCrc32:
      return CheckSizes(options, limits);
    case Algorithm::kSeqCdc:
      // SeqCDC's cut points depend on min_size and max_size only: avg_size
      // (its profile's expected average) is not checked against them.
      if (absl::Status s = CheckMinAndMaxRanges(options, limits); !s.ok()) {
        return s;
      }
      if (absl::Status s = CheckNotAbove("min_size", options.min_size,
                                         "max_size", options.max_size);
          !s.ok()) {
        return s;
      }
      return CheckSeqParams(options, limits);
    case Algorithm::kFixed:
      // The chunk size is avg_size; min_size and max_size do not shape the
      // chunks, but a value out of range is still a caller's mistake.
      if (absl::Status s = CheckMinAndMaxRanges(options, limits); !s.ok()) {
        return s;
      }
      return CheckRange("avg_size", options.avg_size, limits.avg_size);
    case Algorithm::kRepMaxCdc:
      if (absl::Status s =
              CheckRange("min_size", options.min_size, limits.min_size);
          !s.ok()) {
        return s;
      }
      return CheckRange("horizon_size", options.horizon_size,
                        limits.horizon_size);
    case Algorithm::kRabin:
      return CheckRabin(options, limits);
    case Algorithm::kBuzhash:
      return CheckSizes(options, limits);
  }
  return absl::OkStatus();
}

}  // namespace chunkd::chunking
