// chunkctl's side of the ChunkService RPCs: Chunk and Dedup over the sync
// ClientReaderWriter (a writer thread streams the input while the calling
// thread reads and handles the responses), and GetServerInfo.
//
// Every response stream is checked against the protocol of chunkd.proto:
// records contiguous from offset 0, non-empty, fingerprints of the requested
// size, exactly one summary, last, whose totals match the records and the
// bytes sent. So a wrong server cannot pass silently:
//   - a stream that ends OK without a summary, with a summary whose
//     total_bytes is not the number of bytes sent on it, or before all of
//     the input was sent, is DATA_LOSS ("DATA_LOSS: server summary reports
//     total_bytes=N but M bytes were sent", "DATA_LOSS: the stream ended
//     without a summary; M bytes were sent");
//   - any other violation is INTERNAL, "protocol error: ...".
//
// Thread safety: each function uses its own ClientContext; a stub may be
// shared between threads.
#ifndef CHUNKD_CLIENTS_CLI_REMOTE_H_
#define CHUNKD_CLIENTS_CLI_REMOTE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "clients/cli/input_file.h"
#include "clients/cli/record_writer.h"
#include "fingerprint/fingerprint.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace chunkd::cli {

// Whether `status` is an error of chunkctl's own, not one the server sent:
// a response that breaks the protocol, a replay that cuts otherwise, the
// input or the output failing. A replay would meet it again (or cannot
// help), so --retries never replays it.
bool FoundByClient(const absl::Status& status);

// `status` marked as chunkctl's own (FoundByClient()).
absl::Status ClientFound(absl::Status status);

class DeliveredRecords;

// How chunkctl reaches a server; every command builds its channel from it
// through MakeChannel().
struct ConnectOptions {
  // host:port, or any gRPC target URI ("unix:/path", "dns:///host:port").
  std::string address;
  // TLS instead of plaintext (default false). The PEM fields are contents,
  // not paths; empty root_certs means the system's roots (or
  // $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
  bool tls = false;
  std::string tls_root_certs;
  // A client certificate chain and its private key for mutual TLS (default
  // none); both or neither.
  std::string tls_cert_chain;
  std::string tls_private_key;
  // The name to verify in the server's certificate instead of the
  // address's host (default: the host).
  std::string tls_server_name;
  // A bearer token sent as "authorization: Bearer TOKEN" with every call
  // (default: none), on plaintext channels too.
  std::string token;
};

// The service config every channel of chunkctl has (docs/cli.md, "Channel
// defaults"), the same as the Python and Go clients': round_robin over every
// address the target resolves to (a dns:/// name of a headless Service
// spreads the streams over its pods), and up to 5 attempts of the unary,
// idempotent calls (GetServerInfo, FindMissing, Release) on UNAVAILABLE,
// the waits between them drawn from [0, 1 s], [0, 3 s], [0, 9 s] and [0,
// 9 s]: a call outlasts a server restart, and a server that stays down is
// reported after 11 s on average. Streams are never retried by gRPC: see
// replay.h for the replays of Chunk and Dedup. Declared once, in chunkd's
// table (proto/chunkd/v1/tables.json; chunking::tables::kServiceConfig).
extern const char* const kDefaultServiceConfig;

// Creates a channel to options.address with kDefaultServiceConfig.
// Connecting happens on the first RPC. A connection that failed is tried
// again after 20 ms, growing 1.6 times per failure to at most 2 s: with
// gRPC's default of 1 s, every further attempt of the retry policy (all
// within about 0.7 s) would fail at once on the channel's backoff, so a
// call could never outlast a refused connection.
std::shared_ptr<grpc::Channel> MakeChannel(const ConnectOptions& options);

// The deadline of one call: none when `timeout` is zero (--timeout 0 or
// unset), else `timeout` from now.
void SetTimeout(grpc::ClientContext* context, std::chrono::nanoseconds timeout);

// A gRPC error as chunkctl reports it: the same code, and the message
// "<CODE_NAME>: <server's message>".
absl::Status FromGrpcStatus(const grpc::Status& status);

// Streams `input` to the Chunk RPC in data messages of `message_size` bytes
// after a first message carrying `params`, adding each returned record to
// `out` as its batch arrives. `kind` is the fingerprint in effect (for the
// protocol check). `timeout` is the call's deadline (SetTimeout()): the
// call ends at it even while `input` waits for data. When `out` fails
// (BrokenPipeError() included) the call is cancelled and that error
// returned. With `delivered` (an attempt of a replayed file), only the
// records it takes are added to `out`, and it checks the summary.
// REQUIRES: message_size > 0.
absl::Status ChunkRemotely(
    chunkd::v1::ChunkService::StubInterface* stub,
    const chunkd::v1::ChunkParams& params, fingerprint::Kind kind,
    size_t message_size, InputFile* input, RecordWriter* out,
    std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero(),
    DeliveredRecords* delivered = nullptr);

// The summary of one Dedup stream.
struct DedupTotals {
  uint64_t bytes = 0;
  uint64_t unique_bytes = 0;
  uint64_t chunks = 0;
  uint64_t unique_chunks = 0;
  // RapidCDC, from the stream's summary (DedupSummary).
  uint64_t hints_tried = 0;
  uint64_t hints_accepted = 0;
  uint64_t hints_rejected = 0;
  uint64_t hint_skipped_bytes = 0;
};

// Streams `input` to the Dedup RPC like ChunkRemotely and returns the
// stream's summary.
// REQUIRES: message_size > 0.
absl::StatusOr<DedupTotals> DedupRemotely(
    chunkd::v1::ChunkService::StubInterface* stub,
    const chunkd::v1::DedupParams& params, fingerprint::Kind kind,
    size_t message_size, InputFile* input,
    std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero());

// Calls GetServerInfo with the deadline `timeout` (SetTimeout()).
absl::StatusOr<chunkd::v1::GetServerInfoResponse> GetServerInfo(
    chunkd::v1::ChunkService::StubInterface* stub,
    std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero());

// The name of a FingerprintAlgorithm value: "sha256", "xxh128", "none", or
// "unknown(N)".
std::string FingerprintName(int value);

// The name of an algorithm of GetServerInfo ("fastcdc"): its name field, or
// from a server older than that field, its enum's.
std::string AlgorithmInfoName(const chunkd::v1::AlgorithmInfo& info);

// The readable form `chunkctl info` prints, ending in a newline.
std::string FormatServerInfo(const chunkd::v1::GetServerInfoResponse& info);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_REMOTE_H_
