// MakeCutter and ReferenceChunks: the specification loop (docs/design.md,
// "Chunking algorithms").

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"

namespace chunkd::chunking {

absl::StatusOr<std::unique_ptr<Cutter>> MakeCutter(
    const ChunkerOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  // The cutter comes from the algorithm's driver file (drivers/registry.cc).
  return NewCutter(options);
}

std::vector<Chunk> ReferenceChunks(const ChunkerOptions& options,
                                   absl::Span<const uint8_t> data) {
  std::vector<Chunk> chunks;
  absl::StatusOr<std::unique_ptr<Cutter>> cutter = MakeCutter(options);
  // Invalid options break the REQUIRES; without aborting, the answer is "no
  // chunks", which no valid call can return for non-empty data.
  if (!cutter.ok()) return chunks;
  // Every byte before a chunk is its context: the whole stream is in memory.
  size_t pos = 0;
  while (pos < data.size()) {
    uint64_t hash = 0;
    const size_t length =
        (*cutter)->Cut(data.data() + pos, data.size() - pos, pos, &hash);
    chunks.push_back(Chunk{pos, static_cast<uint32_t>(length), hash});
    pos += length;
  }
  return chunks;
}

}  // namespace chunkd::chunking
