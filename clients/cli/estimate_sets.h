// The --set SPEC of `chunkctl estimate` (docs/cli.md, "chunkctl estimate"):
// one chunking parameter set, "ALGO" or "ALGO:KEY=VALUE[,KEY=VALUE...]".
// KEY is a chunking flag's name without "--" (min, avg, max, level, seed,
// seq-mode, seq-length, skip-trigger, skip-size, horizon, polynomial) or
// preset; VALUE is what that flag of `chunk` takes. A preset fills the
// parameters no KEY gives, whatever the order. The values are read by the
// chunking flags' own parser (chunk_options.h), so a set means what the
// same flags mean to `chunk`; ranges are left to the Estimator (--local) or
// the server, which name the set.
//
// Thread safety: pure functions.
#ifndef CHUNKD_CLIENTS_CLI_ESTIMATE_SETS_H_
#define CHUNKD_CLIENTS_CLI_ESTIMATE_SETS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cli/chunk_options.h"

namespace chunkd::cli {

// The most --set flags one estimate takes (the Estimate RPC's limit).
inline constexpr size_t kMaxEstimateSets = 16;

// One parsed --set.
struct EstimateSetFlag {
  // SPEC exactly as given: the set's label.
  std::string label;
  // The chunking it names; the algorithm is always set, a preset applied.
  ChunkFlags flags;
};

// Parses one SPEC. INVALID_ARGUMENT "--set SPEC: PROBLEM" for an unknown
// algorithm, an unknown key, a key the algorithm does not take, a key given
// twice, a bad value, or a preset of another algorithm.
absl::StatusOr<EstimateSetFlag> ParseEstimateSet(absl::string_view spec);

// Parses every SPEC, in order; INVALID_ARGUMENT for no SPEC, more than
// kMaxEstimateSets, or the first SPEC ParseEstimateSet refuses.
absl::StatusOr<std::vector<EstimateSetFlag>> ParseEstimateSets(
    const std::vector<std::string>& specs);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_ESTIMATE_SETS_H_
