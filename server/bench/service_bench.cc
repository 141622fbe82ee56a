// service_bench: what chunkd's Chunk and Dedup streams cost the server, in
// CPU seconds per GB received, over loopback gRPC, side by side with a raw
// gRPC byte sink (docs/benchmarks.md, "The service end to end").
//
// The server process hosts a real ChunkServiceImpl (shared WorkerPool,
// memory index, sha256) and, on the same port, a generic "sink" method that
// reads and discards every message; with redis-server on PATH, a second
// ChunkServiceImpl on another port keeps its index in a private
// redis-server. The client is a separate process (this binary again, with
// --client_of): it runs one configuration per command it reads, so the
// server's CPU time (getrusage of its whole process: gRPC's threads, the
// worker pool, everything) holds none of the client's work. gRPC shares its
// threads between a process's clients and servers, so counting only "server
// threads" inside one process could not be honest.
//
// Every configuration runs the same 1 MiB messages (a params request, then
// the data), with 1 and --streams concurrent streams, --repetitions times in
// interleaved order; the table has medians. Beside them, measured in the
// server process on one thread over the same bytes: the engine alone
// (StreamChunker, one thread) and SHA-256 of its chunks through the
// fingerprint library, which are the work the service cannot avoid. The
// process sets up malloc as chunkd does (service/allocator.h);
// --chunkd_malloc=false keeps glibc's defaults.
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
#include "absl/flags/parse.h"
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
#include "bench/service_bench_client.h"
#include "absl/flags/parse.h"

ABSL_FLAG(uint64_t, total_bytes, uint64_t{256} << 20,
          "bytes of unique data each run sends (the parallel runs split them "
          "over their streams)");
ABSL_FLAG(uint64_t, message_bytes, uint64_t{1} << 20,
          "data bytes per request message");
ABSL_FLAG(uint32_t, streams, 8, "concurrent streams of the parallel runs");
ABSL_FLAG(uint32_t, repetitions, 5,
          "runs per configuration, interleaved; medians are reported");
ABSL_FLAG(std::string, markdown, "", "also write the table to this file");
ABSL_FLAG(uint32_t, threads, 0, "server worker threads (0: one per core)");
ABSL_FLAG(bool, chunkd_malloc, true,
          "set up malloc as chunkd does (mmap and trim thresholds); false "
          "keeps glibc's defaults");
ABSL_FLAG(bool, redis, true,
          "also Dedup with the index in a private redis-server (skipped "
          "with a note when redis-server is not on PATH)");
ABSL_FLAG(std::string, rows, "",
          "only these rows, e.g. 1,2 (0 sink, 1 Chunk without fingerprint, 2 "
          "Chunk, 3 Dedup memory, 4 Dedup redis; for profiling); empty: all");
ABSL_FLAG(std::string, client_of, "",
          "internal: run as the client process of the server listening on "
          "these ports (memory,redis; redis 0 when absent)");

namespace chunkd::bench {
namespace {

struct Usage {
  double cpu = 0;
  double switches = 0;
  double faults = 0;
};

Usage ProcessUsage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return {seconds(u.ru_utime) + seconds(u.ru_stime),
          static_cast<double>(u.ru_nvcsw + u.ru_nivcsw),
          static_cast<double>(u.ru_minflt)};
}

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// One run of one config, as the server saw it.
struct Sample {
  double gbps = 0;
  double first_response_ms = 0;
  double cpu_per_gb = 0;         // the server process
  double switches_per_mib = 0;   // the server process's context switches
  double faults_per_mib = 0;     // and its minor page faults
  double redis_cpu_per_gb = -1;  // the redis-server, for the redis config
};

// The library's own cost on the same bytes, one thread, CPU s/GB.
struct LibraryCost {
  double engine = 0;  // StreamChunker, 1 MiB appends
  double sha256 = 0;  // DigestManyTo of its chunks, per message
};

LibraryCost MeasureLibrary(const std::string& data, uint64_t message_bytes,
                           const chunkd::chunking::kernels::KernelSet* kernel) {
  chunkd::chunking::ChunkerOptions options;
  options.algorithm = chunkd::chunking::Algorithm::kFastCdc;
  options.min_size = 4096;
  options.avg_size = 16384;
  options.max_size = 65536;
  chunkd::chunking::EngineOptions engine;
  engine.kernel = kernel;
  auto chunker = chunkd::chunking::StreamChunker::Create(options, engine);
  if (!chunker.ok()) std::exit(1);
  std::vector<chunkd::chunking::Chunk> chunks;
  double start = ThreadCpuSeconds();
  for (uint64_t at = 0; at < data.size(); at += message_bytes) {
    (*chunker)->Append(absl::string_view(data).substr(at, message_bytes),
                       &chunks);
  }
  (*chunker)->Finish(&chunks);
  LibraryCost cost;
  const double gb = static_cast<double>(data.size()) / 1e9;
  cost.engine = (ThreadCpuSeconds() - start) / gb;

  // The chunks' SHA-256, in groups of about a message's worth.
  std::vector<unsigned char> digests(chunks.size() * 32);
  std::vector<absl::string_view> group;
  start = ThreadCpuSeconds();
  size_t first = 0, group_bytes = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    group.push_back(
        absl::string_view(data).substr(chunks[i].offset, chunks[i].length));
    group_bytes += chunks[i].length;
    if (group_bytes >= message_bytes || i + 1 == chunks.size()) {
      chunkd::fingerprint::DigestManyTo(chunkd::fingerprint::Kind::kSha256,
                                        group, &digests[first * 32]);
      first = i + 1;
      group.clear();
      group_bytes = 0;
    }
  }
  cost.sha256 = (ThreadCpuSeconds() - start) / gb;
  return cost;
}

// The service whose index is in a private redis-server, when there is one.
struct RedisSide {
#ifdef CHUNKD_BENCH_REDIS
  std::unique_ptr<chunkd::index::testing::RedisProcess> process;
  std::unique_ptr<chunkd::index::testing::DirectRedis> direct;
#endif
  std::unique_ptr<chunkd::index::FingerprintIndex> index;
  std::string note;  // why there is none
};

void StartRedis(RedisSide* redis) {
  if (!absl::GetFlag(FLAGS_redis)) {
    redis->note = "the redis row is off (--redis=false)";
    return;
  }
#ifdef CHUNKD_BENCH_REDIS
  namespace t = chunkd::index::testing;
  absl::Status tools = t::RedisToolsAvailable();
  if (!tools.ok()) {
    redis->note = absl::StrFormat("no redis row: %s", tools.message());
    return;
  }
  auto process = t::RedisProcess::Start({});
  auto direct = process.ok()
                    ? t::DirectRedis::Connect("127.0.0.1", (*process)->port())
                    : absl::StatusOr<std::unique_ptr<t::DirectRedis>>(
                          process.status());
  auto index = direct.ok() ? chunkd::index::CreateIndex(absl::StrFormat(
                                 "redis://127.0.0.1:%d", (*process)->port()))
                           : direct.status();
  if (!index.ok()) {
    redis->note = absl::StrFormat("no redis row: %s", index.status().message());
    return;
  }
  redis->process = *std::move(process);
  redis->direct = *std::move(direct);
  redis->index = *std::move(index);
#else
  redis->note = "no redis row: built without redis support";
#endif
}

// CPU seconds the redis-server has used (INFO cpu: user + system), or -1.
double RedisCpuSeconds(RedisSide* redis) {
#ifdef CHUNKD_BENCH_REDIS
  if (redis->direct == nullptr) return -1;
  auto reply = redis->direct->Command({"INFO", "cpu"});
  if (!reply.ok() || (*reply)->type != REDIS_REPLY_STRING) return -1;
  double total = 0;
  int found = 0;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view((*reply)->str, (*reply)->len), "\r\n")) {
    for (const char* field : {"used_cpu_user:", "used_cpu_sys:"}) {
      double v = 0;
      if (absl::ConsumePrefix(&line, field) && absl::SimpleAtod(line, &v)) {
        total += v;
        ++found;
      }
    }
  }
  return found == 2 ? total : -1;
#else
  (void)redis;
  return -1;
#endif
}

// Whether --rows names row c (or is empty).
bool RowSelected(int c) {
  const std::string rows = absl::GetFlag(FLAGS_rows);
  if (rows.empty()) return true;
  for (absl::string_view row : absl::StrSplit(rows, ',')) {
    int r = -1;
    if (absl::SimpleAtoi(row, &r) && r == c) return true;
  }
  return false;
}

// Per config and stream count (1, --streams), one sample per repetition.
struct Results {
  std::vector<Sample> samples[kConfigs][2];
  std::vector<LibraryCost> library;
};

// Runs every config --repetitions times, interleaved, with the library's
// costs measured once per repetition; false when the client failed.
bool MeasureAll(ClientProcess* client, RedisSide* redis,
                const std::string& data, size_t streams, uint32_t repetitions,
                const chunkd::chunking::kernels::KernelSet* kernel,
                Results* results) {
  const double gb = static_cast<double>(data.size()) / 1e9;
  const size_t stream_counts[2] = {1, streams};
  for (uint32_t rep = 0; rep < repetitions; ++rep) {
    results->library.push_back(
        MeasureLibrary(data, absl::GetFlag(FLAGS_message_bytes), kernel));
    for (int c = 0; c < kConfigs; ++c) {
      if (ConfigAt(c).redis && redis->index == nullptr) continue;
      if (!RowSelected(c)) continue;
      for (int n = 0; n < 2; ++n) {
        const double redis_before = RedisCpuSeconds(redis);
        const Usage before = ProcessUsage();
        ClientRun run;
        if (!client->Run(c, stream_counts[n], rep * 2 + n, &run)) return false;
        const Usage after = ProcessUsage();
        Sample s;
        s.gbps = run.gbps;
        s.first_response_ms = run.first_response_ms;
        s.cpu_per_gb = (after.cpu - before.cpu) / gb;
        const double mib = static_cast<double>(data.size() >> 20);
        s.switches_per_mib = (after.switches - before.switches) / mib;
        s.faults_per_mib = (after.faults - before.faults) / mib;
        if (ConfigAt(c).redis && redis_before >= 0) {
          s.redis_cpu_per_gb = (RedisCpuSeconds(redis) - redis_before) / gb;
        }
        results->samples[c][n].push_back(s);
      }
    }
  }
  return true;
}

template <typename T>
double Median(const std::vector<T>& items, double T::*field) {
  std::vector<double> v;
  for (const T& item : items) v.push_back(item.*field);
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2]
                           : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Largest over smallest CPU s/GB of a config's runs.
double Spread(const std::vector<Sample>& samples) {
  double lo = 1e300, hi = 0;
  for (const Sample& s : samples) {
    lo = std::min(lo, s.cpu_per_gb);
    hi = std::max(hi, s.cpu_per_gb);
  }
  return lo > 0 && hi > 0 ? hi / lo : 0;
}

// The targets the costs are held to, each as a ratio per stream count.
std::string TargetRows(const Results& r, size_t streams) {
  const double engine = Median(r.library, &LibraryCost::engine);
  const double sha = Median(r.library, &LibraryCost::sha256);
  for (int c = 0; c < kRedisConfig; ++c) {
    if (r.samples[c][0].empty()) return "";  // a partial run (--rows)
  }
  auto cpu = [&r](int c, int n) {
    return Median(r.samples[c][n], &Sample::cpu_per_gb);
  };
  std::string rows = absl::StrFormat(
      "\n| target (server CPU s/GB) | 1 stream | %zu streams | bound |\n"
      "|---|---|---|---|\n",
      streams);
  auto row = [&rows](const char* name, double one, double many,
                     const char* bound) {
    rows += absl::StrFormat("| %s | %.2f× | %.2f× | %s |\n", name, one, many,
                            bound);
  };
  row("Chunk, no fingerprint ÷ (sink + engine)",
      cpu(1, 0) / (cpu(0, 0) + engine), cpu(1, 1) / (cpu(0, 1) + engine),
      "≤ 1.00×");
  row("SHA-256 share of Chunk (Chunk, sha256 − Chunk, no fingerprint) ÷ "
      "library SHA-256",
      (cpu(2, 0) - cpu(1, 0)) / sha, (cpu(2, 1) - cpu(1, 1)) / sha, "≤ 1.15×");
  row("Dedup, memory index ÷ Chunk, sha256", cpu(3, 0) / cpu(2, 0),
      cpu(3, 1) / cpu(2, 1), "≤ 1.20×");
  return rows;
}

std::string Table(const Results& r, const char* kernel, size_t threads,
                  size_t streams, const std::string& malloc_setup,
                  const std::string& redis_note) {
  const uint64_t total = absl::GetFlag(FLAGS_total_bytes);
  std::string table = absl::StrFormat(
      "Server CPU seconds per GB received over loopback gRPC (user + system "
      "of the server process, every thread; the client is a separate "
      "process). %s backend, %zu worker threads, %d MiB of unique data per "
      "run in %d KiB messages, fastcdc 4/16/64 KiB; medians of %d runs in "
      "interleaved order; %s.\n\n"
      "| rpc | CPU s/GB, 1 stream | CPU s/GB, %zu streams | max ÷ min, 1 "
      "stream | GB/s, 1 stream | GB/s, %zu streams | context switches per "
      "MiB, 1 stream | page faults per MiB, 1 stream | first record ms, 1 "
      "stream |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      kernel, threads, total >> 20, absl::GetFlag(FLAGS_message_bytes) >> 10,
      r.library.size(), malloc_setup, streams, streams);
  for (int c = 0; c < kConfigs; ++c) {
    const auto& one = r.samples[c][0];
    const auto& many = r.samples[c][1];
    if (one.empty()) continue;
    table += absl::StrFormat(
        "| %s | %.3f | %.3f | %.2f | %.2f | %.2f | %.1f | %.1f | %s |\n",
        ConfigAt(c).name, Median(one, &Sample::cpu_per_gb),
        Median(many, &Sample::cpu_per_gb), Spread(one),
        Median(one, &Sample::gbps), Median(many, &Sample::gbps),
        Median(one, &Sample::switches_per_mib),
        Median(one, &Sample::faults_per_mib),
        c == 0 ? "–"
               : absl::StrFormat("%.2f",
                                 Median(one, &Sample::first_response_ms)));
  }
  table += absl::StrFormat(
      "\nThe same bytes on one thread of the server process: the engine "
      "alone (StreamChunker, %d KiB appends) %.3f CPU s/GB; SHA-256 of its "
      "chunks through the fingerprint library %.3f CPU s/GB.\n",
      absl::GetFlag(FLAGS_message_bytes) >> 10,
      Median(r.library, &LibraryCost::engine),
      Median(r.library, &LibraryCost::sha256));
  if (!r.samples[kRedisConfig][0].empty()) {
    table += absl::StrFormat(
        "The redis-server itself (not in the rows above): %.3f CPU s/GB "
        "with 1 stream, %.3f with %zu.\n",
        Median(r.samples[kRedisConfig][0], &Sample::redis_cpu_per_gb),
        Median(r.samples[kRedisConfig][1], &Sample::redis_cpu_per_gb),
        streams);
  } else {
    table += absl::StrFormat("(%s.)\n", redis_note);
  }
  return table + TargetRows(r, streams);
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
                   "trim_threshold %d MiB, arena_max %d",
                   setup.mmap_threshold >> 20, setup.trim_threshold >> 20,
                   setup.arena_max)
             : setup.description;
}

chunkd::service::ServiceOptions BenchServiceOptions(
    chunkd::index::FingerprintIndex* index, chunkd::pipeline::WorkerPool* pool,
    chunkd::metrics::Metrics* metrics,
    const chunkd::chunking::kernels::KernelSet* kernel, uint64_t message_bytes) {
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

// A server on a free loopback port with `services`; *port is set.
std::unique_ptr<grpc::Server> StartServer(
    const std::vector<grpc::Service*>& services,
    grpc::CallbackGenericService* generic, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           port);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(2 * absl::GetFlag(FLAGS_message_bytes) + 4096));
  for (grpc::Service* service : services) builder.RegisterService(service);
  if (generic != nullptr) builder.RegisterCallbackGenericService(generic);
  return builder.BuildAndStart();
}


}  // namespace

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (!absl::GetFlag(FLAGS_client_of).empty()) {
    return RunClient(absl::GetFlag(FLAGS_client_of));
  }
  const std::string malloc_setup = SetUpMalloc();
  const size_t streams = std::max<uint32_t>(1, absl::GetFlag(FLAGS_streams));
  const uint64_t message_bytes = absl::GetFlag(FLAGS_message_bytes);
  const size_t threads =
      absl::GetFlag(FLAGS_threads) != 0
          ? absl::GetFlag(FLAGS_threads)
          : std::max(1u, std::thread::hardware_concurrency());

  auto index = chunkd::index::CreateIndex("memory");
  if (!index.ok()) return 1;
  RedisSide redis;
  StartRedis(&redis);
  chunkd::pipeline::WorkerPool pool(threads);
  // CHUNKD_BACKEND's kernel, else nullptr: auto, as chunkd. The calibration
  // runs here, on the idle pool, not during the first timed stream.
  auto kernel = chunkd::chunking::kernels::ForcedKernelSet();
  if (!kernel.ok()) return 1;
  if (*kernel == nullptr) {
    chunkd::chunking::CalibrateAutoKernels(chunkd::chunking::AllAlgorithms(),
                                           &pool);
  }
  const char* kernel_name = *kernel == nullptr ? "auto" : (*kernel)->name;
  chunkd::metrics::Metrics metrics("bench", kernel_name);
  chunkd::service::ChunkServiceImpl service(BenchServiceOptions(
      index->get(), &pool, &metrics, *kernel, message_bytes));
  SinkService sink;
  int port = 0, redis_port = 0;
  std::unique_ptr<grpc::Server> server = StartServer({&service}, &sink, &port);
  std::unique_ptr<chunkd::service::ChunkServiceImpl> redis_service;
  std::unique_ptr<grpc::Server> redis_server;
  if (redis.index != nullptr) {
    redis_service = std::make_unique<chunkd::service::ChunkServiceImpl>(
        BenchServiceOptions(redis.index.get(), &pool, &metrics, *kernel,
                            message_bytes));
    redis_server = StartServer({redis_service.get()}, nullptr, &redis_port);
  }
  if (server == nullptr ||
      (redis.index != nullptr && redis_server == nullptr)) {
    return 1;
  }
  std::unique_ptr<ClientProcess> client =
      ClientProcess::Start(port, redis_port);
  if (client == nullptr) return 1;

  const std::vector<uint8_t> random = chunkd::workload::RandomBytes(
      absl::GetFlag(FLAGS_total_bytes), kDataSeed);
  const std::string data(random.begin(), random.end());
  Results results;
  if (!MeasureAll(client.get(), &redis, data, streams,
                  std::max(1u, absl::GetFlag(FLAGS_repetitions)), *kernel,
                  &results)) {
    std::fprintf(stderr, "the client process failed\n");
    return 1;
  }
  client.reset();
  const std::string table = Table(results, kernel_name, threads, streams,
                                  malloc_setup, redis.note);
  std::fputs(table.c_str(), stdout);
  const std::string markdown = absl::GetFlag(FLAGS_markdown);
  if (!markdown.empty() && !chunkd::workload::WriteTextFile(markdown, table)) {
    std::fprintf(stderr, "cannot write %s\n", markdown.c_str());
    return 1;
  }
  server->Shutdown();
  if (redis_server != nullptr) redis_server->Shutdown();
  return 0;
}

}  // namespace chunkd::bench

int main(int argc, char** argv) { return chunkd::bench::Main(argc, argv); }
