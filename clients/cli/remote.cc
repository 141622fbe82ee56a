#include "clients/cli/remote.h"

#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chunkd/tables.h"
#include "clients/cli/error_reason.h"
#include "clients/cli/replay.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/sync_stream.h"

namespace chunkd::cli {
namespace {

// Marks the errors chunkctl finds itself (FoundByClient).
constexpr absl::string_view kFoundByClient = "chunkd.cli/found-by-client";

absl::Status ProtocolError(absl::string_view what) {
  return ClientFound(
      absl::InternalError(absl::StrCat("protocol error: ", what)));
}

// A status printed like a server's error: "<CODE_NAME>: <message>".
absl::Status Named(absl::StatusCode code, absl::string_view message) {
  return absl::Status(
      code, absl::StrCat(absl::StatusCodeToString(code), ": ", message));
}

// A stream that ended OK although the server did not account for every byte
// sent: what was sent may not all have been chunked (or indexed).
absl::Status DataLoss(absl::string_view what) {
  return Named(absl::StatusCode::kDataLoss, what);
}

// What the writer thread of a stream did.
struct Upload {
  // Bytes of data the server accepted.
  uint64_t bytes_sent = 0;
  // True once the whole input was sent and the stream half-closed.
  bool complete = false;
  // A failure to read the input (the RPC was then cancelled).
  absl::Status read_status;
};

// Sends `first`, then the input in data messages, then WritesDone. Stops
// early when a Write fails: the server ended the stream, and Finish() on the
// reading side tells why.
template <typename Request, typename Response>
Upload SendInput(grpc::ClientContext* context,
                 grpc::ClientReaderWriterInterface<Request, Response>* stream,
                 const Request& first, size_t message_size, InputFile* input) {
  Upload upload;
  if (!stream->Write(first)) return upload;
  Request request;
  std::string* data = request.mutable_data();
  while (true) {
    data->resize(message_size);
    absl::StatusOr<size_t> n = input->Read(data->data(), message_size);
    if (!n.ok() && InputFile::IsInterrupted(n.status())) {
      return upload;  // the call ended; Finish() on the reading side says how
    }
    if (!n.ok()) {
      upload.read_status = ClientFound(n.status());
      context->TryCancel();
      return upload;
    }
    if (*n == 0) break;
    data->resize(*n);
    if (!stream->Write(request)) return upload;
    upload.bytes_sent += *n;
  }
  upload.complete = stream->WritesDone();
  return upload;
}

// Runs one bidirectional stream: a writer thread sends `first` and the
// input while this thread passes every response to `on_response`. When
// `on_response` fails, the RPC is cancelled and its error returned, marked
// as chunkctl's own (ClientFound()). On success *bytes_sent is the input's
// size. Once the call has ended (its deadline passed, the server ended it)
// the input is interrupted, so a writer thread waiting on stdin or a pipe
// that stalls does not hold the call's end up.
template <typename Request, typename Response>
absl::Status Exchange(
    grpc::ClientContext* context,
    grpc::ClientReaderWriterInterface<Request, Response>* stream,
    const Request& first, size_t message_size, InputFile* input,
    absl::FunctionRef<absl::Status(const Response&)> on_response,
    uint64_t* bytes_sent) {
  Upload upload;
  std::thread writer(
      [&] { upload = SendInput(context, stream, first, message_size, input); });
  Response response;
  absl::Status handled;
  while (stream->Read(&response)) {
    if (!handled.ok()) continue;  // cancelled; drain what is in flight
    handled = on_response(response);
    if (!handled.ok()) context->TryCancel();
  }
  input->Interrupt();
  writer.join();
  const grpc::Status status = stream->Finish();
  if (!upload.read_status.ok()) return upload.read_status;
  if (!handled.ok()) return ClientFound(handled);
  if (!status.ok()) return FromGrpcStatus(status);
  if (!upload.complete) {
    return DataLoss(absl::StrCat(
        "the server ended the stream with OK before receiving all data; ",
        upload.bytes_sent, " bytes were sent"));
  }
  *bytes_sent = upload.bytes_sent;
  return absl::OkStatus();
}

// Checks one record against the stream so far; advances *next_offset.
absl::Status CheckRecord(uint64_t offset, uint32_t length,
                         const std::string& fingerprint, size_t digest_size,
                         uint64_t* next_offset) {
  if (offset != *next_offset) {
    return ProtocolError(absl::StrCat("chunk at offset ", offset,
                                      ", expected offset ", *next_offset));
  }
  if (length == 0) {
    return ProtocolError(absl::StrCat("empty chunk at offset ", offset));
  }
  if (fingerprint.size() != digest_size) {
    return ProtocolError(
        absl::StrCat("chunk at offset ", offset, " has a ", fingerprint.size(),
                     "-byte fingerprint, expected ", digest_size));
  }
  *next_offset += length;
  return absl::OkStatus();
}

// Checks a summary against the records and the bytes sent. A summary that
// is missing or does not count the bytes sent is DATA_LOSS; records that
// disagree with the bytes sent or with the summary are a protocol error.
absl::Status CheckTotals(bool summary_seen, uint64_t summary_bytes,
                         uint64_t summary_chunks, uint64_t record_bytes,
                         uint64_t record_chunks, uint64_t bytes_sent) {
  if (!summary_seen) {
    return DataLoss(absl::StrCat("the stream ended without a summary; ",
                                 bytes_sent, " bytes were sent"));
  }
  if (summary_bytes != bytes_sent) {
    return DataLoss(absl::StrCat("server summary reports total_bytes=",
                                 summary_bytes, " but ", bytes_sent,
                                 " bytes were sent"));
  }
  if (record_bytes != bytes_sent) {
    return ProtocolError(absl::StrCat("the chunks cover ", record_bytes,
                                      " bytes, but ", bytes_sent,
                                      " were sent"));
  }
  if (summary_chunks != record_chunks) {
    return ProtocolError(absl::StrCat("the summary says ", summary_bytes,
                                      " bytes in ", summary_chunks,
                                      " chunks; the records say ", record_bytes,
                                      " bytes in ", record_chunks, " chunks"));
  }
  return absl::OkStatus();
}

// The parts of the messages of a Chunk or Dedup stream.
template <typename Request>
using ParamsOf = std::decay_t<decltype(std::declval<Request>().params())>;
template <typename Response>
using RecordOf = typename std::decay_t<
    decltype(std::declval<Response>().batch().chunks())>::value_type;
template <typename Response>
using SummaryOf = std::decay_t<decltype(std::declval<Response>().summary())>;

// The stub's method that starts a Chunk or Dedup stream.
template <typename Request, typename Response>
using StartStream =
    std::unique_ptr<grpc::ClientReaderWriterInterface<Request, Response>> (
        chunkd::v1::ChunkService::StubInterface::*)(grpc::ClientContext*);

// Runs one Chunk or Dedup stream (`start` is the stub's Chunk or Dedup) to
// its end: sends `params` and the input (Exchange), checks every record
// (CheckRecord) before passing it to `on_record`, calls `end_batch` after
// each batch's records, and checks the one summary against the records and
// the bytes sent (CheckTotals). Returns that summary. When `on_record` or
// `end_batch` fails, the RPC is cancelled and its error returned.
template <typename Request, typename Response>
absl::StatusOr<SummaryOf<Response>> RunStream(
    StartStream<Request, Response> start,
    chunkd::v1::ChunkService::StubInterface* stub,
    const ParamsOf<Request>& params, fingerprint::Kind kind,
    size_t message_size, std::chrono::nanoseconds timeout, InputFile* input,
    absl::FunctionRef<absl::Status(const RecordOf<Response>&)> on_record,
    absl::FunctionRef<absl::Status()> end_batch) {
  grpc::ClientContext context;
  SetTimeout(&context, timeout);
  std::unique_ptr<grpc::ClientReaderWriterInterface<Request, Response>> stream =
      (stub->*start)(&context);
  Request first;
  *first.mutable_params() = params;

  const size_t digest_size = fingerprint::DigestSize(kind);
  uint64_t next_offset = 0;  // the bytes the records cover so far
  uint64_t chunks = 0;
  std::optional<SummaryOf<Response>> summary;
  auto on_response = [&](const Response& response) -> absl::Status {
    switch (response.body_case()) {
      case Response::kBatch:
        if (summary.has_value()) {
          return ProtocolError("a batch after the summary");
        }
        for (const RecordOf<Response>& record : response.batch().chunks()) {
          if (absl::Status s =
                  CheckRecord(record.offset(), record.length(),
                              record.fingerprint(), digest_size, &next_offset);
              !s.ok()) {
            return s;
          }
          if (absl::Status s = on_record(record); !s.ok()) return s;
          ++chunks;
        }
        return end_batch();
      case Response::kSummary:
        if (summary.has_value()) return ProtocolError("a second summary");
        summary = response.summary();
        return absl::OkStatus();
      default:
        return ProtocolError("a response with neither batch nor summary");
    }
  };
  uint64_t bytes_sent = 0;
  if (absl::Status s = Exchange<Request, Response>(&context, stream.get(),
                                                   first, message_size, input,
                                                   on_response, &bytes_sent);
      !s.ok()) {
    return s;
  }
  const SummaryOf<Response> totals = summary.value_or(SummaryOf<Response>());
  if (absl::Status s =
          CheckTotals(summary.has_value(), totals.total_bytes(),
                      totals.total_chunks(), next_offset, chunks, bytes_sent);
      !s.ok()) {
    return s;
  }
  return totals;
}

std::string FormatRange(const chunkd::v1::ParamRange& range) {
  return absl::StrCat(range.min(), "..", range.max(), " (default ",
                      range.default_value(), ")");
}

// Adds "authorization: <value>" to the initial metadata of every call. Call
// credentials would do the same but are sent only over TLS; a token server
// on a trusted network may well run plaintext.
class BearerTokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(std::string value)
      : value_(std::move(value)) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", value_);
    }
    methods->Proceed();
  }

 private:
  const std::string value_;
};

class BearerTokenInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(std::string value)
      : value_(std::move(value)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(value_);
  }

 private:
  const std::string value_;
};

// Reconnection backoff of a channel, in milliseconds (see MakeChannel): the
// first well inside the retry policy's first backoff (kDefaultServiceConfig),
// the largest its largest.
constexpr int kInitialReconnectBackoffMs = 20;
constexpr int kMaxReconnectBackoffMs = 2000;

}  // namespace

bool FoundByClient(const absl::Status& status) {
  return status.GetPayload(kFoundByClient).has_value();
}

absl::Status ClientFound(absl::Status status) {
  if (!status.ok()) status.SetPayload(kFoundByClient, absl::Cord("1"));
  return status;
}

const char* const kDefaultServiceConfig = chunking::tables::kServiceConfig;

std::shared_ptr<grpc::Channel> MakeChannel(const ConnectOptions& options) {
  grpc::ChannelArguments args;
  // Responses are batches of records; never refuse one for its size.
  args.SetMaxReceiveMessageSize(-1);
  args.SetServiceConfigJSON(kDefaultServiceConfig);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              kInitialReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs;
    ssl.pem_cert_chain = options.tls_cert_chain;
    ssl.pem_private_key = options.tls_private_key;
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!options.token.empty()) {
    interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(
        absl::StrCat("Bearer ", options.token)));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.address, credentials, args, std::move(interceptors));
}

std::string FingerprintName(int value) {
  switch (value) {
    case chunkd::v1::FINGERPRINT_ALGORITHM_SHA256:
      return "sha256";
    case chunkd::v1::FINGERPRINT_ALGORITHM_XXH128:
      return "xxh128";
    case chunkd::v1::FINGERPRINT_ALGORITHM_NONE:
      return "none";
    default:
      return absl::StrCat("unknown(", value, ")");
  }
}

std::string AlgorithmInfoName(const chunkd::v1::AlgorithmInfo& info) {
  if (!info.name().empty()) return info.name();
  switch (info.algorithm()) {
    case chunkd::v1::ALGORITHM_FASTCDC:
      return "fastcdc";
    case chunkd::v1::ALGORITHM_CRC32:
      return "crc32";
    case chunkd::v1::ALGORITHM_SEQCDC:
      return "seqcdc";
    case chunkd::v1::ALGORITHM_FIXED:
      return "fixed";
    default:
      return absl::StrCat("unknown(", static_cast<int>(info.algorithm()), ")");
  }
}

void SetTimeout(grpc::ClientContext* context,
                std::chrono::nanoseconds timeout) {
  if (timeout <= std::chrono::nanoseconds::zero()) return;
  context->set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return WithErrorInfo(Named(static_cast<absl::StatusCode>(status.error_code()),
                             status.error_message()),
                       status);
}

absl::Status ChunkRemotely(chunkd::v1::ChunkService::StubInterface* stub,
                           const chunkd::v1::ChunkParams& params,
                           fingerprint::Kind kind, size_t message_size,
                           InputFile* input, RecordWriter* out,
                           std::chrono::nanoseconds timeout,
                           DeliveredRecords* delivered) {
  if (delivered != nullptr) delivered->StartAttempt();
  absl::StatusOr<chunkd::v1::ChunkSummary> summary = RunStream(
      &chunkd::v1::ChunkService::StubInterface::Chunk, stub, params, kind,
      message_size, timeout, input,
      [out, delivered](const chunkd::v1::ChunkRecord& record) -> absl::Status {
        if (delivered != nullptr) {
          absl::StatusOr<bool> fresh = delivered->Take(
              record.offset(), record.length(), record.fingerprint());
          if (!fresh.ok() || !*fresh) return fresh.status();
        }
        out->Add(record.offset(), record.length(), record.fingerprint());
        return absl::OkStatus();
      },
      [out] { return out->Flush(); });
  if (!summary.ok() || delivered == nullptr) return summary.status();
  return delivered->CheckSummary(summary->total_bytes(),
                                 summary->total_chunks());
}

absl::StatusOr<DedupTotals> DedupRemotely(
    chunkd::v1::ChunkService::StubInterface* stub,
    const chunkd::v1::DedupParams& params, fingerprint::Kind kind,
    size_t message_size, InputFile* input, std::chrono::nanoseconds timeout) {
  DedupTotals records;  // what the records add up to
  absl::StatusOr<chunkd::v1::DedupSummary> summary = RunStream(
      &chunkd::v1::ChunkService::StubInterface::Dedup, stub, params, kind,
      message_size, timeout, input,
      [&records](const chunkd::v1::DedupRecord& record) {
        records.bytes += record.length();
        ++records.chunks;
        if (record.is_new()) {
          records.unique_bytes += record.length();
          ++records.unique_chunks;
        }
        return absl::OkStatus();
      },
      [] { return absl::OkStatus(); });
  if (!summary.ok()) return summary.status();
  if (summary->unique_bytes() != records.unique_bytes ||
      summary->unique_chunks() != records.unique_chunks) {
    return ProtocolError(absl::StrCat(
        "the summary says ", summary->unique_bytes(), " unique bytes in ",
        summary->unique_chunks(), " chunks; the records say ",
        records.unique_bytes, " in ", records.unique_chunks));
  }
  records.hints_tried = summary->hints_tried();
  records.hints_accepted = summary->hints_accepted();
  records.hints_rejected = summary->hints_rejected();
  records.hint_skipped_bytes = summary->hint_skipped_bytes();
  return records;
}

absl::StatusOr<chunkd::v1::GetServerInfoResponse> GetServerInfo(
    chunkd::v1::ChunkService::StubInterface* stub,
    std::chrono::nanoseconds timeout) {
  grpc::ClientContext context;
  SetTimeout(&context, timeout);
  chunkd::v1::GetServerInfoResponse response;
  grpc::Status status = stub->GetServerInfo(
      &context, chunkd::v1::GetServerInfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

std::string FormatServerInfo(const chunkd::v1::GetServerInfoResponse& info) {
  std::string out;
  auto line = [&out](absl::string_view key, absl::string_view value) {
    absl::StrAppend(&out, absl::StrFormat("%-20s %s\n", key, value));
  };
  line("version:", info.version());
  line("chunking backend:", info.chunking_backend());
  line("index backend:", info.index_backend());
  line("max message bytes:", absl::StrCat(info.max_message_bytes()));
  line("max in-flight bytes:", absl::StrCat(info.max_inflight_bytes()));
  std::vector<std::string> fingerprints;
  for (int value : info.fingerprints()) {
    fingerprints.push_back(FingerprintName(value));
  }
  line("fingerprints:", absl::StrJoin(fingerprints, ", "));
  out += "algorithms:\n";
  for (const chunkd::v1::AlgorithmInfo& algorithm : info.algorithms()) {
    absl::StrAppend(&out, "  ", AlgorithmInfoName(algorithm), "\n");
    auto param = [&out](absl::string_view name, const std::string& value) {
      absl::StrAppend(&out, absl::StrFormat("    %-20s %s\n", name, value));
    };
    // A range with max 0 is a parameter the algorithm does not take.
    auto takes = [](const chunkd::v1::ParamRange& range) {
      return range.max() != 0;
    };
    // Empty from a server older than the field.
    if (!algorithm.backend().empty()) {
      const uint32_t threads = algorithm.backend_threads();
      param("backend",
            threads == 0
                ? algorithm.backend()
                : absl::StrCat(algorithm.backend(), " (", threads,
                               threads == 1 ? " thread)" : " threads)"));
    }
    if (takes(algorithm.min_size())) {
      param("min_size", FormatRange(algorithm.min_size()));
    }
    if (takes(algorithm.avg_size())) {
      param("avg_size",
            absl::StrCat(
                FormatRange(algorithm.avg_size()),
                algorithm.avg_size_power_of_two() ? ", a power of two" : ""));
    }
    if (takes(algorithm.max_size())) {
      param("max_size", FormatRange(algorithm.max_size()));
    }
    if (takes(algorithm.normalization_level())) {
      param("normalization_level",
            FormatRange(algorithm.normalization_level()));
    }
    if (takes(algorithm.horizon_size())) {
      param("horizon_size", FormatRange(algorithm.horizon_size()));
    }
    if (takes(algorithm.polynomial())) {
      const chunkd::v1::ParamRange& p = algorithm.polynomial();
      param("polynomial",
            absl::StrFormat("0x%x..0x%x (default 0x%x), irreducible", p.min(),
                            p.max(), p.default_value()));
    }
  }
  return out;
}

}  // namespace chunkd::cli
