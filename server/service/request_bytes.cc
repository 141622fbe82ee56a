#include "service/request_bytes.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace chunkd::service {
namespace {

// The data field: number 2, length-delimited.
constexpr uint32_t kDataField = 2;
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

// Reads the concatenation of the pieces front to back.
class Cursor {
 public:
  explicit Cursor(absl::Span<const absl::string_view> pieces)
      : pieces_(pieces) {
    for (absl::string_view p : pieces) size_ += p.size();
  }

  uint64_t offset() const { return offset_; }
  bool AtEnd() const { return offset_ == size_; }

  // The next byte; false at the end.
  bool Next(uint8_t* byte) {
    if (AtEnd()) return false;
    while (pos_ == pieces_[piece_].size()) {
      ++piece_;
      pos_ = 0;
    }
    *byte = static_cast<uint8_t>(pieces_[piece_][pos_]);
    ++pos_;
    ++offset_;
    return true;
  }

  // Skips `n` bytes; false (and nowhere) when fewer are left.
  bool Skip(uint64_t n) {
    if (n > size_ - offset_) return false;
    offset_ += n;
    while (n > 0) {
      const uint64_t here =
          std::min<uint64_t>(n, pieces_[piece_].size() - pos_);
      pos_ += here;
      n -= here;
      if (n > 0) {
        ++piece_;
        pos_ = 0;
      }
    }
    return true;
  }

  // A varint of at most `max_bytes` bytes; false when it is longer or cut
  // off by the end.
  bool Varint(int max_bytes, uint64_t* value) {
    *value = 0;
    for (int i = 0; i < max_bytes; ++i) {
      uint8_t byte;
      if (!Next(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7F) << (7 * i);
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

 private:
  const absl::Span<const absl::string_view> pieces_;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  size_t piece_ = 0;  // pieces_[piece_][pos_] is at offset_, unless AtEnd()
  size_t pos_ = 0;
};

// Skips the value of a field of wire type `wire_type` and says where a
// length-delimited one's bytes start and how many there are. False for the
// wire types SplitRequest leaves to protobuf, and for a value protobuf
// might read otherwise or reject.
bool SkipValue(Cursor* in, uint32_t wire_type, uint64_t* start,
               uint64_t* size) {
  uint64_t value = 0;
  switch (wire_type) {
    case kVarint:
      return in->Varint(10, &value);
    case kFixed64:
      return in->Skip(8);
    case kFixed32:
      return in->Skip(4);
    case kLengthDelimited:
      // protobuf reads a length in at most 5 bytes and below 2^31.
      if (!in->Varint(5, &value) ||
          value > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        return false;
      }
      *start = in->offset();
      *size = value;
      return in->Skip(value);
    default:  // groups (3, 4) and the invalid 6 and 7
      return false;
  }
}

}  // namespace

bool SplitRequest(absl::Span<const absl::string_view> pieces,
                  RequestParts* parts) {
  *parts = RequestParts();
  Cursor in(pieces);
  while (!in.AtEnd()) {
    const uint64_t field_start = in.offset();
    uint64_t tag = 0;
    if (!in.Varint(5, &tag) || tag > std::numeric_limits<uint32_t>::max()) {
      return false;
    }
    const uint32_t number = static_cast<uint32_t>(tag >> 3);
    const uint32_t wire_type = static_cast<uint32_t>(tag & 7);
    if (number == 0) return false;
    uint64_t start = 0, size = 0;
    if (!SkipValue(&in, wire_type, &start, &size)) return false;
    if (number == kDataField && wire_type == kLengthDelimited) {
      parts->has_data = true;
      parts->data_offset = start;
      parts->data_size = size;
    } else {
      CopyBytes(pieces, field_start, in.offset() - field_start,
                &parts->others);
    }
  }
  return true;
}

void CopyBytes(absl::Span<const absl::string_view> pieces, uint64_t offset,
               uint64_t size, std::string* out) {
  for (absl::string_view piece : pieces) {
    if (size == 0) return;
    if (offset >= piece.size()) {
      offset -= piece.size();
      continue;
    }
    const size_t n = static_cast<size_t>(
        std::min<uint64_t>(size, piece.size() - offset));
    out->append(piece.data() + offset, n);
    size -= n;
    offset = 0;
  }
}

std::string BufferPool::Take(size_t size) {
  std::string buffer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      buffer = std::move(free_.back());
      free_.pop_back();
      kept_ -= buffer.capacity();
    }
  }
  // Empty: growing it copies nothing.
  buffer.reserve(size);
  return buffer;
}

void BufferPool::Give(std::string buffer) {
  buffer.clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (buffer.capacity() < kMinKeptBytes ||
      kept_ + buffer.capacity() > max_bytes_) {
    return;  // freed on return
  }
  kept_ += buffer.capacity();
  free_.push_back(std::move(buffer));
}

void BufferPool::Clear() {
  std::vector<std::string> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(free_);
    kept_ = 0;
  }
}

size_t BufferPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_;
}

}  // namespace chunkd::service
