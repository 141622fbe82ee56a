// `chunkctl dedup`'s handling of one file: its Dedup stream and, with
// --retries N, up to N replays of the file from its start after a stream
// that failed with a transient error (docs/cli.md, "Dedup only").
//
// A replay is exact because every stream of a file carries the same
// stream_id (random per file and run): the server counts no reference twice
// or half, and its records of the replay say what one clean run would have
// said (docs/design.md, "Write tokens and idempotent retries"). So the
// totals DedupFile returns, and the index's counts, equal a single run's.
//
// Thread safety: DedupFile runs on the calling thread (plus the stream's
// writer thread); distinct calls share nothing but the stub.
#ifndef CHUNKD_CLIENTS_CLI_DEDUP_FILE_H_
#define CHUNKD_CLIENTS_CLI_DEDUP_FILE_H_

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "clients/cli/input_file.h"
#include "clients/cli/progress.h"
#include "clients/cli/remote.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::cli {

// The most --retries takes.
inline constexpr int kMaxDedupRetries = 100;

struct DedupFileOptions {
  // The stream's parameters; stream_id is DedupFile's to set.
  chunkd::v1::DedupParams params;
  fingerprint::Kind kind = fingerprint::Kind::kSha256;
  size_t message_size = 1 << 20;
  // The deadline of each attempt; zero for none.
  std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero();
  // How many times a failed stream is sent again (0: never), 0..100.
  int retries = 0;
  // The wait before the first replay; each further one doubles it, up to
  // max_backoff. Each wait is drawn from [half, all] of its value (jitter),
  // so that clients cut off together do not come back together.
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{4000};
};

// True for the errors after which DedupFile sends a file again:
// UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED, INTERNAL, and DEADLINE_EXCEEDED
// when `timeout_set` (a deadline of chunkctl's own --timeout). A status
// comes from FromGrpcStatus() or chunkctl's protocol checks (INTERNAL); a
// read error of the input (DATA_LOSS) or a summary that does not count
// every byte (DATA_LOSS) is final.
bool IsRetryable(const absl::Status& status, bool timeout_set);

// A fresh stream_id: "chunkctl-" and 32 random hex digits.
std::string RandomStreamId();

// Deduplicates the file `name` ("-" for stdin, only with retries == 0) as
// DedupRemotely does, opening it for each attempt. With retries > 0, sets
// params.stream_id to RandomStreamId() for every attempt of the file, and
// after a retryable failure (IsRetryable) prints one line on `err`
//   chunkctl: FILE: CODE_NAME: message; sending it again in S s (retry i
//   of N)
// waits, and sends the file again from its start. `progress_for` makes the
// progress display of an attempt's input. Returns the last attempt's error,
// or the file's totals.
absl::StatusOr<DedupTotals> DedupFile(
    chunkd::v1::ChunkService::StubInterface* stub,
    const DedupFileOptions& options, const std::string& name,
    absl::FunctionRef<std::unique_ptr<Progress>(InputFile*)> progress_for,
    std::FILE* err);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_DEDUP_FILE_H_
