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
  // All of them together: sha256 hashes several chunks at once.
  std::vector<absl::string_view> data;
  data.reserve(chunks.size());
  for (const chunking::Chunk& chunk : chunks) {
    data.push_back(chunker.ChunkData(chunk));
  }
  const std::vector<std::string> digests = fingerprint::DigestMany(kind, data);
  for (size_t i = 0; i < chunks.size(); ++i) {
    out->Add(chunks[i].offset, chunks[i].length, digests[i]);
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
