// The bytes of Chunk and Dedup requests on their way in (docs/design.md,
// "The data path of one stream").
//
// A stream request (ChunkRequest, DedupRequest) is `params = 1` and
// `bytes data = 2`. gRPC hands it over as a ByteBuffer of slices of at most
// 64 KiB; protobuf would copy the data field into a fresh std::string per
// message, whose pages the kernel must fault in and zero. SplitRequest
// finds the data field in the slices instead, and hands everything else
// (params, unknown fields) to protobuf; the caller copies the data once,
// into a buffer from a BufferPool. One copy remains because the chunker
// cuts contiguous bytes in place, and the slices are too short for that.
//
// Thread safety: SplitRequest and CopyBytes are thread-safe; BufferPool is
// thread-safe.
#ifndef CHUNKD_SERVICE_REQUEST_BYTES_H_
#define CHUNKD_SERVICE_REQUEST_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace chunkd::service {

// A stream request's top-level fields, found in its wire bytes.
struct RequestParts {
  // Every field except `data`, in their order, as wire bytes: parsed as the
  // request message they give exactly what protobuf makes of the whole
  // message, apart from its data field.
  std::string others;
  // The data field as protobuf keeps it: the last occurrence (a later one
  // replaces an earlier one). Offset into the concatenated pieces.
  bool has_data = false;
  uint64_t data_offset = 0;
  uint64_t data_size = 0;
};

// Splits the message whose wire bytes are the concatenated `pieces` into
// *parts. Returns false when the message holds anything this split does not
// decide: groups, a field number 0, an invalid wire type, an over-long varint
// or length, a field running past the end. The caller then parses the whole
// message with protobuf, which accepts or rejects it, so that every message
// is accepted or rejected exactly as protobuf does.
bool SplitRequest(absl::Span<const absl::string_view> pieces,
                  RequestParts* parts);

// Appends the bytes [offset, offset + size) of the concatenated `pieces` to
// *out. REQUIRES: they lie within the pieces.
void CopyBytes(absl::Span<const absl::string_view> pieces, uint64_t offset,
               uint64_t size, std::string* out);

// Request data buffers for reuse: a buffer taken for each message's data and
// given back once it is processed keeps its pages, where a fresh allocation
// per message would fault in and zero new ones. Keeps at most `max_bytes`
// of capacity while nobody uses it, in buffers of at least kMinKeptBytes
// (smaller ones cost malloc little, and a moved-from buffer has none).
class BufferPool {
 public:
  static constexpr size_t kMinKeptBytes = size_t{64} << 10;

  explicit BufferPool(size_t max_bytes) : max_bytes_(max_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An empty buffer with room for `size` bytes: a kept one when there is.
  std::string Take(size_t size);

  // Keeps `buffer` for a later Take() while there is room, else frees it.
  void Give(std::string buffer);

  // Frees every kept buffer (the service is idle: memory goes back to the
  // OS).
  void Clear();

  // Capacity kept now.
  size_t kept_bytes() const;

 private:
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::vector<std::string> free_;  // guarded by mu_
  size_t kept_ = 0;                // their capacity; guarded by mu_
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_REQUEST_BYTES_H_
