#include "clients/cli/estimate_sets.h"

#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "chunkd/chunker.h"
#include "chunkd/tables.h"
#include "clients/cli/args.h"

namespace chunkd::cli {
namespace {

using chunking::tables::kParameters;
using chunking::tables::ParameterRow;

// The flag name of the ChunkingParams field `parameter` ("min" for
// "min_size").
absl::string_view FlagOf(absl::string_view parameter) {
  for (const ParameterRow& p : kParameters) {
    if (parameter == p.name) return p.flag;
  }
  return parameter;
}

// Every KEY a SPEC may have: the chunking flags, then preset.
std::vector<std::string> AllKeys() {
  std::vector<std::string> keys;
  for (const ParameterRow& p : kParameters) keys.push_back(p.flag);
  keys.push_back("preset");
  return keys;
}

bool IsParameterKey(absl::string_view key) {
  for (const ParameterRow& p : kParameters) {
    if (key == p.flag) return true;
  }
  return false;
}

// The KEYs `algorithm` takes, besides preset: "min, avg, max, level, seed".
std::string KeysOf(chunking::Algorithm algorithm) {
  std::vector<std::string> keys;
  for (absl::string_view parameter : chunking::ParametersOf(algorithm)) {
    keys.push_back(std::string(FlagOf(parameter)));
  }
  return absl::StrJoin(keys, ", ");
}

// The algorithm of SPEC (the text before ':').
absl::StatusOr<chunking::Algorithm> SetAlgorithm(absl::string_view name) {
  absl::StatusOr<chunking::Algorithm> algorithm =
      chunking::ParseAlgorithm(name);
  if (!algorithm.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown algorithm \"", name, "\" (known: ",
                     absl::StrJoin(AlgorithmNames(), ", "), ")"));
  }
  return *algorithm;
}

// Checks the preset `name` against the set's algorithm.
absl::Status CheckPreset(absl::string_view name,
                         chunking::Algorithm algorithm) {
  absl::StatusOr<chunking::ChunkerOptions> preset = chunking::Preset(name);
  if (!preset.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown preset \"", name, "\" (presets: ",
                     absl::StrJoin(PresetNames(), ", "), ")"));
  }
  if (preset->algorithm != algorithm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preset ", name, " is a ", chunking::AlgorithmName(preset->algorithm),
        " preset, not ", chunking::AlgorithmName(algorithm)));
  }
  return absl::OkStatus();
}

// The KEY=VALUE list after ':' as the command-line words of `chunk`
// ("--min", "4096", ...), each key checked against `algorithm`.
absl::StatusOr<std::vector<std::string>> SetWords(
    absl::string_view list, chunking::Algorithm algorithm) {
  std::vector<std::string> words;
  std::set<std::string, std::less<>> seen;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = kv.first;
    if (key.empty() || item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected KEY=VALUE, got \"", item, "\""));
    }
    if (key != "preset" && !IsParameterKey(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown key \"", key, "\" (keys: ",
                       absl::StrJoin(AllKeys(), ", "), ")"));
    }
    if (!seen.insert(std::string(key)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("key ", key, " given twice"));
    }
    const absl::string_view name = chunking::AlgorithmName(algorithm);
    if (key == "preset") {
      if (absl::Status s = CheckPreset(kv.second, algorithm); !s.ok()) {
        return s;
      }
    } else if (!AlgorithmTakesFlag(algorithm, key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " does not take ", key, " (", name, " takes ",
          KeysOf(algorithm), ")"));
    }
    words.push_back(absl::StrCat("--", key));
    words.push_back(std::string(kv.second));
  }
  return words;
}

// The set's ChunkFlags, read by `chunk`'s parser from `words`.
absl::StatusOr<ChunkFlags> SetFlags(const std::vector<std::string>& words) {
  std::vector<FlagSpec> specs = ChunkFlagSpecs();
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, specs);
  if (!args.ok()) return args.status();
  absl::StatusOr<ChunkFlags> flags = ChunkFlagsFromArgs(*args);
  if (!flags.ok()) {
    // "--min: expected ..." is the key's problem: "min: expected ...".
    return absl::InvalidArgumentError(
        absl::StripPrefix(flags.status().message(), "--"));
  }
  return flags;
}

absl::StatusOr<EstimateSetFlag> ParseSet(absl::string_view spec) {
  const size_t colon = spec.find(':');
  absl::StatusOr<chunking::Algorithm> algorithm =
      SetAlgorithm(spec.substr(0, colon));
  if (!algorithm.ok()) return algorithm.status();
  std::vector<std::string> words = {
      "--algorithm", std::string(chunking::AlgorithmName(*algorithm))};
  if (colon != absl::string_view::npos) {
    absl::StatusOr<std::vector<std::string>> more =
        SetWords(spec.substr(colon + 1), *algorithm);
    if (!more.ok()) return more.status();
    words.insert(words.end(), more->begin(), more->end());
  }
  absl::StatusOr<ChunkFlags> flags = SetFlags(words);
  if (!flags.ok()) return flags.status();
  return EstimateSetFlag{std::string(spec), *std::move(flags)};
}

}  // namespace

absl::StatusOr<EstimateSetFlag> ParseEstimateSet(absl::string_view spec) {
  absl::StatusOr<EstimateSetFlag> set = ParseSet(spec);
  if (!set.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set \"", spec, "\": ", set.status().message()));
  }
  return set;
}

absl::StatusOr<std::vector<EstimateSetFlag>> ParseEstimateSets(
    const std::vector<std::string>& specs) {
  if (specs.empty()) {
    return absl::InvalidArgumentError(
        "missing --set SPEC: give 1 to 16 parameter sets, e.g. --set "
        "fastcdc:avg=16384");
  }
  if (specs.size() > kMaxEstimateSets) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set given ", specs.size(), " times; at most ",
                     kMaxEstimateSets, " sets"));
  }
  std::vector<EstimateSetFlag> sets;
  for (const std::string& spec : specs) {
    absl::StatusOr<EstimateSetFlag> set = ParseEstimateSet(spec);
    if (!set.ok()) return set.status();
    sets.push_back(*std::move(set));
  }
  return sets;
}

}  // namespace chunkd::cli
