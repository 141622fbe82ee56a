#include "service/wire_format.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "chunkd/v1/chunkd.pb.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace chunkd::service {
namespace {

// INVALID_ARGUMENT saying which message of the call did not parse as
// `message`'s type, and its size (see ParseRequest).
absl::Status NotParsed(const google::protobuf::Message& message,
                       uint64_t position, size_t size) {
  const std::string which =
      position == 0 ? std::string("the request")
                    : absl::StrCat("request message ", position,
                                   " of the stream (counting from 1)");
  return absl::InvalidArgumentError(absl::StrCat(
      which, " is not a valid ", message.GetTypeName(), ": its ", size,
      " bytes do not parse as protobuf"));
}

}  // namespace

std::string AuthorizationOf(const grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

absl::Status ParseRequest(grpc::ByteBuffer* buffer,
                          google::protobuf::Message* message,
                          uint64_t position) {
  const size_t size = buffer->Length();
  bool parsed = false;
  {
    grpc::ProtoBufferReader reader(buffer);
    parsed = message->ParseFromZeroCopyStream(&reader);
  }
  buffer->Clear();
  return parsed ? absl::OkStatus() : NotParsed(*message, position, size);
}

template <typename Request>
absl::Status ParseStreamRequest(grpc::ByteBuffer* buffer, Request* message,
                                uint64_t position, size_t max_bytes,
                                BufferPool* pool, RequestData* data) {
  std::vector<grpc::Slice> slices;
  std::vector<absl::string_view> pieces;
  RequestParts parts;
  bool split = buffer->Dump(&slices).ok();
  if (split) {
    pieces.reserve(slices.size());
    for (const grpc::Slice& slice : slices) {
      pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()),
                          slice.size());
    }
    split = SplitRequest(pieces, &parts);
  }
  if (!split) {
    absl::Status parsed = ParseRequest(buffer, message, position);
    data->size = message->data().size();
    data->bytes = std::move(*message->mutable_data());
    return parsed;
  }
  const size_t size = buffer->Length();
  if (!parts.others.empty() && !message->ParseFromString(parts.others)) {
    buffer->Clear();
    return NotParsed(*message, position, size);
  }
  data->size = parts.data_size;
  if (parts.data_size > 0 && parts.data_size <= max_bytes) {
    data->bytes = pool->Take(parts.data_size);
    CopyBytes(pieces, parts.data_offset, parts.data_size, &data->bytes);
  }
  buffer->Clear();
  return absl::OkStatus();
}

template absl::Status ParseStreamRequest<v1::ChunkRequest>(
    grpc::ByteBuffer*, v1::ChunkRequest*, uint64_t, size_t, BufferPool*,
    RequestData*);
template absl::Status ParseStreamRequest<v1::DedupRequest>(
    grpc::ByteBuffer*, v1::DedupRequest*, uint64_t, size_t, BufferPool*,
    RequestData*);
template absl::Status ParseStreamRequest<v1::EstimateRequest>(
    grpc::ByteBuffer*, v1::EstimateRequest*, uint64_t, size_t, BufferPool*,
    RequestData*);

absl::Status SerializeResponse(const google::protobuf::Message& message,
                               grpc::ByteBuffer* buffer) {
  bool own_buffer = false;
  grpc::Status status = grpc::SerializationTraits<
      google::protobuf::Message>::Serialize(message, buffer, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot serialize ",
                                          message.GetTypeName(), ": ",
                                          status.error_message()));
}

}  // namespace chunkd::service
