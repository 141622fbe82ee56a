#include "clients/cli/local_chunk.h"

#include <memory>
#include <string>
#include <vector>

namespace chunkd::cli {
namespace {

absl::Status AddChunks(const chunking::StreamChunker& chunker,
                       fingerprint::Kind kind,
                       const std::vector<chunking::Chunk>& chunks,
                       RecordWriter* out) {
  std::string digest;
  for (const chunking::Chunk& chunk : chunks) {
    digest = fingerprint::Digest(kind, chunker.ChunkData(chunk));
    out->Add(chunk.offset, chunk.length, digest);
  }
  return out->Flush();
}

}  // namespace

absl::Status ChunkLocally(const chunking::ChunkerOptions& options,
                          fingerprint::Kind kind, size_t piece_size,
                          InputFile* input, RecordWriter* out,
                          const chunking::EngineOptions& engine) {
  absl::StatusOr<std::unique_ptr<chunking::StreamChunker>> chunker =
      chunking::StreamChunker::Create(options, engine);
  if (!chunker.ok()) return chunker.status();
  std::string piece(piece_size, '\0');
  std::vector<chunking::Chunk> chunks;
  while (true) {
    absl::StatusOr<size_t> n = input->Read(piece.data(), piece.size());
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    chunks.clear();
    (*chunker)->Append(absl::string_view(piece.data(), *n), &chunks);
    if (absl::Status s = AddChunks(**chunker, kind, chunks, out); !s.ok()) {
      return s;
    }
  }
  chunks.clear();
  (*chunker)->Finish(&chunks);
  return AddChunks(**chunker, kind, chunks, out);
}

}  // namespace chunkd::cli
