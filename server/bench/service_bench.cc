// service_bench: end-to-end throughput of chunkd's Chunk and Dedup streams
// over loopback gRPC, side by side with a raw gRPC byte sink.
//
// One process hosts a real ChunkServiceImpl (shared WorkerPool, memory index,
// sha256) and, on the same port, a generic "sink" method that reads and
// discards every message. The client sends the same pre-serialized messages
// (a params request, then data requests of --message_bytes) to all three
// methods on one channel, with 1 and N concurrent streams, and reports GB/s,
// the ratios to the sink and the time to the first chunk record. Each figure
// is the best of --repetitions runs in interleaved order, so load from other
// work on the machine spreads over all of them. The process sets up malloc
// as chunkd does (service/allocator.h), so it measures what chunkd does;
// --chunkd_malloc=false keeps glibc's defaults.
#include <algorithm>
#include <atomic>
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
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunking/auto_kernel.h"
#include "chunking/kernels/kernels.h"
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

ABSL_FLAG(uint64_t, stream_bytes, uint64_t{64} << 20,
          "bytes each stream sends");
ABSL_FLAG(uint64_t, message_bytes, uint64_t{1} << 20,
          "data bytes per request message");
ABSL_FLAG(uint32_t, streams, 8, "concurrent streams of the parallel runs");
ABSL_FLAG(uint32_t, repetitions, 3, "runs per configuration (best is kept)");
ABSL_FLAG(std::string, markdown, "", "also write the table to this file");
ABSL_FLAG(uint32_t, threads, 0, "server worker threads (0: one per core)");
ABSL_FLAG(bool, chunkd_malloc, true,
          "set up malloc as chunkd does (mmap and trim thresholds); false "
          "keeps glibc's defaults");

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kSinkMethod[] = "/chunkd.bench.Sink/Consume";
constexpr char kChunkMethod[] = "/chunkd.v1.ChunkService/Chunk";
constexpr char kDedupMethod[] = "/chunkd.v1.ChunkService/Dedup";

grpc::ByteBuffer Serialize(const google::protobuf::Message& message) {
  std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// The sink: reads every message, discards it, and ends the call with OK.
class SinkService final : public grpc::CallbackGenericService {
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    Reactor() { StartRead(&in_); }
    void OnReadDone(bool ok) override {
      if (ok) {
        in_.Clear();
        StartRead(&in_);
      } else {
        Finish(grpc::Status::OK);
      }
    }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer in_;
  };

 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    if (context->method() != kSinkMethod) {
      class Unknown final : public grpc::ServerGenericBidiReactor {
       public:
        Unknown() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
        void OnDone() override { delete this; }
      };
      return new Unknown;
    }
    return new Reactor;
  }
};

// One client stream: writes its messages in order while reading responses.
class Stream final : public grpc::ClientBidiReactor<grpc::ByteBuffer,
                                                    grpc::ByteBuffer> {
 public:
  Stream(grpc::GenericStub* stub, const char* method,
         const std::vector<grpc::ByteBuffer>* messages)
      : messages_(messages) {
    start_ = Clock::now();
    stub->PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(),
                                   this);
    StartRead(&in_);
    StartWrite(&(*messages_)[0]);
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (ok && ++next_ < messages_->size()) {
      StartWrite(&(*messages_)[next_]);
    } else {
      StartWritesDone();
    }
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (responses_++ == 0) first_response_ = Clock::now();
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    done_ = true;
    cv_.notify_all();
  }
  grpc::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    return status_;
  }
  double first_response_seconds() const {
    return std::chrono::duration<double>(first_response_ - start_).count();
  }

 private:
  const std::vector<grpc::ByteBuffer>* messages_;
  grpc::ClientContext context_;
  grpc::ByteBuffer in_;
  size_t next_ = 0;
  size_t responses_ = 0;
  Clock::time_point start_, first_response_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
};

struct Run {
  double gbps = 0;
  double first_response_ms = 0;  // mean over streams
};

Run RunStreams(grpc::GenericStub* stub, const char* method,
               const std::vector<std::vector<grpc::ByteBuffer>>& messages,
               size_t streams, uint64_t stream_bytes) {
  const auto start = Clock::now();
  std::vector<std::unique_ptr<Stream>> calls;
  for (size_t i = 0; i < streams; ++i) {
    calls.push_back(std::make_unique<Stream>(stub, method, &messages[i]));
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
  return {static_cast<double>(stream_bytes * streams) / seconds / 1e9,
          first / static_cast<double>(streams) * 1e3};
}

using Messages = std::vector<std::vector<grpc::ByteBuffer>>;

// What the streams send: stream s a params request, then the bytes
// [s * stream_bytes, (s + 1) * stream_bytes) of `data` in requests of
// message_bytes.
struct Workload {
  std::string data;
  size_t streams = 1;  // of the parallel runs
  uint64_t stream_bytes = 0;
  uint64_t message_bytes = 0;
};

// The first request of stream s: the parameters; a Dedup stream's get a
// fresh namespace per round, which keeps every chunk new.
grpc::ByteBuffer ParamsRequest(bool dedup, uint64_t round, size_t s,
                               chunkd::v1::FingerprintAlgorithm fingerprint) {
  chunkd::v1::ChunkingParams chunking;
  chunking.set_algorithm(chunkd::v1::ALGORITHM_FASTCDC);
  chunking.set_min_size(4096);
  chunking.set_avg_size(16384);
  chunking.set_max_size(65536);
  if (dedup) {
    chunkd::v1::DedupRequest first;
    *first.mutable_params()->mutable_chunking() = chunking;
    first.mutable_params()->set_fingerprint(fingerprint);
    first.mutable_params()->set_namespace_(
        absl::StrFormat("bench-%d-%d", round, s));
    return Serialize(first);
  }
  chunkd::v1::ChunkRequest first;
  *first.mutable_params()->mutable_chunking() = chunking;
  first.mutable_params()->set_fingerprint(fingerprint);
  return Serialize(first);
}

// Every stream's messages, serialized.
Messages BuildMessages(const Workload& w, bool dedup, uint64_t round,
                       chunkd::v1::FingerprintAlgorithm fingerprint) {
  Messages all(w.streams);
  for (size_t s = 0; s < w.streams; ++s) {
    all[s].push_back(ParamsRequest(dedup, round, s, fingerprint));
    for (uint64_t at = 0; at < w.stream_bytes; at += w.message_bytes) {
      chunkd::v1::ChunkRequest piece;  // same wire format as DedupRequest
      piece.set_data(
          w.data.substr(s * w.stream_bytes + at,
                        std::min(w.message_bytes, w.stream_bytes - at)));
      all[s].push_back(Serialize(piece));
    }
  }
  return all;
}

struct Config {
  const char* name;
  const char* method;
};
constexpr int kConfigs = 4;
// The configs in the table's order. (A table at namespace scope here would
// hide every function below it from lizard 1.24.3, which misreads it after
// the flags' `uint64_t{64} << 20`: keep it in a function.)
const Config& ConfigAt(int c) {
  static constexpr Config kList[kConfigs] = {
      {"sink", kSinkMethod},
      {"chunk (no fingerprint)", kChunkMethod},
      {"chunk", kChunkMethod},
      {"dedup", kDedupMethod}};
  return kList[c];
}

// The best run of each config with 1 and w.streams streams, over
// `repetitions` runs in interleaved order.
void MeasureBest(grpc::GenericStub* stub, const Workload& w,
                 uint32_t repetitions, Run best[kConfigs][2]) {
  const Messages chunk_messages =
      BuildMessages(w, false, 0, chunkd::v1::FINGERPRINT_ALGORITHM_SHA256);
  // Chunk without fingerprints: what cutting alone costs on top of gRPC.
  const Messages cut_messages =
      BuildMessages(w, false, 0, chunkd::v1::FINGERPRINT_ALGORITHM_NONE);
  const size_t stream_counts[] = {1, w.streams};
  for (uint32_t rep = 0; rep < repetitions; ++rep) {
    for (int c = 0; c < kConfigs; ++c) {
      for (int n = 0; n < 2; ++n) {
        const Messages dedup_messages =
            c == 3 ? BuildMessages(w, true, rep * 2 + n,
                                   chunkd::v1::FINGERPRINT_ALGORITHM_SHA256)
                   : Messages{};
        Run run = RunStreams(
            stub, ConfigAt(c).method,
            c == 3 ? dedup_messages : (c == 1 ? cut_messages : chunk_messages),
            stream_counts[n], w.stream_bytes);
        if (run.gbps > best[c][n].gbps) best[c][n] = run;
      }
    }
  }
}

std::string Table(const Run best[kConfigs][2], const char* kernel,
                  size_t threads, const Workload& w, uint32_t repetitions,
                  const std::string& malloc_setup) {
  std::string table = absl::StrFormat(
      "End-to-end over loopback gRPC (%s backend, %zu worker threads, "
      "%d MiB per stream, %d KiB messages, fastcdc 4/16/64 KiB, sha256 "
      "unless noted, memory index; best of %d; %s)\n\n"
      "| rpc | 1 stream GB/s | %zu streams GB/s | vs sink (1) | vs sink (%zu) "
      "| %zu streams ÷ 1 | first record ms (1) "
      "|\n|---|---|---|---|---|---|---|\n",
      kernel, threads, w.stream_bytes >> 20, w.message_bytes >> 10, repetitions,
      malloc_setup, w.streams, w.streams, w.streams);
  for (int c = 0; c < kConfigs; ++c) {
    table += absl::StrFormat(
        "| %s | %.2f | %.2f | %.0f%% | %.0f%% | %.2f× | %s |\n",
        ConfigAt(c).name, best[c][0].gbps, best[c][1].gbps,
        100 * best[c][0].gbps / best[0][0].gbps,
        100 * best[c][1].gbps / best[0][1].gbps,
        best[c][1].gbps / best[c][0].gbps,
        c == 0 ? "–" : absl::StrFormat("%.2f", best[c][0].first_response_ms));
  }
  return table;
}

// Sets up malloc as chunkd does, unless --chunkd_malloc=false; says how.
// REQUIRES: no thread runs yet (ConfigureMalloc's requirement).
std::string SetUpMalloc() {
  if (!absl::GetFlag(FLAGS_chunkd_malloc)) {
    return "malloc: glibc defaults (--chunkd_malloc=false)";
  }
  const chunkd::service::MallocSetup setup =
      chunkd::service::ConfigureMalloc(std::getenv("GLIBC_TUNABLES"));
  return setup.configured
             ? absl::StrFormat(
                   "malloc as chunkd: mmap_threshold %d MiB, "
                   "trim_threshold %d MiB",
                   setup.mmap_threshold >> 20, setup.trim_threshold >> 20)
             : setup.description;
}

chunkd::service::ServiceOptions BenchServiceOptions(
    chunkd::index::FingerprintIndex* index, chunkd::pipeline::WorkerPool* pool,
    chunkd::metrics::Metrics* metrics,
    const chunkd::chunking::kernels::Kernel* kernel, uint64_t message_bytes) {
  chunkd::service::ServiceOptions options;
  options.index = index;
  options.pool = pool;
  options.metrics = metrics;
  options.max_message_bytes = message_bytes;
  options.max_inflight_bytes =
      std::max<uint64_t>(16 * message_bytes, uint64_t{16} << 20);
  options.engine.kernel = kernel;
  options.engine.executor = pool;
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string malloc_setup = SetUpMalloc();
  Workload w;
  w.stream_bytes = absl::GetFlag(FLAGS_stream_bytes);
  w.message_bytes = absl::GetFlag(FLAGS_message_bytes);
  w.streams = std::max<uint32_t>(1, absl::GetFlag(FLAGS_streams));
  const size_t threads =
      absl::GetFlag(FLAGS_threads) != 0
          ? absl::GetFlag(FLAGS_threads)
          : std::max(1u, std::thread::hardware_concurrency());

  auto index = chunkd::index::CreateIndex("memory");
  if (!index.ok()) return 1;
  chunkd::pipeline::WorkerPool pool(threads);
  // CHUNKD_BACKEND's kernel, else nullptr: auto, as chunkd. The calibration
  // runs here, on the idle pool, not during the first timed stream.
  auto kernel = chunkd::chunking::kernels::ForcedKernel();
  if (!kernel.ok()) return 1;
  if (*kernel == nullptr) {
    chunkd::chunking::CalibrateAutoKernels(chunkd::chunking::AllAlgorithms(),
                                           &pool);
  }
  chunkd::metrics::Metrics metrics(
      "bench", *kernel == nullptr ? "auto" : (*kernel)->name);
  chunkd::service::ChunkServiceImpl service(BenchServiceOptions(
      index->get(), &pool, &metrics, *kernel, w.message_bytes));
  SinkService sink;

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(2 * w.message_bytes + 4096));
  builder.RegisterService(&service);
  builder.RegisterCallbackGenericService(&sink);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(
      absl::StrFormat("127.0.0.1:%d", port), grpc::InsecureChannelCredentials(),
      args);
  grpc::GenericStub stub(channel);

  // Messages per stream: distinct random data, so Dedup sees new chunks.
  const std::vector<uint8_t> random =
      chunkd::workload::RandomBytes(w.stream_bytes * w.streams, 7);
  w.data.assign(random.begin(), random.end());
  Run best[kConfigs][2];
  const uint32_t repetitions = std::max(1u, absl::GetFlag(FLAGS_repetitions));
  MeasureBest(&stub, w, repetitions, best);

  const std::string table =
      Table(best, (*kernel)->name, threads, w, repetitions, malloc_setup);
  std::fputs(table.c_str(), stdout);
  const std::string markdown = absl::GetFlag(FLAGS_markdown);
  if (!markdown.empty() && !chunkd::workload::WriteTextFile(markdown, table)) {
    std::fprintf(stderr, "cannot write %s\n", markdown.c_str());
    return 1;
  }
  server->Shutdown();
  return 0;
}
