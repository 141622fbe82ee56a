// Cutter: one algorithm's cut function, shared by ReferenceChunks and
// StreamChunker so that both run literally the same code.
//
// A cut function answers one question: given the bytes from a chunk's start,
// how long is that chunk? It sees `avail` bytes from the chunk start and
// `context` bytes before it (the tail of the previous chunk; crc32's window
// reaches back up to 255 bytes). Its answer is final once avail >=
// final_size() — max_size() for every algorithm but repmaxcdc, which looks
// past its longest chunk — or when the stream ends at chunk_start + avail.
// The reference loop is then simply
//
//   for (pos = 0; pos < n; pos += len) len = Cut(data + pos, n - pos, pos, &h);
//
// Thread safety: a Cutter is immutable after construction; Cut() may be called
// from any number of threads.
#ifndef CHUNKD_CHUNKING_CUTTER_H_
#define CHUNKD_CHUNKING_CUTTER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"

namespace chunkd::chunking {

// Bytes of left context a caller keeps before each chunk start (fewer only at
// the start of the stream). Enough for every algorithm: crc32 needs 255.
inline constexpr size_t kContext = 256;

class Cutter {
 public:
  Cutter() = default;
  Cutter(const Cutter&) = delete;
  Cutter& operator=(const Cutter&) = delete;
  virtual ~Cutter() = default;

  // Returns the length of the chunk that starts at `chunk_start`, in
  // [1, min(avail, max_size())], and stores the algorithm's hash at the cut in
  // *hash (see Chunk::hash).
  // REQUIRES: avail >= 1; chunk_start[-context, avail) is readable;
  //   context >= min(kContext, bytes of the stream before chunk_start);
  //   avail >= final_size() or the stream ends at chunk_start + avail.
  virtual size_t Cut(const uint8_t* chunk_start, size_t avail, size_t context,
                     uint64_t* hash) const = 0;

  // The longest chunk this cutter produces (fixed: avg_size).
  virtual size_t max_size() const = 0;

  // The number of bytes after which a cut decision is final: max_size(),
  // except for algorithms that look ahead past their longest chunk.
  virtual size_t final_size() const { return max_size(); }
};

// The cutter for `options`. INVALID_ARGUMENT as ValidateOptions().
absl::StatusOr<std::unique_ptr<Cutter>> MakeCutter(
    const ChunkerOptions& options);

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_CUTTER_H_
