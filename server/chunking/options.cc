// Algorithm names, parameter limits, defaults, presets and validation, all
// read from the table (proto/chunkd/v1/tables.json, as chunkd/tables.h): no
// algorithm is named here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunkd/tables.h"
#include "chunking/rabin.h"

namespace chunkd::chunking {
namespace {

using tables::AlgorithmRow;

const AlgorithmRow* RowOf(Algorithm algorithm) {
  for (const AlgorithmRow& row : tables::kAlgorithms) {
    if (row.algorithm == algorithm) return &row;
  }
  return nullptr;
}

absl::string_view NameOf(Parameter parameter) {
  return tables::kParameters[static_cast<int>(parameter)].name;
}

// The range of `parameter` in `row`: a parameter's, else an internal field's.
const tables::Range& RangeIn(const AlgorithmRow& row, int parameter) {
  return row.parameters[parameter].present ? row.parameters[parameter]
                                           : row.internal[parameter];
}

// The ChunkerOptions field behind each Parameter, read and written as a
// uint64_t (the table holds every value so).
uint64_t Get(const ChunkerOptions& o, Parameter parameter) {
  switch (parameter) {
    case Parameter::kMinSize:
      return o.min_size;
    case Parameter::kAvgSize:
      return o.avg_size;
    case Parameter::kMaxSize:
      return o.max_size;
    case Parameter::kNormalizationLevel:
      return o.normalization_level;
    case Parameter::kSeed:
      return o.seed;
    case Parameter::kSeqMode:
      return static_cast<uint64_t>(o.seq_mode);
    case Parameter::kSeqLength:
      return o.seq_length;
    case Parameter::kSkipTrigger:
      return o.skip_trigger;
    case Parameter::kSkipSize:
      return o.skip_size;
    case Parameter::kHorizonSize:
      return o.horizon_size;
    case Parameter::kPolynomial:
      return o.polynomial;
  }
  return 0;
}

void Set(Parameter parameter, uint64_t value, ChunkerOptions* o) {
  const auto u32 = static_cast<uint32_t>(value);
  switch (parameter) {
    case Parameter::kMinSize:
      o->min_size = u32;
      return;
    case Parameter::kAvgSize:
      o->avg_size = u32;
      return;
    case Parameter::kMaxSize:
      o->max_size = u32;
      return;
    case Parameter::kNormalizationLevel:
      o->normalization_level = u32;
      return;
    case Parameter::kSeed:
      o->seed = value;
      return;
    case Parameter::kSeqMode:
      o->seq_mode = static_cast<SeqMode>(u32);
      return;
    case Parameter::kSeqLength:
      o->seq_length = u32;
      return;
    case Parameter::kSkipTrigger:
      o->skip_trigger = u32;
      return;
    case Parameter::kSkipSize:
      o->skip_size = u32;
      return;
    case Parameter::kHorizonSize:
      o->horizon_size = u32;
      return;
    case Parameter::kPolynomial:
      o->polynomial = value;
      return;
  }
}

// Where AlgorithmLimits publishes each parameter's range (nullptr: it does
// not: seed and seq_mode).
ParamRange AlgorithmLimits::*LimitsField(Parameter parameter) {
  switch (parameter) {
    case Parameter::kMinSize:
      return &AlgorithmLimits::min_size;
    case Parameter::kAvgSize:
      return &AlgorithmLimits::avg_size;
    case Parameter::kMaxSize:
      return &AlgorithmLimits::max_size;
    case Parameter::kNormalizationLevel:
      return &AlgorithmLimits::normalization_level;
    case Parameter::kSeqLength:
      return &AlgorithmLimits::seq_length;
    case Parameter::kSkipTrigger:
      return &AlgorithmLimits::skip_trigger;
    case Parameter::kSkipSize:
      return &AlgorithmLimits::skip_size;
    case Parameter::kHorizonSize:
      return &AlgorithmLimits::horizon_size;
    case Parameter::kPolynomial:
      return &AlgorithmLimits::polynomial;
    case Parameter::kSeed:
    case Parameter::kSeqMode:
      break;
  }
  return nullptr;
}

AlgorithmLimits MakeLimits(const AlgorithmRow& row) {
  AlgorithmLimits limits;
  limits.avg_power_of_two = row.avg_power_of_two;
  for (int p = 0; p < kParameterCount; ++p) {
    const tables::Range& range = RangeIn(row, p);
    ParamRange AlgorithmLimits::*field = LimitsField(static_cast<Parameter>(p));
    if (range.present && field != nullptr) {
      limits.*field = {range.min, range.max, range.default_value};
    }
  }
  return limits;
}

absl::Status CheckRange(Parameter parameter, uint64_t value,
                        const tables::Range& range) {
  if (value >= range.min && value <= range.max) return absl::OkStatus();
  const absl::string_view field = NameOf(parameter);
  if (parameter == Parameter::kSeqMode) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " ", value, " is not one of 1 (increasing), 2 (decreasing)"));
  }
  if (parameter == Parameter::kPolynomial) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " 0x", absl::Hex(value),
        " does not have degree 53 (it must lie in [0x", absl::Hex(range.min),
        ", 0x", absl::Hex(range.max), "])"));
  }
  return absl::InvalidArgumentError(absl::StrCat(field, " ", value,
                                                 " is out of range [",
                                                 range.min, ", ", range.max,
                                                 "]"));
}

// The rules between fields and on single values beyond their range: the
// average a power of two where the row says so, the order of the sizes, an
// irreducible polynomial.
absl::Status CheckRules(const ChunkerOptions& options,
                        const AlgorithmRow& row) {
  if (row.avg_power_of_two &&
      (options.avg_size & (options.avg_size - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("avg_size ", options.avg_size, " must be a power of two"));
  }
  for (int i = 0; i + 1 < row.order_size; ++i) {
    const Parameter low = row.order[i];
    const Parameter high = row.order[i + 1];
    if (Get(options, low) > Get(options, high)) {
      return absl::InvalidArgumentError(absl::StrCat(
          NameOf(low), " ", Get(options, low), " must not exceed ",
          NameOf(high), " ", Get(options, high)));
    }
  }
  const int polynomial = static_cast<int>(Parameter::kPolynomial);
  if (row.parameters[polynomial].present &&
      !RabinPolynomialIsIrreducible(options.polynomial)) {
    return absl::InvalidArgumentError(
        absl::StrCat("polynomial 0x", absl::Hex(options.polynomial),
                     " is not irreducible over GF(2)"));
  }
  return absl::OkStatus();
}

// "1 (fastcdc), 2 (crc32), ...".
std::string NumberedAlgorithms() {
  std::vector<std::string> names;
  for (const AlgorithmRow& row : tables::kAlgorithms) {
    names.push_back(
        absl::StrCat(static_cast<int>(row.algorithm), " (", row.name, ")"));
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace

const std::vector<Algorithm>& AllAlgorithms() {
  static const auto* const kAll = [] {
    auto* all = new std::vector<Algorithm>();
    for (const AlgorithmRow& row : tables::kAlgorithms) {
      all->push_back(row.algorithm);
    }
    return all;
  }();
  return *kAll;
}

absl::string_view AlgorithmName(Algorithm algorithm) {
  const AlgorithmRow* row = RowOf(algorithm);
  return row == nullptr ? "unknown" : row->name;
}

absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (const AlgorithmRow& row : tables::kAlgorithms) {
    if (row.name == name) return row.algorithm;
    names.push_back(row.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown algorithm \"", name, "\"; expected one of ",
      absl::StrJoin(names, ", ")));
}

const std::vector<absl::string_view>& ParametersOf(Algorithm algorithm) {
  static const auto* const kOf = [] {
    auto* of = new std::vector<std::vector<absl::string_view>>();
    for (const AlgorithmRow& row : tables::kAlgorithms) {
      std::vector<absl::string_view>& names = of->emplace_back();
      for (int p = 0; p < kParameterCount; ++p) {
        if (row.parameters[p].present) {
          names.push_back(tables::kParameters[p].name);
        }
      }
    }
    return of;
  }();
  static const auto* const kNone = new std::vector<absl::string_view>();
  const AlgorithmRow* row = RowOf(algorithm);
  return row == nullptr ? *kNone : (*kOf)[row - tables::kAlgorithms];
}

bool TakesParameter(Algorithm algorithm, absl::string_view parameter) {
  const AlgorithmRow* row = RowOf(algorithm);
  if (row == nullptr) return false;
  for (int p = 0; p < kParameterCount; ++p) {
    if (tables::kParameters[p].name == parameter) {
      return row->parameters[p].present;
    }
  }
  return false;
}

const std::vector<absl::string_view>& AllParameters() {
  static const auto* const kAll = [] {
    auto* all = new std::vector<absl::string_view>();
    for (const tables::ParameterRow& p : tables::kParameters) {
      all->push_back(p.name);
    }
    return all;
  }();
  return *kAll;
}

const AlgorithmLimits& LimitsFor(Algorithm algorithm) {
  static const auto* const kLimits = [] {
    auto* limits = new std::vector<AlgorithmLimits>();
    for (const AlgorithmRow& row : tables::kAlgorithms) {
      limits->push_back(MakeLimits(row));
    }
    return limits;
  }();
  static const AlgorithmLimits kNone;
  const AlgorithmRow* row = RowOf(algorithm);
  return row == nullptr ? kNone : (*kLimits)[row - tables::kAlgorithms];
}

ChunkerOptions DefaultOptions(Algorithm algorithm) {
  // The fields of other algorithms keep ChunkerOptions' own defaults (their
  // algorithms' defaults), so that switching the algorithm of a filled-in
  // struct stays valid.
  ChunkerOptions options;
  options.algorithm = algorithm;
  const AlgorithmRow* row = RowOf(algorithm);
  if (row == nullptr) return options;
  for (int p = 0; p < kParameterCount; ++p) {
    const tables::Range& range = RangeIn(*row, p);
    if (range.present) {
      Set(static_cast<Parameter>(p), range.default_value, &options);
    }
  }
  return options;
}

absl::StatusOr<ChunkerOptions> Preset(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (const tables::PresetRow& preset : tables::kPresets) {
    names.push_back(preset.name);
    if (preset.name != name) continue;
    ChunkerOptions options = DefaultOptions(preset.algorithm);
    for (int p = 0; p < kParameterCount; ++p) {
      if (preset.set[p]) {
        Set(static_cast<Parameter>(p), preset.values[p], &options);
      }
    }
    return options;
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown preset \"", name, "\"; expected one of ",
      absl::StrJoin(names, ", ")));
}

absl::Status ValidateOptions(const ChunkerOptions& options) {
  const AlgorithmRow* row = RowOf(options.algorithm);
  if (row == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("algorithm ", static_cast<int>(options.algorithm),
                     " is not one of ", NumberedAlgorithms()));
  }
  // Every field the algorithm reads, and the internal ones it keeps (fixed's
  // min_size and max_size do not shape the chunks, but a value out of range
  // is still a caller's mistake).
  for (int p = 0; p < kParameterCount; ++p) {
    const tables::Range& range = RangeIn(*row, p);
    const auto parameter = static_cast<Parameter>(p);
    if (!range.present) continue;
    if (absl::Status s = CheckRange(parameter, Get(options, parameter), range);
        !s.ok()) {
      return s;
    }
  }
  return CheckRules(options, *row);
}

}  // namespace chunkd::chunking
