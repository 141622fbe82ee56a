// The wire format of ChunkService: requests arrive and responses leave as
// raw gRPC byte buffers, parsed and serialized here (docs/design.md,
// "The reactor" and "Copies of the request bytes").
//
// Promises: a request that does not parse is INVALID_ARGUMENT naming its
// position in the call and its size, never a silent end of input; the `data`
// field of a stream request is copied once, out of gRPC's slices into a
// buffer of the service's BufferPool, and not at all when it is longer than
// the stream accepts; everything else is accepted or refused exactly as
// protobuf decides. Responses hold at most kMaxRecordsPerResponse records.
//
// Thread safety: free functions, safe from any thread.
#ifndef CHUNKD_SERVICE_WIRE_FORMAT_H_
#define CHUNKD_SERVICE_WIRE_FORMAT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "google/protobuf/message.h"
#include "pipeline/stream_pipeline.h"
#include "service/memory_plan.h"
#include "service/request_bytes.h"

namespace chunkd::service {

// The client's `authorization` metadata, empty when absent.
std::string AuthorizationOf(const grpc::CallbackServerContext* context);

// Parses one request into `message`: OK, or INVALID_ARGUMENT saying which
// message of the call (`position`, counted from 1; 0 for a unary call's only
// request) did not parse, and its size. `buffer` is consumed.
absl::Status ParseRequest(grpc::ByteBuffer* buffer,
                          google::protobuf::Message* message,
                          uint64_t position);

// The data field of a stream request, kept apart from the message.
struct RequestData {
  size_t size = 0;    // the field's length
  std::string bytes;  // its bytes, unless longer than the stream accepts
};

// Parses one stream request (v1::ChunkRequest, DedupRequest or
// EstimateRequest) with the
// result and errors of ParseRequest, except that the data field goes to
// *data: copied once from gRPC's slices into a buffer from `pool`
// (request_bytes.h), or only measured when longer than `max_bytes`. A
// message SplitRequest leaves to protobuf is parsed whole. `buffer` is
// consumed.
template <typename Request>
absl::Status ParseStreamRequest(grpc::ByteBuffer* buffer, Request* message,
                                uint64_t position, size_t max_bytes,
                                BufferPool* pool, RequestData* data);

// Serializes a response; a failure is INTERNAL (never expected).
absl::Status SerializeResponse(const google::protobuf::Message& message,
                               grpc::ByteBuffer* buffer);

// Appends to *out the responses of one task of a stream of `Rpc`
// (stream_rpc.h): `records` in batches of at most kMaxRecordsPerResponse,
// then, when `summary` is not null, the summary. Stops at the first failure.
template <typename Rpc>
absl::Status SerializeRecords(const std::vector<pipeline::ChunkRecord>& records,
                              const pipeline::StreamTotals* summary,
                              std::deque<grpc::ByteBuffer>* out) {
  typename Rpc::Response response;
  absl::Status status;
  for (size_t i = 0; status.ok() && i < records.size();
       i += kMaxRecordsPerResponse) {
    response.Clear();
    response.mutable_batch()->mutable_chunks()->Reserve(
        static_cast<int>(std::min(kMaxRecordsPerResponse, records.size() - i)));
    const size_t end = std::min(records.size(), i + kMaxRecordsPerResponse);
    for (size_t j = i; j < end; ++j) Rpc::AddRecord(records[j], &response);
    status = SerializeResponse(response, &out->emplace_back());
  }
  if (status.ok() && summary != nullptr) {
    response.Clear();
    Rpc::SetSummary(*summary, &response);
    status = SerializeResponse(response, &out->emplace_back());
  }
  return status;
}

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_WIRE_FORMAT_H_
