// StreamWork: what one stream does with its input, whatever its RPC
// (docs/design.md, "Tasks on the worker pool"). The stream reactor
// (stream_reactor.h) decides when a task runs and what it takes; the work
// object, made by the Rpc's Start (stream_rpc.h) from the stream's first
// request, cuts the input, counts it in the metrics and makes the
// responses. Chunk and Dedup run a pipeline::StreamPipeline (stream_task.h),
// Estimate an estimate::Estimator (estimate_work.h).
//
// Thread safety: a stream's work is used by one task at a time.
#ifndef CHUNKD_SERVICE_STREAM_WORK_H_
#define CHUNKD_SERVICE_STREAM_WORK_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "service/memory_plan.h"
#include "service/request_bytes.h"

namespace chunkd::service {

// One request's data on its way through the stream's inbox.
struct InputPiece {
  std::string bytes;
  // The request ended the current file after these bytes (Estimate's
  // end_of_file; never set for Chunk and Dedup).
  bool end_of_file = false;
};

// What one task takes from the inbox.
struct TaskInput {
  std::vector<InputPiece> pieces;  // in the order they arrived
  size_t bytes = 0;                // their bytes
  bool last = false;               // the input ended with these
  // Where every piece's buffer goes back once it is cut (or not).
  BufferPool* buffers = nullptr;
  // True when more input waits in the inbox (asked after cutting).
  std::function<bool()> input_waits;
};

class StreamWork {
 public:
  StreamWork() = default;
  virtual ~StreamWork() = default;
  StreamWork(const StreamWork&) = delete;
  StreamWork& operator=(const StreamWork&) = delete;

  // What the stream reserves of ServiceOptions::stream_memory beyond its
  // request bytes (docs/design.md, "Memory bounds").
  virtual uint64_t MemoryBytes(const StreamSettings& settings) const = 0;
  // The failure of a stream whose MemoryBytes, `bytes`, exceed all of the
  // stream memory, `limit`: it could never start.
  virtual absl::Status NeverFits(uint64_t bytes, uint64_t limit) const = 0;
  // One task: cuts input->pieces in order (each buffer goes back to
  // input->buffers, cut or not; cutting stops at the first failure), counts
  // them in the stream's metrics and appends the task's responses to *out,
  // the stream's last ones when input->last. Never blocks on the client.
  virtual absl::Status Run(TaskInput* input,
                           std::deque<grpc::ByteBuffer>* out) = 0;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_STREAM_WORK_H_
