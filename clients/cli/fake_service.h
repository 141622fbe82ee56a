// Test only: an in-process ChunkService that chunks with the library's
// StreamChunker, with switchable faults to exercise chunkctl's protocol
// checks. Not the real server (server/service/); just enough of one.
#ifndef CHUNKD_CLIENTS_CLI_FAKE_SERVICE_H_
#define CHUNKD_CLIENTS_CLI_FAKE_SERVICE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "clients/cli/estimate_output.h"
#include "fingerprint/fingerprint.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace chunkd::cli::testing {

enum class Fault {
  kNone,
  kSkipRecord,        // drops the second record
  kNoSummary,         // never sends the summary
  kWrongTotal,        // summary's total_bytes one short of the bytes received
  kWrongSummary,      // summary one chunk short (Dedup: one unique short)
  kShortFingerprint,  // fingerprints lose their last byte
  kReject,            // fails with INVALID_ARGUMENT before any record
  kEarlyOk,           // ends with OK after the first data message
  kFail,              // fails with `fail_status` before any record
  kFailMidStream,     // fails with `fail_status` after some records (all of
                      // them if the chunker holds them back until the end)
};

class FakeChunkService final : public chunkd::v1::ChunkService::Service {
 public:
  Fault fault = Fault::kNone;
  // The error of Fault::kFail and Fault::kFailMidStream.
  grpc::Status fail_status{grpc::StatusCode::INTERNAL, "fail_status unset"};
  chunkd::v1::GetServerInfoResponse info;
  // The "authorization" metadata of the last GetServerInfo call ("" when
  // absent).
  std::string last_authorization;
  // GetServerInfo calls left to fail with UNAVAILABLE; each call counts in
  // info_calls.
  std::atomic<int> info_failures{0};
  std::atomic<int> info_calls{0};
  // Dedup and Chunk streams left to fail with `fail_status` after their
  // first batch (whatever `fault` says).
  std::atomic<int> dedup_failures{0};
  std::atomic<int> chunk_failures{0};
  // Chunk streams so far; those numbered from `altered_from` on (1 for the
  // first; 0: none) have the first byte of every fingerprint flipped, as a
  // file that changed between a stream and its replay would.
  std::atomic<int> chunk_streams{0};
  std::atomic<int> altered_from{0};
  // Every call waits this long before it answers, or until the client
  // cancels it (deadline tests: gRPC keeps deadlines in whole milliseconds,
  // in which an in-process server may well answer).
  std::atomic<int> delay_ms{0};

  // The stream_id of every Dedup stream so far, in order.
  std::vector<std::string> dedup_stream_ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return dedup_stream_ids_;
  }

  // The params of the last Dedup stream.
  chunkd::v1::DedupParams last_dedup_params() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_dedup_params_;
  }

  grpc::Status Chunk(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<chunkd::v1::ChunkResponse,
                               chunkd::v1::ChunkRequest>* stream) override {
    Delay(context);
    return Serve<chunkd::v1::ChunkRequest, chunkd::v1::ChunkResponse>(
        stream, [](const chunkd::v1::ChunkRequest& r) { return r.params(); },
        nullptr);
  }

  grpc::Status Dedup(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<chunkd::v1::DedupResponse,
                               chunkd::v1::DedupRequest>* stream) override {
    Delay(context);
    return Serve<chunkd::v1::DedupRequest, chunkd::v1::DedupResponse>(
        stream,
        [this](const chunkd::v1::DedupRequest& r) {
          std::lock_guard<std::mutex> lock(mu_);
          last_dedup_params_ = r.params();
          dedup_stream_ids_.push_back(r.params().stream_id());
          return r.params();
        },
        &index_);
  }

  // Estimate: no chunking; records what each message carried (its data's
  // size, or -1 for an end_of_file mark) and answers one progress message
  // and a result that echoes the labels and counts the bytes and files.
  // Faults: kNoSummary (no result), kWrongTotal (total_bytes one short),
  // kReject (INVALID_ARGUMENT naming set 1), kFail (fail_status).
  grpc::Status Estimate(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<chunkd::v1::EstimateResponse,
                               chunkd::v1::EstimateRequest>* stream) override {
    Delay(context);
    chunkd::v1::EstimateRequest request;
    if (!stream->Read(&request) || !request.has_params()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no params");
    }
    if (fault == Fault::kReject) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "set 1 (" + request.params().sets(0).label() +
                              "): min_size out of range");
    }
    if (fault == Fault::kFail) return fail_status;
    chunkd::v1::EstimateResult result;
    for (const chunkd::v1::EstimateSet& set : request.params().sets()) {
      result.add_sets()->set_label(set.label());
    }
    result.set_sample_rate(std::max<uint32_t>(1, request.params().sample_rate()));
    std::vector<int64_t> messages;
    uint64_t bytes = 0, files = 0, in_file = 0;
    while (stream->Read(&request)) {
      if (request.has_params()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "params twice");
      }
      if (!request.data().empty()) messages.push_back(request.data().size());
      bytes += request.data().size();
      in_file += request.data().size();
      if (request.end_of_file()) {
        messages.push_back(-1);
        files += in_file > 0 ? 1 : 0;
        in_file = 0;
      }
    }
    files += in_file > 0 ? 1 : 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      estimate_messages_ = messages;
    }
    chunkd::v1::EstimateResponse response;
    response.mutable_progress()->set_bytes(bytes);
    stream->Write(response);
    if (fault == Fault::kNoSummary) return grpc::Status::OK;
    result.set_total_bytes(fault == Fault::kWrongTotal ? bytes - 1 : bytes);
    result.set_files(files);
    result.set_fingerprint(chunkd::v1::FINGERPRINT_ALGORITHM_XXH128);
    *response.mutable_result() = result;
    stream->Write(response);
    return grpc::Status::OK;
  }

  // The messages of the last Estimate stream after its params: the size of
  // each one's data (when not empty), -1 for each end_of_file mark.
  std::vector<int64_t> estimate_messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return estimate_messages_;
  }

  grpc::Status GetServerInfo(
      grpc::ServerContext* context,
      const chunkd::v1::GetServerInfoRequest* request,
      chunkd::v1::GetServerInfoResponse* response) override {
    const auto found = context->client_metadata().find("authorization");
    last_authorization =
        found == context->client_metadata().end()
            ? std::string()
            : std::string(found->second.data(), found->second.size());
    ++info_calls;
    Delay(context);
    if (info_failures > 0) {
      --info_failures;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "starting up");
    }
    *response = info;
    return grpc::Status::OK;
  }

 private:
  // Waits delay_ms, or until the call is cancelled (its deadline passed).
  void Delay(grpc::ServerContext* context) const {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(delay_ms.load());
    while (std::chrono::steady_clock::now() < until &&
           !context->IsCancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // The first field set in `p` that `algorithm` does not read (nullptr when
  // none); the real server refuses such a request.
  static const char* UnusedField(const chunkd::v1::ChunkingParams& p,
                                 chunking::Algorithm algorithm) {
    using chunking::Algorithm;
    const bool fastcdc = algorithm == Algorithm::kFastCdc;
    const bool seqcdc = algorithm == Algorithm::kSeqCdc;
    const bool fixed = algorithm == Algorithm::kFixed;
    if (p.has_min_size() && fixed) return "min_size";
    if (p.has_avg_size() && seqcdc) return "avg_size";
    if (p.has_max_size() && fixed) return "max_size";
    if (p.has_normalization_level() && !fastcdc) return "normalization_level";
    if (p.seed() != 0 && !fastcdc) return "seed";
    if (p.seq_mode() != chunkd::v1::SEQ_CDC_MODE_UNSPECIFIED && !seqcdc) {
      return "seq_mode";
    }
    if (p.has_seq_length() && !seqcdc) return "seq_length";
    if (p.has_skip_trigger() && !seqcdc) return "skip_trigger";
    if (p.has_skip_size() && !seqcdc) return "skip_size";
    return nullptr;
  }

  static fingerprint::Kind Kind(chunkd::v1::FingerprintAlgorithm f) {
    switch (f) {
      case chunkd::v1::FINGERPRINT_ALGORITHM_XXH128:
        return fingerprint::Kind::kXxh128;
      case chunkd::v1::FINGERPRINT_ALGORITHM_NONE:
        return fingerprint::Kind::kNone;
      default:
        return fingerprint::Kind::kSha256;
    }
  }

  // One Chunk (index == nullptr) or Dedup stream.
  template <typename Request, typename Response>
  class Stream {
   public:
    Stream(FakeChunkService* service,
           grpc::ServerReaderWriter<Response, Request>* stream,
           std::set<std::string>* index)
        : service_(service), stream_(stream), index_(index) {}

    // Reads the first message: its params, checked, and a chunker for them.
    template <typename GetParams>
    grpc::Status Start(GetParams get_params) {
      if (!stream_->Read(&request_) || !request_.has_params()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "the first message must carry params");
      }
      if (fault() == Fault::kFail) return service_->fail_status;
      if (fault() == Fault::kReject) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "min_size 1 is outside 64..1048576");
      }
      const auto params = get_params(request_);
      if constexpr (std::is_same_v<Response, chunkd::v1::DedupResponse>) {
        fail_mid_stream_ = TakeOne(service_->dedup_failures);
      } else {
        fail_mid_stream_ = TakeOne(service_->chunk_failures);
        const int number = ++service_->chunk_streams;
        altered_ = service_->altered_from > 0 &&
                   number >= service_->altered_from;
      }
      kind_ = Kind(params.fingerprint());
      absl::StatusOr<chunking::ChunkerOptions> read =
          OptionsFromProto(params.chunking());
      if (!read.ok()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            std::string(read.status().message()));
      }
      const chunking::ChunkerOptions options = *read;
      if (const char* field =
              UnusedField(params.chunking(), options.algorithm)) {
        return grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            std::string("chunking.") + field + " is not a parameter of " +
                std::string(chunking::AlgorithmName(options.algorithm)));
      }
      auto chunker = chunking::StreamChunker::Create(options);
      if (!chunker.ok()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            std::string(chunker.status().message()));
      }
      chunker_ = *std::move(chunker);
      return grpc::Status::OK;
    }

    // The data messages, from the first one on, then the summary.
    grpc::Status Run() {
      bool first = true;
      do {
        if (!first && request_.has_params()) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "params only in the first message");
        }
        first = false;
        bytes_ += request_.data().size();
        chunker_->Append(request_.data(), &cut_);
        Send();
        if ((fault() == Fault::kFailMidStream || fail_mid_stream_) &&
            chunks_ > 0) {
          return service_->fail_status;
        }
        if (fault() == Fault::kEarlyOk && bytes_ > 0) break;
      } while (stream_->Read(&request_));
      if (fault() != Fault::kEarlyOk) {
        chunker_->Finish(&cut_);
        Send();
      }
      if (fault() == Fault::kFailMidStream || fail_mid_stream_) {
        return service_->fail_status;
      }
      if (fault() == Fault::kNoSummary) return grpc::Status::OK;
      SendSummary();
      return grpc::Status::OK;
    }

   private:
    Fault fault() const { return service_->fault; }

    // Takes one from `left` when it is above 0.
    static bool TakeOne(std::atomic<int>& left) {
      int n = left.load();
      while (n > 0 && !left.compare_exchange_weak(n, n - 1)) {
      }
      return n > 0;
    }

    // The chunks cut so far, as one batch (possibly empty).
    void Send() {
      Response response;
      auto* batch = response.mutable_batch();
      for (const chunking::Chunk& chunk : cut_) {
        ++chunks_;
        if (fault() == Fault::kSkipRecord && chunks_ == 2) continue;
        auto* record = batch->add_chunks();
        record->set_offset(chunk.offset);
        record->set_length(chunk.length);
        std::string digest =
            fingerprint::Digest(kind_, chunker_->ChunkData(chunk));
        if (fault() == Fault::kShortFingerprint) digest.pop_back();
        if (altered_ && !digest.empty()) digest[0] = static_cast<char>(~digest[0]);
        if constexpr (std::is_same_v<Response, chunkd::v1::DedupResponse>) {
          std::lock_guard<std::mutex> lock(service_->mu_);
          const bool is_new = index_->insert(digest).second;
          record->set_is_new(is_new);
          if (is_new) {
            unique_bytes_ += chunk.length;
            ++unique_chunks_;
          }
        }
        record->set_fingerprint(std::move(digest));
      }
      cut_.clear();
      stream_->Write(response);
    }

    void SendSummary() {
      Response response;
      auto* summary = response.mutable_summary();
      summary->set_total_bytes(fault() == Fault::kWrongTotal ? bytes_ - 1
                                                             : bytes_);
      summary->set_total_chunks(
          fault() == Fault::kWrongSummary && index_ == nullptr ? chunks_ - 1
                                                               : chunks_);
      if constexpr (std::is_same_v<Response, chunkd::v1::DedupResponse>) {
        summary->set_unique_bytes(unique_bytes_);
        summary->set_unique_chunks(fault() == Fault::kWrongSummary
                                       ? unique_chunks_ - 1
                                       : unique_chunks_);
      }
      stream_->Write(response);
    }

    FakeChunkService* const service_;
    grpc::ServerReaderWriter<Response, Request>* const stream_;
    std::set<std::string>* const index_;
    Request request_;
    bool fail_mid_stream_ = false;
    bool altered_ = false;
    fingerprint::Kind kind_ = fingerprint::Kind::kNone;
    std::unique_ptr<chunking::StreamChunker> chunker_;
    std::vector<chunking::Chunk> cut_;
    uint64_t bytes_ = 0, chunks_ = 0, unique_bytes_ = 0, unique_chunks_ = 0;
  };

  // Serves Chunk (index == nullptr) or Dedup.
  template <typename Request, typename Response, typename GetParams>
  grpc::Status Serve(grpc::ServerReaderWriter<Response, Request>* stream,
                     GetParams get_params, std::set<std::string>* index) {
    Stream<Request, Response> served(this, stream, index);
    if (grpc::Status status = served.Start(get_params); !status.ok()) {
      return status;
    }
    return served.Run();
  }

  std::mutex mu_;
  std::set<std::string> index_;
  chunkd::v1::DedupParams last_dedup_params_;
  std::vector<std::string> dedup_stream_ids_;
  std::vector<int64_t> estimate_messages_;
};

// A FakeChunkService listening on a local port.
class FakeServer {
 public:
  FakeServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { server_->Shutdown(); }

  FakeChunkService& service() { return service_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  FakeChunkService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace chunkd::cli::testing

#endif  // CHUNKD_CLIENTS_CLI_FAKE_SERVICE_H_
