// `chunkctl chunk --server`'s handling of its file: the Chunk stream and,
// with --retries N, up to N replays of the file from its start after a
// stream that failed with a transient error (replay.h; docs/cli.md,
// "Replays"). A replay prints only the records past those already printed,
// once it has repeated those exactly, so the output is that of one clean
// run: every chunk once, in order.
//
// Thread safety: ChunkFile runs on the calling thread (plus the stream's
// writer thread).
#ifndef CHUNKD_CLIENTS_CLI_CHUNK_FILE_H_
#define CHUNKD_CLIENTS_CLI_CHUNK_FILE_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "clients/cli/input_file.h"
#include "clients/cli/progress.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/replay.h"

namespace chunkd::cli {

using ChunkFileOptions = FileStreamOptions<chunkd::v1::ChunkParams>;

// Chunks the file `name` ("-" for stdin, only without replays) as
// ChunkRemotely does, into `out`, opening it for each attempt; with
// replays, sends it again from its start after a retryable failure,
// announced on `err` (ReplayFile()), and prints only what a replay adds
// (DeliveredRecords). `progress_for` makes the progress display of an
// attempt's input. Returns the last attempt's status.
absl::Status ChunkFile(
    chunkd::v1::ChunkService::StubInterface* stub,
    const ChunkFileOptions& options, const std::string& name,
    RecordWriter* out,
    absl::FunctionRef<std::unique_ptr<Progress>(InputFile*)> progress_for,
    std::FILE* err);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_CHUNK_FILE_H_
