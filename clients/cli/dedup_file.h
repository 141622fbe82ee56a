// `chunkctl dedup`'s handling of one file: its Dedup stream and, with
// --retries N, up to N replays of the file from its start after a stream
// that failed with a transient error (replay.h; docs/cli.md, "Replays").
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
#include "clients/cli/replay.h"

namespace chunkd::cli {

// The params' stream_id is DedupFile's to set.
using DedupFileOptions = FileStreamOptions<chunkd::v1::DedupParams>;

// A fresh stream_id: "chunkctl-" and 32 random hex digits.
std::string RandomStreamId();

// Deduplicates the file `name` ("-" for stdin, only without replays) as
// DedupRemotely does, opening it for each attempt. With replays, sets
// params.stream_id to RandomStreamId() for every attempt of the file, and
// sends the file again from its start after a retryable failure, announced
// on `err` (ReplayFile()). `progress_for` makes the progress display of an
// attempt's input. Returns the last attempt's error, or the file's totals.
absl::StatusOr<DedupTotals> DedupFile(
    chunkd::v1::ChunkService::StubInterface* stub,
    const DedupFileOptions& options, const std::string& name,
    absl::FunctionRef<std::unique_ptr<Progress>(InputFile*)> progress_for,
    std::FILE* err);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_DEDUP_FILE_H_
