// `chunkctl chunk --local`: the chunking library in-process, with no server.
//
// It prints exactly what `chunkctl chunk --server` prints for the same input
// and options, because the server runs the same library and both print
// through RecordWriter.
#ifndef CHUNKD_CLIENTS_CLI_LOCAL_CHUNK_H_
#define CHUNKD_CLIENTS_CLI_LOCAL_CHUNK_H_

#include <cstddef>

#include "absl/status/status.h"
#include "chunkd/chunker.h"
#include "clients/cli/input_file.h"
#include "clients/cli/record_writer.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::cli {

// Reads `input` in pieces of `piece_size` bytes, cuts it with a
// chunking::StreamChunker, fingerprints every chunk with `kind` and adds it to
// `out`, flushing after every piece. Memory: one piece plus the chunker's
// (max_size + piece_size + 256 bytes).
// REQUIRES: chunking::ValidateOptions(options).ok(), piece_size > 0.
// `engine` picks the stage-1 backend and the threads; the output is the same
// whatever it says.
absl::Status ChunkLocally(const chunking::ChunkerOptions& options,
                          fingerprint::Kind kind, size_t piece_size,
                          InputFile* input, RecordWriter* out,
                          const chunking::EngineOptions& engine = {});

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_LOCAL_CHUNK_H_
