// service_bench's client side: the streams it sends (the configurations
// measured, their parameters and messages), the reactor that sends them
// and reads the answers, and the client process the bench spawns of itself
// (--client_of) so that client and server do not share a process.
// service_bench.cc says what is measured and how.
#ifndef CHUNKD_SERVER_BENCH_SERVICE_BENCH_CLIENT_H_
#define CHUNKD_SERVER_BENCH_SERVICE_BENCH_CLIENT_H_

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

ABSL_DECLARE_FLAG(uint64_t, total_bytes);
ABSL_DECLARE_FLAG(uint64_t, message_bytes);
ABSL_DECLARE_FLAG(uint32_t, streams);
ABSL_DECLARE_FLAG(uint32_t, repetitions);
ABSL_DECLARE_FLAG(std::string, markdown);
ABSL_DECLARE_FLAG(uint32_t, threads);
ABSL_DECLARE_FLAG(bool, chunkd_malloc);
ABSL_DECLARE_FLAG(bool, redis);
ABSL_DECLARE_FLAG(std::string, rows);
ABSL_DECLARE_FLAG(std::string, client_of);

extern char** environ;

namespace chunkd::bench {

using Clock = std::chrono::steady_clock;
constexpr char kSinkMethod[] = "/chunkd.bench.Sink/Consume";
constexpr char kChunkMethod[] = "/chunkd.v1.ChunkService/Chunk";
constexpr char kDedupMethod[] = "/chunkd.v1.ChunkService/Dedup";
constexpr uint64_t kDataSeed = 7;

grpc::ByteBuffer Serialize(const google::protobuf::Message& message);

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

// What the client measures of one run.
struct ClientRun {
  double gbps = 0;
  double first_response_ms = 0;  // mean over streams
};

using Messages = std::vector<std::vector<grpc::ByteBuffer>>;

ClientRun RunStreams(grpc::GenericStub* stub, const char* method,
                     const Messages& messages, uint64_t total_bytes);

struct Config {
  const char* name;
  const char* method;
  bool dedup;
  bool fingerprint;
  bool redis;  // the service whose index is in redis-server
};
constexpr int kConfigs = 5;
constexpr int kRedisConfig = 4;
// The configs in the table's order. (A table at namespace scope here would
// hide every function below it from lizard 1.24.3, which misreads it after
// the flags' `uint64_t{64} << 20`: keep it in a function.)
const Config& ConfigAt(int c);

chunkd::v1::ChunkingParams BenchChunking();

// The first request of stream s: the parameters; a Dedup stream's get a
// fresh namespace per round, which keeps every chunk new.
grpc::ByteBuffer ParamsRequest(const Config& config, uint64_t round,
                               size_t s);

// Every stream's messages, serialized: stream s of `streams` a params
// request, then its share of `data` in requests of message_bytes.
Messages BuildMessages(const std::string& data, uint64_t message_bytes,
                       const Config& config, size_t streams, uint64_t round);

// The client process: one run per line "run <config> <streams> <round>" on
// stdin, answered "<GB/s> <first record ms>" on stdout; ends at EOF.
int RunClient(const std::string& ports);

// The client process, seen from the server: a pipe each way.
class ClientProcess {
 public:
  // Starts this binary with --client_of=<ports> and the workload's flags.
  static std::unique_ptr<ClientProcess> Start(int port, int redis_port) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return nullptr;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    posix_spawn_file_actions_addclose(&actions, to_child[1]);
    posix_spawn_file_actions_addclose(&actions, from_child[0]);
    std::vector<std::string> args = {
        "service_bench",
        absl::StrFormat("--client_of=%d,%d", port, redis_port),
        absl::StrFormat("--total_bytes=%d", absl::GetFlag(FLAGS_total_bytes)),
        absl::StrFormat("--message_bytes=%d",
                        absl::GetFlag(FLAGS_message_bytes))};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr,
                                    argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    if (spawned != 0) return nullptr;
    auto client = std::unique_ptr<ClientProcess>(new ClientProcess);
    client->pid_ = pid;
    client->to_ = fdopen(to_child[1], "w");
    client->from_ = fdopen(from_child[0], "r");
    return client;
  }

  // Ends the client (EOF on its stdin) and reaps it.
  ~ClientProcess() {
    if (to_ != nullptr) std::fclose(to_);
    if (from_ != nullptr) std::fclose(from_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

  // Has the client run config c with `streams` streams; false when it failed.
  bool Run(int c, size_t streams, uint64_t round, ClientRun* run) {
    std::fprintf(to_, "run %d %zu %llu\n", c, streams,
                 static_cast<unsigned long long>(round));  // NOLINT
    std::fflush(to_);
    char line[128];
    return std::fgets(line, sizeof(line), from_) != nullptr &&
           std::sscanf(line, "%lf %lf", &run->gbps,
                       &run->first_response_ms) == 2;
  }

 private:
  ClientProcess() = default;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace chunkd::bench

#endif  // CHUNKD_SERVER_BENCH_SERVICE_BENCH_CLIENT_H_
