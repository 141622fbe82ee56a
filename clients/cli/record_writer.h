// Prints chunk records, one per line, in the format `chunkctl chunk` promises
// (docs/cli.md):
//
//   text  offset,length,fingerprint_hex   (offset,length with --fingerprint
//         none)
//   json  {"offset":0,"length":19186,"fingerprint":"0f9e..."}
//         (no "fingerprint" key with --fingerprint none)
//
// --local and --server both print through this class, which is what makes
// their output byte-identical for identical chunks.
//
// Thread safety: not thread-safe; copy and move disabled.
#ifndef CHUNKD_CLIENTS_CLI_RECORD_WRITER_H_
#define CHUNKD_CLIENTS_CLI_RECORD_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chunkd::cli {

// --format: text (for chunk, the CSV lines) or JSON Lines.
enum class OutputFormat { kText, kJson };

// "text", "csv" (another name of text) or "json"; INVALID_ARGUMENT otherwise.
absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view name);

// The error of a write to an output whose reader has gone (EPIPE: `| head`).
// chunkctl then stops at once and silently, exiting with 141 as a process
// killed by SIGPIPE would (docs/cli.md).
absl::Status BrokenPipeError();
bool IsBrokenPipe(const absl::Status& status);

// The error of a failed write to an output, from errno `error`:
// BrokenPipeError() for EPIPE, else UNAVAILABLE naming the failure.
absl::Status WriteError(int error);

class RecordWriter {
 public:
  // REQUIRES: `out` outlives the writer.
  RecordWriter(std::FILE* out, OutputFormat format, bool with_fingerprint);

  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Buffers one record; `fingerprint` is the binary digest (ignored without
  // fingerprints).
  void Add(uint64_t offset, uint32_t length, absl::string_view fingerprint);

  // Writes the buffered records and flushes `out`, so records appear as they
  // become final. An error is WriteError()'s.
  absl::Status Flush();

 private:
  std::FILE* const out_;
  const OutputFormat format_;
  const bool with_fingerprint_;
  std::string buffer_;
};

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_RECORD_WRITER_H_
