// The JSON outputs of `chunkctl dedup` and `chunkctl info`, in the shapes of
// docs/cli.md (their JSON Schema is docs/cli-output.schema.json); the chunk
// records' JSON is RecordWriter's.
//
// Thread safety: pure functions.
#ifndef CHUNKD_CLIENTS_CLI_JSON_OUTPUT_H_
#define CHUNKD_CLIENTS_CLI_JSON_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "chunkd/v1/chunkd.pb.h"
#include "clients/cli/remote.h"

namespace chunkd::cli {

// `text` as a JSON string, quotes included. Bytes that are not UTF-8 become
// U+FFFD; control characters are escaped.
std::string JsonString(absl::string_view text);

// `value` rounded to 6 decimals and printed without trailing zeros, as
// Python prints round(value, 6): "2.0", "1.333333", "0.0".
std::string JsonNumber(double value);

// The running deduplication ratio, bytes / unique_bytes, rounded to 6
// decimals and printed without trailing zeros ("2.0", "1.333333"); "null"
// while no byte is unique.
std::string JsonRatio(uint64_t bytes, uint64_t unique_bytes);

// One line of `dedup --json`, without the newline: a file's line when `file`
// is set, else the total line ("total":true). `totals` are the file's (or
// all files') counts, `running` the counts of all files so far (the ratio's).
std::string DedupJsonLine(const std::optional<std::string>& file,
                          const DedupTotals& totals,
                          const DedupTotals& running);

// `info --json`: one object, one key per line, ending in a newline.
std::string ServerInfoJson(const chunkd::v1::GetServerInfoResponse& info);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_JSON_OUTPUT_H_
