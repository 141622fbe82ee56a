// The chunking and fingerprint options shared by `chunkctl chunk` and
// `chunkctl dedup`, and their two destinations: the library's ChunkerOptions
// (--local) and the proto's ChunkingParams (--server).
//
// Both destinations must describe the same chunking function, or --local and
// --server would print different chunks. The rule: a field given on the
// command line (directly or through --preset) is set in the request; a field
// not given stays unset, and the server fills it from the algorithm's defaults
// exactly as chunking::DefaultOptions() fills it for --local.
//
// Each algorithm reads only some fields (chunking::ParametersOf, from the
// table proto/chunkd/v1/tables.json; `chunkctl chunk --help` lists them),
// and the server refuses a request that sets any other (INVALID_ARGUMENT
// naming it).
// A flag the algorithm does not take is a usage error (for --local too), and
// ToProto never sends such a field, not even from a preset (seqcdc-8k's
// avg_size): --local keeps the preset's value, which changes no chunk.
//
// Thread safety: plain values and pure functions.
#ifndef CHUNKD_CLIENTS_CLI_CHUNK_OPTIONS_H_
#define CHUNKD_CLIENTS_CLI_CHUNK_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.pb.h"
#include "clients/cli/args.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::cli {

// Chunking and fingerprint options as given: nullopt means "not given".
struct ChunkFlags {
  std::optional<chunking::Algorithm> algorithm;
  std::optional<std::string> preset;
  std::optional<uint32_t> min_size;
  std::optional<uint32_t> avg_size;
  std::optional<uint32_t> max_size;
  std::optional<uint32_t> normalization_level;
  std::optional<uint64_t> seed;
  std::optional<chunking::SeqMode> seq_mode;
  std::optional<uint32_t> seq_length;
  std::optional<uint32_t> skip_trigger;
  std::optional<uint32_t> skip_size;
  std::optional<uint32_t> horizon_size;
  std::optional<uint64_t> polynomial;
  std::optional<fingerprint::Kind> fingerprint;
};

// True when `algorithm` reads the ChunkingParams field of the chunking flag
// named `flag` (without "--": "min", "level", "seq-mode", ...); see the table
// above. False for any other name.
bool AlgorithmTakesFlag(chunking::Algorithm algorithm, absl::string_view flag);

// The flags behind ChunkFlags: --algorithm, --preset, --min, --avg, --max,
// --level, --seed, --seq-mode, --seq-length, --skip-trigger, --skip-size,
// --horizon, --polynomial, --fingerprint.
std::vector<FlagSpec> ChunkFlagSpecs();

// The help text of those flags, for a command's usage: the algorithms,
// presets and the flags each algorithm takes, from the table.
absl::string_view ChunkFlagsHelp();

// The algorithms' names, in the table's order ("fastcdc", ...).
std::vector<std::string> AlgorithmNames();

// The presets' names, in the table's order.
std::vector<std::string> PresetNames();

// "a, b or c" (one item: itself).
std::string OrList(const std::vector<std::string>& items);

// `text` as the help of a flag: wrapped to lines of at most 77 columns, each
// line after the first indented to column 23, where the help of flags
// starts.
std::string WrapHelp(absl::string_view text);

// Reads the flags of ChunkFlagSpecs() from `args` and applies --preset: the
// preset's algorithm and parameters count as given unless a flag overrides
// them. INVALID_ARGUMENT for a bad value, an unknown preset, an --algorithm
// that contradicts the preset, or a flag the algorithm in effect does not take
// (AlgorithmTakesFlag), naming the flag and the algorithm.
// Does not check ranges; see Validate().
absl::StatusOr<ChunkFlags> ChunkFlagsFromArgs(const ParsedArgs& args);

// The algorithm in effect: the one given, else fastcdc (the server's default).
chunking::Algorithm EffectiveAlgorithm(const ChunkFlags& flags);

// The fingerprint in effect: the one given, else sha256 (the server's default).
fingerprint::Kind EffectiveFingerprint(const ChunkFlags& flags);

// chunking::DefaultOptions(EffectiveAlgorithm(flags)) with every given field
// replaced by its value.
chunking::ChunkerOptions ToChunkerOptions(const ChunkFlags& flags);

// chunking::ValidateOptions(ToChunkerOptions(flags)): INVALID_ARGUMENT names
// the field and its allowed range.
absl::Status Validate(const ChunkFlags& flags);

// Sets exactly the given fields of `params` that the algorithm in effect
// takes (the algorithm too only when given); leaves the others unset.
void ToProto(const ChunkFlags& flags, chunkd::v1::ChunkingParams* params);

// The proto's fingerprint algorithm; UNSPECIFIED when not given.
chunkd::v1::FingerprintAlgorithm ToProtoFingerprint(const ChunkFlags& flags);

// `chunkctl dedup --hints NAME`: the RapidCDC acceptance test named NAME,
// the proto's enum name without its HINT_TEST_ prefix, in any case: off, ff,
// ff_mt, ff_rwt, ff_rwt_fpt. INVALID_ARGUMENT names NAME and lists them.
absl::StatusOr<chunkd::v1::HintTest> ParseHints(absl::string_view name);

// The name ParseHints takes for `test` ("ff_rwt_fpt").
std::string HintsName(chunkd::v1::HintTest test);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_CHUNK_OPTIONS_H_
