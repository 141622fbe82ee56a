// What `chunkctl estimate` prints (docs/cli.md, "chunkctl estimate"): the
// text tables or the JSON object of one estimate, from one report whether
// the estimate ran here (--local, the Estimator's results) or on a server
// (the Estimate RPC's EstimateResult, read by ReportFromProto). chunkd-client
// and chunkd-go print the same bytes for the same report.
//
// Thread safety: plain values and pure functions.
#ifndef CHUNKD_CLIENTS_CLI_ESTIMATE_OUTPUT_H_
#define CHUNKD_CLIENTS_CLI_ESTIMATE_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.pb.h"
#include "estimate/estimator.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::cli {

// One set's estimate.
struct EstimateSetReport {
  estimate::SetResult result;
  // With a namespace: its bytes and chunks among the set's unique ones.
  std::optional<uint64_t> namespace_bytes;
  std::optional<uint64_t> namespace_chunks;
};

// One estimate: a report per set, in the order of the --set flags.
struct EstimateReport {
  std::vector<EstimateSetReport> sets;
  uint64_t total_bytes = 0;
  uint64_t files = 0;
  uint32_t sample_rate = 1;
  fingerprint::Kind fingerprint = fingerprint::Kind::kXxh128;
  // True when a namespace was compared: the text gets namespace_bytes.
  bool with_namespace = false;
};

// The server's result as a report; `with_namespace` when one was compared.
// An algorithm or fingerprint this chunkctl does not know is a protocol
// error (INTERNAL).
absl::StatusOr<EstimateReport> ReportFromProto(
    const chunkd::v1::EstimateResult& result, bool with_namespace);

// The chunking the server ran: chunking::DefaultOptions of its algorithm
// with every field it set. INTERNAL for an algorithm this chunkctl does not
// know.
absl::StatusOr<chunking::ChunkerOptions> OptionsFromProto(
    const chunkd::v1::ChunkingParams& params);

// The value of the ChunkerOptions field the table calls `parameter`
// ("min_size", "seq_mode" as its number, ...); 0 for another name.
uint64_t ParameterValue(const chunking::ChunkerOptions& options,
                        absl::string_view parameter);

// The two tables and the TOTAL line, each line ending in a newline.
std::string EstimateText(const EstimateReport& report);

// The JSON object on one line, ending in a newline.
std::string EstimateJson(const EstimateReport& report);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_ESTIMATE_OUTPUT_H_
