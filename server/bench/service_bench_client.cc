#include "bench/service_bench_client.h"

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunking/auto_kernel.h"
#include "chunking/kernels/kernels.h"
#include "fingerprint/fingerprint.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/worker_pool.h"
#include "service/allocator.h"
#include "service/chunk_service.h"
#include "workload/datagen.h"
#include "workload/harness.h"
#ifdef CHUNKD_BENCH_REDIS
#include "support/redis_process.h"
#endif

namespace chunkd::bench {

grpc::ByteBuffer Serialize(const google::protobuf::Message& message) {
  std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

ClientRun RunStreams(grpc::GenericStub* stub, const char* method,
                     const Messages& messages, uint64_t total_bytes) {
  const auto start = Clock::now();
  std::vector<std::unique_ptr<Stream>> calls;
  for (const auto& stream : messages) {
    calls.push_back(std::make_unique<Stream>(stub, method, &stream));
  }
  double first = 0;
  for (auto& call : calls) {
    grpc::Status status = call->Wait();
    if (!status.ok()) {
      std::fprintf(stderr, "%s failed: %s\n", method,
                   status.error_message().c_str());
      std::exit(1);
    }
    first += call->first_response_seconds();
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  return {static_cast<double>(total_bytes) / seconds / 1e9,
          first / static_cast<double>(messages.size()) * 1e3};
}

const Config& ConfigAt(int c) {
  static constexpr Config kList[kConfigs] = {
      {"raw gRPC sink", kSinkMethod, false, false, false},
      {"Chunk, no fingerprint", kChunkMethod, false, false, false},
      {"Chunk, sha256", kChunkMethod, false, true, false},
      {"Dedup, sha256, memory index", kDedupMethod, true, true, false},
      {"Dedup, sha256, redis index", kDedupMethod, true, true, true}};
  return kList[c];
}

chunkd::v1::ChunkingParams BenchChunking() {
  chunkd::v1::ChunkingParams chunking;
  chunking.set_algorithm(chunkd::v1::ALGORITHM_FASTCDC);
  chunking.set_min_size(4096);
  chunking.set_avg_size(16384);
  chunking.set_max_size(65536);
  return chunking;
}

grpc::ByteBuffer ParamsRequest(const Config& config, uint64_t round,
                               size_t s) {
  const chunkd::v1::FingerprintAlgorithm fingerprint =
      config.fingerprint ? chunkd::v1::FINGERPRINT_ALGORITHM_SHA256
                         : chunkd::v1::FINGERPRINT_ALGORITHM_NONE;
  if (config.dedup) {
    chunkd::v1::DedupRequest first;
    *first.mutable_params()->mutable_chunking() = BenchChunking();
    first.mutable_params()->set_fingerprint(fingerprint);
    first.mutable_params()->set_namespace_(
        absl::StrFormat("bench-%d-%d", round, s));
    return Serialize(first);
  }
  chunkd::v1::ChunkRequest first;
  *first.mutable_params()->mutable_chunking() = BenchChunking();
  first.mutable_params()->set_fingerprint(fingerprint);
  return Serialize(first);
}

Messages BuildMessages(const std::string& data, uint64_t message_bytes,
                       const Config& config, size_t streams, uint64_t round) {
  Messages all(streams);
  const uint64_t stream_bytes = data.size() / streams;
  for (size_t s = 0; s < streams; ++s) {
    all[s].push_back(ParamsRequest(config, round, s));
    for (uint64_t at = 0; at < stream_bytes; at += message_bytes) {
      chunkd::v1::ChunkRequest piece;  // same wire format as DedupRequest
      piece.set_data(data.substr(s * stream_bytes + at,
                                 std::min(message_bytes, stream_bytes - at)));
      all[s].push_back(Serialize(piece));
    }
  }
  return all;
}

int RunClient(const std::string& ports) {
  std::vector<std::string> parts = absl::StrSplit(ports, ',');
  int port[2] = {0, 0};
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &port[0]) ||
      !absl::SimpleAtoi(parts[1], &port[1])) {
    std::fprintf(stderr, "--client_of must be <port>,<port>\n");
    return 1;
  }
  std::unique_ptr<grpc::GenericStub> stubs[2];
  for (int i = 0; i < 2; ++i) {
    if (port[i] == 0) continue;
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    stubs[i] = std::make_unique<grpc::GenericStub>(grpc::CreateCustomChannel(
        absl::StrFormat("127.0.0.1:%d", port[i]),
        grpc::InsecureChannelCredentials(), args));
  }
  const uint64_t total = absl::GetFlag(FLAGS_total_bytes);
  const std::vector<uint8_t> random =
      chunkd::workload::RandomBytes(total, kDataSeed);
  const std::string data(random.begin(), random.end());
  char line[256];
  while (std::fgets(line, sizeof(line), stdin) != nullptr) {
    int c = 0;
    size_t streams = 0;
    unsigned long long round = 0;  // NOLINT(runtime/int): sscanf's type
    if (std::sscanf(line, "run %d %zu %llu", &c, &streams, &round) != 3 ||
        c < 0 || c >= kConfigs || streams == 0 ||
        stubs[ConfigAt(c).redis ? 1 : 0] == nullptr) {
      std::fprintf(stderr, "bad command: %s", line);
      return 1;
    }
    const Messages messages =
        BuildMessages(data, absl::GetFlag(FLAGS_message_bytes), ConfigAt(c),
                      streams, round);
    const ClientRun run =
        RunStreams(stubs[ConfigAt(c).redis ? 1 : 0].get(), ConfigAt(c).method,
                   messages, data.size() / streams * streams);
    std::printf("%.6f %.6f\n", run.gbps, run.first_response_ms);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace chunkd::bench
