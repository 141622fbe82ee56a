#include "clients/cli/chunk_options.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chunkd::cli {
namespace {

// The help of the flags of the ChunkingParams fields.
constexpr absl::string_view kParameterFlagsHelp =
    R"(  --min N              smallest chunk in bytes, except the last
  --avg N              target average chunk size in bytes; fixed: the size
                       of every chunk but the last
  --max N              largest chunk in bytes
  --level L            fastcdc: normalization level 0..3 (default 1)
  --seed S             fastcdc: XORed into the Gear table (default 0)
  --seq-mode MODE      seqcdc: increasing (default) or decreasing
  --seq-length N       seqcdc: monotonic steps that make a cut (default 5)
  --skip-trigger N     seqcdc: opposing steps that trigger a jump (default 50)
  --skip-size N        seqcdc: bytes skipped by a jump (default 512)
  --horizon N          repmaxcdc: bytes past --min searched for the best cut
                       (default 2097152; 0 gives chunks of --min)
  --polynomial P       rabin: irreducible polynomial of degree 53, hex 0x...
                       or decimal (default 0x3DA3358B4DC173; restic keeps a
                       repository's in its config)
  --fingerprint NAME   sha256 (default), xxh128 or none
)";

constexpr uint64_t kMaxUint32 = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kMaxUint64 = std::numeric_limits<uint64_t>::max();

absl::Status ParseUint32Flag(const ParsedArgs& args, absl::string_view name,
                             std::optional<uint32_t>* out) {
  std::optional<std::string> text = args.Get(name);
  if (!text.has_value()) return absl::OkStatus();
  absl::StatusOr<uint64_t> value = ParseUint(name, *text, kMaxUint32);
  if (!value.ok()) return value.status();
  *out = static_cast<uint32_t>(*value);
  return absl::OkStatus();
}

absl::StatusOr<chunking::SeqMode> ParseSeqMode(absl::string_view text) {
  if (text == "increasing") return chunking::SeqMode::kIncreasing;
  if (text == "decreasing") return chunking::SeqMode::kDecreasing;
  return absl::InvalidArgumentError(absl::StrCat(
      "--seq-mode: expected increasing or decreasing, got \"", text, "\""));
}

// Each chunking flag and the ChunkingParams field it sets are the table's
// (chunkd/tables.h); which algorithm reads which field is
// chunking::ParametersOf's, as the server checks it.
using chunking::tables::kParameters;
using chunking::tables::ParameterRow;

// "--min, --avg and --max": the flags `algorithm` takes.
std::string FlagsOf(chunking::Algorithm algorithm) {
  std::vector<std::string> flags;
  for (const ParameterRow& p : kParameters) {
    if (chunking::TakesParameter(algorithm, p.name)) {
      flags.push_back(absl::StrCat("--", p.flag));
    }
  }
  if (flags.size() == 1) return absl::StrCat("only ", flags[0]);
  const std::string last = flags.back();
  flags.pop_back();
  return absl::StrCat(absl::StrJoin(flags, ", "), " and ", last);
}

// Fills the fields a preset defines for its algorithm, unless given by a
// flag: the sizes (--local keeps them even where the algorithm does not read
// one; ToProto never sends those) and every other field the algorithm takes.
void ApplyPreset(const chunking::ChunkerOptions& preset, ChunkFlags* flags) {
  auto fill = [](bool applies, auto& field, auto value) {
    if (applies && !field.has_value()) field = value;
  };
  auto takes = [&preset](absl::string_view parameter) {
    return chunking::TakesParameter(preset.algorithm, parameter);
  };
  fill(true, flags->min_size, preset.min_size);
  fill(true, flags->avg_size, preset.avg_size);
  fill(true, flags->max_size, preset.max_size);
  fill(takes("normalization_level"), flags->normalization_level,
       preset.normalization_level);
  fill(takes("seed"), flags->seed, preset.seed);
  fill(takes("seq_mode"), flags->seq_mode, preset.seq_mode);
  fill(takes("seq_length"), flags->seq_length, preset.seq_length);
  fill(takes("skip_trigger"), flags->skip_trigger, preset.skip_trigger);
  fill(takes("skip_size"), flags->skip_size, preset.skip_size);
  fill(takes("horizon_size"), flags->horizon_size, preset.horizon_size);
  fill(takes("polynomial"), flags->polynomial, preset.polynomial);
}

std::string MakeChunkFlagsHelp() {
  std::vector<std::string> algorithms = AlgorithmNames();
  std::string takes;
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const absl::string_view name = chunking::AlgorithmName(algorithm);
    std::string line = absl::StrCat("  ", name);
    line.resize(std::max<size_t>(line.size() + 1, 13), ' ');
    std::vector<std::string> flags;
    for (const ParameterRow& p : kParameters) {
      if (chunking::TakesParameter(algorithm, p.name)) {
        flags.push_back(absl::StrCat("--", p.flag));
      }
    }
    absl::StrAppend(&takes, line, absl::StrJoin(flags, " "), "\n");
  }
  algorithms.front() += " (default)";
  return absl::StrCat(
      "Chunking options (unset ones take the algorithm's defaults; see "
      "`chunkctl info`):\n"
      "  --algorithm NAME     ",
      WrapHelp(OrList(algorithms)), "\n  --preset NAME        ",
      WrapHelp(absl::StrCat(OrList(PresetNames()),
                           "; flags given alongside override the preset's "
                           "values")),
      "\n", kParameterFlagsHelp,
      "Each algorithm takes only its own flags; any other is a usage error:\n",
      takes);
}

}  // namespace

std::string OrList(const std::vector<std::string>& items) {
  if (items.size() < 2) return absl::StrJoin(items, "");
  return absl::StrCat(
      absl::StrJoin(items.begin(), items.end() - 1, ", "), " or ",
      items.back());
}

std::string WrapHelp(absl::string_view text) {
  std::string out;
  size_t column = 23;
  for (absl::string_view word : absl::StrSplit(text, ' ')) {
    if (column + 1 + word.size() > 77 && column > 23) {
      absl::StrAppend(&out, "\n", std::string(23, ' '));
      column = 23;
    } else if (!out.empty()) {
      out += ' ';
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
  }
  return out;
}

std::vector<std::string> AlgorithmNames() {
  std::vector<std::string> names;
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    names.push_back(std::string(chunking::AlgorithmName(algorithm)));
  }
  return names;
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const chunking::tables::PresetRow& preset : chunking::tables::kPresets) {
    names.push_back(preset.name);
  }
  return names;
}

bool AlgorithmTakesFlag(chunking::Algorithm algorithm, absl::string_view flag) {
  for (const ParameterRow& p : kParameters) {
    if (flag == p.flag) return chunking::TakesParameter(algorithm, p.name);
  }
  return false;
}

std::vector<FlagSpec> ChunkFlagSpecs() {
  return {{"algorithm"},  {"preset"},       {"min"},       {"avg"},
          {"max"},        {"level"},        {"seed"},      {"seq-mode"},
          {"seq-length"}, {"skip-trigger"}, {"skip-size"}, {"horizon"},
          {"polynomial"}, {"fingerprint"}};
}

absl::string_view ChunkFlagsHelp() {
  static const std::string* const kHelp = new std::string(MakeChunkFlagsHelp());
  return *kHelp;
}

absl::StatusOr<ChunkFlags> ChunkFlagsFromArgs(const ParsedArgs& args) {
  ChunkFlags flags;
  if (std::optional<std::string> name = args.Get("algorithm")) {
    absl::StatusOr<chunking::Algorithm> algorithm =
        chunking::ParseAlgorithm(*name);
    if (!algorithm.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--algorithm: ", algorithm.status().message()));
    }
    flags.algorithm = *algorithm;
  }
  for (auto [name, field] :
       {std::pair{"min", &flags.min_size}, std::pair{"avg", &flags.avg_size},
        std::pair{"max", &flags.max_size},
        std::pair{"level", &flags.normalization_level},
        std::pair{"seq-length", &flags.seq_length},
        std::pair{"skip-trigger", &flags.skip_trigger},
        std::pair{"skip-size", &flags.skip_size},
        std::pair{"horizon", &flags.horizon_size}}) {
    if (absl::Status s = ParseUint32Flag(args, name, field); !s.ok()) return s;
  }
  if (std::optional<std::string> text = args.Get("seed")) {
    absl::StatusOr<uint64_t> seed = ParseUint("seed", *text, kMaxUint64);
    if (!seed.ok()) return seed.status();
    flags.seed = *seed;
  }
  if (std::optional<std::string> text = args.Get("polynomial")) {
    absl::StatusOr<uint64_t> polynomial =
        ParseUint("polynomial", *text, kMaxUint64);
    if (!polynomial.ok()) return polynomial.status();
    flags.polynomial = *polynomial;
  }
  if (std::optional<std::string> text = args.Get("seq-mode")) {
    absl::StatusOr<chunking::SeqMode> mode = ParseSeqMode(*text);
    if (!mode.ok()) return mode.status();
    flags.seq_mode = *mode;
  }
  if (absl::Status s = ParseFlag(args, "fingerprint", fingerprint::ParseKind,
                                 &flags.fingerprint);
      !s.ok()) {
    return s;
  }

  // Which flags apply depends on the algorithm in effect: the one given, else
  // the preset's, else fastcdc. Only flags given explicitly are checked; a
  // preset fills in only fields of its own algorithm.
  chunking::Algorithm algorithm =
      flags.algorithm.value_or(chunking::Algorithm::kFastCdc);
  std::optional<chunking::ChunkerOptions> preset;
  if (std::optional<std::string> name = args.Get("preset")) {
    absl::StatusOr<chunking::ChunkerOptions> options = chunking::Preset(*name);
    if (!options.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--preset: ", options.status().message()));
    }
    if (flags.algorithm.has_value() && *flags.algorithm != options->algorithm) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--preset ", *name, " is a ",
          chunking::AlgorithmName(options->algorithm),
          " preset, but --algorithm is ", chunking::AlgorithmName(algorithm)));
    }
    flags.preset = *name;
    algorithm = options->algorithm;
    preset = *options;
  }
  for (const ParameterRow& use : kParameters) {
    if (args.Has(use.flag) && !AlgorithmTakesFlag(algorithm, use.flag)) {
      const absl::string_view name = chunking::AlgorithmName(algorithm);
      std::string source;
      if (preset.has_value() && !flags.algorithm.has_value()) {
        source = absl::StrCat(" (the algorithm of --preset ",
                              *args.Get("preset"), ")");
      } else if (!flags.algorithm.has_value()) {
        source = " (the default --algorithm)";
      }
      return absl::InvalidArgumentError(
          absl::StrCat("--", use.flag, " does not apply to ", name, source,
                       "; ", name, " takes ", FlagsOf(algorithm)));
    }
  }
  if (preset.has_value()) {
    flags.algorithm = preset->algorithm;
    ApplyPreset(*preset, &flags);
  }
  return flags;
}

chunking::Algorithm EffectiveAlgorithm(const ChunkFlags& flags) {
  return flags.algorithm.value_or(chunking::Algorithm::kFastCdc);
}

fingerprint::Kind EffectiveFingerprint(const ChunkFlags& flags) {
  return flags.fingerprint.value_or(fingerprint::Kind::kSha256);
}

chunking::ChunkerOptions ToChunkerOptions(const ChunkFlags& flags) {
  chunking::ChunkerOptions options =
      chunking::DefaultOptions(EffectiveAlgorithm(flags));
  options.algorithm = EffectiveAlgorithm(flags);
  if (flags.min_size) options.min_size = *flags.min_size;
  if (flags.avg_size) options.avg_size = *flags.avg_size;
  if (flags.max_size) options.max_size = *flags.max_size;
  if (flags.normalization_level) {
    options.normalization_level = *flags.normalization_level;
  }
  if (flags.seed) options.seed = *flags.seed;
  if (flags.seq_mode) options.seq_mode = *flags.seq_mode;
  if (flags.seq_length) options.seq_length = *flags.seq_length;
  if (flags.skip_trigger) options.skip_trigger = *flags.skip_trigger;
  if (flags.skip_size) options.skip_size = *flags.skip_size;
  if (flags.horizon_size) options.horizon_size = *flags.horizon_size;
  if (flags.polynomial) options.polynomial = *flags.polynomial;
  return options;
}

absl::Status Validate(const ChunkFlags& flags) {
  return chunking::ValidateOptions(ToChunkerOptions(flags));
}

void ToProto(const ChunkFlags& flags, chunkd::v1::ChunkingParams* params) {
  if (flags.algorithm) {
    // The API's numbers are the library's (chunkd.proto, Algorithm).
    params->set_algorithm(
        static_cast<chunkd::v1::Algorithm>(static_cast<int>(*flags.algorithm)));
  }
  const chunking::Algorithm algorithm = EffectiveAlgorithm(flags);
  auto given = [algorithm](const auto& field, absl::string_view flag) {
    return field.has_value() && AlgorithmTakesFlag(algorithm, flag);
  };
  if (given(flags.min_size, "min")) params->set_min_size(*flags.min_size);
  if (given(flags.avg_size, "avg")) params->set_avg_size(*flags.avg_size);
  if (given(flags.max_size, "max")) params->set_max_size(*flags.max_size);
  if (given(flags.normalization_level, "level")) {
    params->set_normalization_level(*flags.normalization_level);
  }
  if (given(flags.seed, "seed")) params->set_seed(*flags.seed);
  if (given(flags.seq_mode, "seq-mode")) {
    params->set_seq_mode(*flags.seq_mode == chunking::SeqMode::kDecreasing
                             ? chunkd::v1::SEQ_CDC_MODE_DECREASING
                             : chunkd::v1::SEQ_CDC_MODE_INCREASING);
  }
  if (given(flags.seq_length, "seq-length")) {
    params->set_seq_length(*flags.seq_length);
  }
  if (given(flags.skip_trigger, "skip-trigger")) {
    params->set_skip_trigger(*flags.skip_trigger);
  }
  if (given(flags.skip_size, "skip-size")) {
    params->set_skip_size(*flags.skip_size);
  }
  if (given(flags.horizon_size, "horizon")) {
    params->set_horizon_size(*flags.horizon_size);
  }
  if (given(flags.polynomial, "polynomial")) {
    params->set_polynomial(*flags.polynomial);
  }
}

chunkd::v1::FingerprintAlgorithm ToProtoFingerprint(const ChunkFlags& flags) {
  if (!flags.fingerprint) return chunkd::v1::FINGERPRINT_ALGORITHM_UNSPECIFIED;
  switch (*flags.fingerprint) {
    case fingerprint::Kind::kSha256:
      return chunkd::v1::FINGERPRINT_ALGORITHM_SHA256;
    case fingerprint::Kind::kXxh128:
      return chunkd::v1::FINGERPRINT_ALGORITHM_XXH128;
    case fingerprint::Kind::kNone:
      return chunkd::v1::FINGERPRINT_ALGORITHM_NONE;
  }
  return chunkd::v1::FINGERPRINT_ALGORITHM_UNSPECIFIED;
}

std::string HintsName(chunkd::v1::HintTest test) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(chunkd::v1::HintTest_Name(test), "HINT_TEST_"));
}

absl::StatusOr<chunkd::v1::HintTest> ParseHints(absl::string_view name) {
  const std::string wanted = absl::AsciiStrToLower(name);
  std::vector<std::string> names;
  for (int v = chunkd::v1::HintTest_MIN; v <= chunkd::v1::HintTest_MAX; ++v) {
    if (v == chunkd::v1::HINT_TEST_UNSPECIFIED ||
        !chunkd::v1::HintTest_IsValid(v)) {
      continue;
    }
    const auto test = static_cast<chunkd::v1::HintTest>(v);
    names.push_back(HintsName(test));
    if (names.back() == wanted) return test;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--hints '", name, "' is not one of: ", absl::StrJoin(names, ", ")));
}

}  // namespace chunkd::cli
