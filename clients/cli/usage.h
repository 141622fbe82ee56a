// The help texts of chunkctl's commands (`chunkctl COMMAND --help`), and of
// the groups of flags several commands share. The lists of algorithms and
// presets are the library's (the table, proto/chunkd/v1/tables.json).
//
// Thread safety: constants and pure functions.
#ifndef CHUNKD_CLIENTS_CLI_USAGE_H_
#define CHUNKD_CLIENTS_CLI_USAGE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace chunkd::cli {

extern const absl::string_view kMainUsage;
extern const absl::string_view kChunkUsage;
extern const absl::string_view kConnectionUsage;
extern const absl::string_view kProgressUsage;
extern const absl::string_view kChunkRetriesUsage;
extern const absl::string_view kChunkOutputUsage;
extern const absl::string_view kLocalUsage;
extern const absl::string_view kDedupUsage;
extern const absl::string_view kDedupOutputUsage;
extern const absl::string_view kDedupChunkNote;
extern const absl::string_view kEstimateUsage;
extern const absl::string_view kEstimateSetUsage;
extern const absl::string_view kEstimateOutputUsage;
extern const absl::string_view kInfoUsage;
extern const absl::string_view kSizeUsage;

// `chunkctl bench --help`.
std::string BenchUsage();

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_USAGE_H_
