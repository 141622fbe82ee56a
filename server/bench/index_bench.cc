// index_bench: fingerprint index operations per second through chunkd's
// redis backend, side by side with redis-benchmark on the same server in the
// same run (docs/benchmarks.md, "How we measure"). The
// yardstick is `redis-benchmark -P 64 -t set`, which overwrites one key
// again and again. Two more yardsticks tell where the time goes:
//  - the redis-server's CPU time per operation (INFO cpu before and after),
//    next to SET's per request: Redis runs one command at a time, so that
//    ratio is the throughput ratio the two reach when each keeps the server
//    busy, whatever the client machine does meanwhile;
//  - the plainest pipelined command on the very same keys (MeasureRaw), the
//    ceiling of any client of this data model: a fingerprint's key is
//    random, so Redis misses its caches on it, while SET's one key never
//    leaves them.
//
//   index_bench                         # starts its own redis-server
//   index_bench --redis=127.0.0.1:6379  # an existing server (FLUSHDB'd!)
//
// Each operation is one fingerprint, in batches of --batch from --threads
// threads, each batch one pipelined round trip: insert of a new
// fingerprint, insert of a known one, insert of a known one with a
// WriteToken (as Dedup streams write), lookup. The run checks its output:
// every first insert is new with count 1, the second a duplicate with count
// 2, the tokened one count 3, every lookup a hit, every raw command's reply.
// Measurements are repeated (--repetitions, interleaved with
// redis-benchmark) and medians reported: on a shared machine single runs
// vary by 2x.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "index/fingerprint_index.h"
#include "index/redis_connection.h"
#include "index/redis_index.h"
#include "support/redis_process.h"

ABSL_FLAG(std::string, redis, "",
          "host:port of a Redis to measure (its database 0 is flushed); "
          "empty: start a private redis-server on a free loopback port");
ABSL_FLAG(std::string, batch, "64,256,1024", "batch sizes, comma-separated");
ABSL_FLAG(int, threads, 4, "client threads (each one batch in flight)");
ABSL_FLAG(int, pool_size, 0,
          "connections of chunkd's index (IndexOptions::pool_size); 0: as "
          "many as --threads");
ABSL_FLAG(int, fingerprints, 200000,
          "distinct fingerprints per measurement (inserted, then inserted "
          "again and looked up)");
ABSL_FLAG(int, benchmark_requests, 1000000, "redis-benchmark -n");
ABSL_FLAG(int, repetitions, 5,
          "measurements of everything, interleaved; medians are reported");

namespace chunkd::index {
namespace {

std::string Fingerprint(uint64_t run, uint64_t i) {
  std::string fp(32, '\0');
  uint64_t x = (run << 40) ^ (i + 1) * 0x9e3779b97f4a7c15ull;
  for (size_t k = 0; k < fp.size(); k += 8) {
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    for (size_t b = 0; b < 8; ++b) fp[k + b] = static_cast<char>(x >> (8 * b));
  }
  return fp;
}

// CPU seconds the redis-server has used (INFO cpu: user + system), or -1.
double ServerCpuSeconds(testing::DirectRedis& direct) {
  auto reply = direct.Command({"INFO", "cpu"});
  if (!reply.ok() || (*reply)->type != REDIS_REPLY_STRING) return -1;
  double total = 0;
  int found = 0;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view((*reply)->str, (*reply)->len), "\r\n")) {
    for (const char* field : {"used_cpu_user:", "used_cpu_sys:"}) {
      if (absl::ConsumePrefix(&line, field)) {
        double v = 0;
        if (!absl::SimpleAtod(line, &v)) return -1;
        total += v;
        ++found;
      }
    }
  }
  return found == 2 ? total : -1;
}

// A rate and what it cost the server: redis-server CPU time (user + system,
// all its threads) per operation, and that time over the wall time (near
// 100 %: the server was the limit).
struct Rate {
  double ops = -1;        // operations per second; < 0: failed
  double server_us = -1;  // server CPU microseconds per operation
  double server_busy = -1;
};

// redis-benchmark's requests per second for `command` pipelined 64 deep
// (-P 64, its default 50 connections), with the server's CPU per request.
// `random_keys`: -r, so that __rand_int__ in the command becomes a random
// 12-digit number (a new key each time, mostly).
Rate RedisBenchmark(testing::DirectRedis& direct, const std::string& host,
                    int port, int requests, const std::string& command,
                    int64_t random_keys) {
  const std::string line = absl::StrCat(
      "redis-benchmark -h ", host, " -p ", port, " -P 64 -n ", requests,
      random_keys > 0 ? absl::StrCat(" -r ", random_keys) : "", " --csv ",
      command, " 2>/dev/null");
  Rate rate;
  const double cpu_before = ServerCpuSeconds(direct);
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return rate;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    // "SET","431034.47",... after a header line "test","rps",...
    std::vector<std::string> fields = absl::StrSplit(buffer, ',');
    if (fields.size() >= 2 && fields[0] != "\"test\"") {
      std::string value = fields[1];
      value.erase(std::remove(value.begin(), value.end(), '"'), value.end());
      if (!absl::SimpleAtod(value, &rate.ops)) rate.ops = -1;
    }
  }
  pclose(pipe);
  const double cpu_after = ServerCpuSeconds(direct);
  if (rate.ops > 0 && cpu_before >= 0 && cpu_after >= 0) {
    const double cpu = cpu_after - cpu_before;
    rate.server_us = 1e6 * cpu / requests;
    rate.server_busy = cpu / (requests / rate.ops);
  }
  return rate;
}

// The baselines, each redis-benchmark -P 64 on the same server:
//   SET      SET of one key, again and again (`-t set`): the yardstick;
//   SET -r   SET of new keys;
//   HSET, HINCRBY, EXISTS of random keys: the plain commands an insert of a
//            new entry, of a known one and a lookup need at the least.
struct Baselines {
  Rate set, set_r, hset_new, hincrby, exists;
};

absl::StatusOr<Baselines> MeasureBaselines(testing::DirectRedis& direct,
                                           const std::string& host, int port,
                                           int requests) {
  Baselines b;
  constexpr int64_t kSpace = 1000000000;
  (void)direct.Command({"FLUSHDB"});
  b.set = RedisBenchmark(direct, host, port, requests, "SET key:one value", 0);
  b.set_r = RedisBenchmark(direct, host, port, requests,
                           "SET key:__rand_int__ value", kSpace);
  (void)direct.Command({"FLUSHDB"});
  b.hset_new = RedisBenchmark(direct, host, port, requests,
                              "HSET e:__rand_int__ r 1 s 16384", kSpace);
  (void)direct.Command({"FLUSHDB"});
  // 100000 keys, created by the first pass over them, then incremented.
  b.hincrby = RedisBenchmark(direct, host, port, requests,
                             "HINCRBY e:__rand_int__ r 1", 100000);
  b.exists = RedisBenchmark(direct, host, port, requests,
                            "EXISTS e:__rand_int__", 100000);
  (void)direct.Command({"FLUSHDB"});
  if (b.set.ops <= 0 || b.set_r.ops <= 0 || b.hset_new.ops <= 0 ||
      b.hincrby.ops <= 0 || b.exists.ops <= 0) {
    return absl::UnavailableError("redis-benchmark did not run");
  }
  return b;
}

enum class Op { kInsertNew, kInsertDuplicate, kInsertTokened, kLookup };

// The plainest commands over the very keys chunkd's operations use, in the
// same order, batches and threads, each batch one pipelined round trip on a
// connection per thread, without scripts (and without their atomicity):
// what Redis spends on these keys at the least. Comparing an operation with
// its raw command on the same keys separates what the scripts cost from
// what the keys cost (a random key misses the CPU caches; redis-benchmark's
// SET of one key never does).
enum class Raw {
  kHsetNew,  // HSET <key> r 1 s 16384 of a new key (expects 2)
  kHincrby,  // HINCRBY <key> r 1 (expects `expect`)
  kExists,   // EXISTS <key> (expects 1)
};

Rate MeasureRaw(testing::DirectRedis& direct, const std::string& host,
                int port, Raw raw, uint64_t run, int n, int batch, int threads,
                long long expect) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mu;
  auto fail = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(failure_mu);
    failure = why;
    failed = true;
  };
  const double cpu_before = ServerCpuSeconds(direct);
  const absl::Time start = absl::Now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      redisContext* context = redisConnectWithTimeout(
          host.c_str(), port, absl::ToTimeval(absl::Seconds(1)));
      if (context == nullptr || context->err != 0) {
        fail("raw: cannot connect");
        if (context != nullptr) redisFree(context);
        return;
      }
      redisSetTimeout(context, absl::ToTimeval(absl::Seconds(10)));
      std::vector<std::string> keys;
      while (!failed.load()) {
        const int first = next.fetch_add(batch);
        if (first >= n) break;
        const int last = std::min(n, first + batch);
        keys.clear();
        for (int i = first; i < last; ++i) {
          keys.push_back(LegacyEntryKey(
              "bench", Fingerprint(run, static_cast<uint64_t>(i))));
        }
        for (const std::string& key : keys) {
          switch (raw) {
            case Raw::kHsetNew: {
              const char* argv[] = {"HSET", key.data(), "r", "1", "s", "16384"};
              const size_t len[] = {4, key.size(), 1, 1, 1, 5};
              RedisAppend(context, 6, argv, len);
              break;
            }
            case Raw::kHincrby: {
              const char* argv[] = {"HINCRBY", key.data(), "r", "1"};
              const size_t len[] = {7, key.size(), 1, 1};
              RedisAppend(context, 4, argv, len);
              break;
            }
            case Raw::kExists: {
              const char* argv[] = {"EXISTS", key.data()};
              const size_t len[] = {6, key.size()};
              RedisAppend(context, 2, argv, len);
              break;
            }
          }
        }
        const long long want = raw == Raw::kHsetNew  ? 2
                               : raw == Raw::kExists ? 1
                                                     : expect;
        for (size_t k = 0; k < keys.size(); ++k) {
          ReplyPtr reply = RedisReadReply(context);
          if (reply == nullptr) {
            fail(absl::StrCat("raw: ", context->errstr));
            break;
          }
          if (reply->type != REDIS_REPLY_INTEGER || reply->integer != want) {
            fail("raw: unexpected reply");
            break;
          }
        }
      }
      redisFree(context);
    });
  }
  for (auto& w : workers) w.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu_after = ServerCpuSeconds(direct);
  Rate rate;
  if (failed) {
    std::fprintf(stderr, "index_bench: %s\n", failure.c_str());
    return rate;
  }
  rate.ops = n / seconds;
  if (cpu_before >= 0 && cpu_after >= 0) {
    rate.server_us = 1e6 * (cpu_after - cpu_before) / n;
    rate.server_busy = (cpu_after - cpu_before) / seconds;
  }
  return rate;
}

// Runs `op` over fingerprints [0, n) of `run` split over threads; returns
// its rate, or ops < 0 after printing what went wrong.
Rate Measure(FingerprintIndex& index, testing::DirectRedis& direct, Op op,
             uint64_t run, int n, int batch, int threads) {
  std::atomic<int> next{0};
  std::atomic<bool> wrong{false};
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mu;
  const double cpu_before = ServerCpuSeconds(direct);
  const absl::Time start = absl::Now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      std::vector<InsertEntry> entries;
      std::vector<std::string> fps;
      while (!failed.load()) {
        const int first = next.fetch_add(batch);
        if (first >= n) return;
        const int last = std::min(n, first + batch);
        entries.clear();
        fps.clear();
        for (int i = first; i < last; ++i) {
          fps.push_back(Fingerprint(run, static_cast<uint64_t>(i)));
          entries.push_back({fps.back(), 16384});
        }
        absl::Status status;
        if (op == Op::kLookup) {
          auto found = index.Lookup("bench", fps);
          status = found.status();
          if (found.ok()) {
            for (bool f : *found) wrong = wrong || !f;
          }
        } else {
          // kInsertTokened: a third reference, idempotent per position
          // (WriteToken), as Dedup streams write.
          const WriteToken token{"bench", static_cast<uint64_t>(first)};
          auto inserted = index.Insert(
              "bench", entries, op == Op::kInsertTokened ? &token : nullptr);
          status = inserted.status();
          if (inserted.ok()) {
            for (const InsertResult& r : *inserted) {
              const bool expect_new = op == Op::kInsertNew;
              const uint64_t expect_count = op == Op::kInsertNew         ? 1
                                            : op == Op::kInsertDuplicate ? 2
                                                                         : 3;
              wrong = wrong || r.is_new != expect_new ||
                      r.ref_count != expect_count;
            }
          }
        }
        if (!status.ok()) {
          std::lock_guard<std::mutex> lock(failure_mu);
          failure = std::string(status.message());
          failed = true;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu_after = ServerCpuSeconds(direct);
  Rate rate;
  if (failed) {
    std::fprintf(stderr, "index_bench: %s\n", failure.c_str());
    return rate;
  }
  if (wrong) {
    std::fprintf(stderr, "index_bench: wrong answers from the index\n");
    return rate;
  }
  rate.ops = n / seconds;
  if (cpu_before >= 0 && cpu_after >= 0) {
    rate.server_us = 1e6 * (cpu_after - cpu_before) / n;
    rate.server_busy = (cpu_after - cpu_before) / seconds;
  }
  return rate;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "index_bench: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

// The redis-server measured: a private one, or --redis.
struct Server {
  std::unique_ptr<testing::RedisProcess> own;
  std::string host = "127.0.0.1";
  int port = 0;
};

absl::Status StartOrFindServer(Server* server) {
  const std::string redis = absl::GetFlag(FLAGS_redis);
  if (redis.empty()) {
    auto started = testing::RedisProcess::Start({});
    if (!started.ok()) return started.status();
    server->own = *std::move(started);
    server->port = server->own->port();
    return absl::OkStatus();
  }
  std::vector<std::string> parts = absl::StrSplit(redis, ':');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &server->port)) {
    return absl::InvalidArgumentError("--redis must be host:port");
  }
  server->host = parts[0];
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseBatches() {
  std::vector<int> batches;
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batch), ',')) {
    int batch = 0;
    if (!absl::SimpleAtoi(b, &batch) || batch < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --batch entry '", b, "'"));
    }
    batches.push_back(batch);
  }
  return batches;
}

constexpr int kNumOps = 4;
constexpr struct {
  Op op;
  const char* name;
} kOps[kNumOps] = {{Op::kInsertNew, "insert (new)"},
                   {Op::kInsertDuplicate, "insert (duplicate)"},
                   {Op::kInsertTokened, "insert (dup, token)"},
                   {Op::kLookup, "lookup"}};
// The raw command measured beside each of kOps.
constexpr const char* kRawName[kNumOps] = {"HSET", "HINCRBY", "HINCRBY",
                                           "EXISTS"};

// Per batch size and operation, one value per repetition.
struct Series {
  std::vector<double> rps, ratio, server_us, server_busy, server_ratio, raw_rps,
      ratio_raw, raw_server_us;
};

// What every measurement runs on.
struct Setup {
  FingerprintIndex* index;
  testing::DirectRedis* direct;
  std::string host;
  int port;
  int n;  // fingerprints per measurement
  int threads;
};

void PrintBaselines(int rep, const Baselines& b) {
  std::printf(
      "rep %d: redis-benchmark -P 64: SET %.0f/s, SET -r %.0f/s, "
      "HSET (new) %.0f/s, HINCRBY %.0f/s, EXISTS %.0f/s; server CPU per "
      "op %.2f / %.2f / %.2f / %.2f / %.2f us\n",
      rep + 1, b.set.ops, b.set_r.ops, b.hset_new.ops, b.hincrby.ops,
      b.exists.ops, b.set.server_us, b.set_r.server_us, b.hset_new.server_us,
      b.hincrby.server_us, b.exists.server_us);
}

// Measures every operation and its raw command with batches of `batch`
// on fingerprints of `run`, adding to `series` (one per operation); false
// if a measurement failed.
bool MeasureBatch(const Setup& setup, uint64_t run, int batch,
                  const Baselines& b, std::vector<Series>& series) {
  testing::DirectRedis& direct = *setup.direct;
  const int n = setup.n;
  const int threads = setup.threads;
  (void)direct.Command({"FLUSHDB"});
  Rate rates[kNumOps];
  for (int o = 0; o < kNumOps; ++o) {
    rates[o] =
        Measure(*setup.index, direct, kOps[o].op, run, n, batch, threads);
  }
  // The raw commands last: HINCRBY counts a fourth reference, HSET
  // creates the entries of another run.
  const Rate exists = MeasureRaw(direct, setup.host, setup.port, Raw::kExists,
                                 run, n, batch, threads, 0);
  const Rate hincrby = MeasureRaw(direct, setup.host, setup.port, Raw::kHincrby,
                                  run, n, batch, threads, 4);
  const Rate hset_new =
      MeasureRaw(direct, setup.host, setup.port, Raw::kHsetNew, run + 1000000,
                 n, batch, threads, 0);
  const Rate raw[kNumOps] = {hset_new, hincrby, hincrby, exists};
  bool all_ok = true;
  for (int o = 0; o < kNumOps; ++o) {
    const Rate& r = rates[o];
    if (r.ops < 0 || raw[o].ops < 0) {
      all_ok = false;
      continue;
    }
    Series& s = series[o];
    s.rps.push_back(r.ops);
    s.ratio.push_back(r.ops / b.set.ops);
    s.server_us.push_back(r.server_us);
    s.server_busy.push_back(r.server_busy);
    s.server_ratio.push_back(r.server_us / b.set.server_us);
    s.raw_rps.push_back(raw[o].ops);
    s.ratio_raw.push_back(r.ops / raw[o].ops);
    s.raw_server_us.push_back(raw[o].server_us);
  }
  return all_ok;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void PrintBaselineMedians(const std::vector<Baselines>& baselines) {
  auto median_of = [&](Rate Baselines::*field, double Rate::*what) {
    std::vector<double> v;
    for (const Baselines& b : baselines) v.push_back(b.*field.*what);
    return Median(v);
  };
  std::printf("\nmedians, redis-benchmark -P 64 (50 connections):\n");
  std::printf("%-34s %10s %18s %12s\n", "baseline", "ops/s",
              "server CPU us/op", "server busy");
  const struct {
    Rate Baselines::*field;
    const char* name;
  } kBaselines[] = {{&Baselines::set, "SET (one key overwritten)"},
                    {&Baselines::set_r, "SET -r (new keys)"},
                    {&Baselines::hset_new, "HSET r s (new entries)"},
                    {&Baselines::hincrby, "HINCRBY (100000 keys)"},
                    {&Baselines::exists, "EXISTS (100000 keys)"}};
  for (const auto& base : kBaselines) {
    std::printf("%-34s %10.0f %18.2f %11.0f%%\n", base.name,
                median_of(base.field, &Rate::ops),
                median_of(base.field, &Rate::server_us),
                100 * median_of(base.field, &Rate::server_busy));
  }
}

void PrintSeries(const std::vector<int>& batches,
                 const std::vector<std::vector<Series>>& series) {
  std::printf(
      "\nchunkd's redis backend; server: redis-server CPU per operation, x "
      "SET: that over SET's per request; raw: the plainest command on the "
      "same keys, pipelined alike:\n");
  std::printf("%-6s %-19s %10s %8s %10s %7s %7s   %-7s %10s %7s %10s\n",
              "batch", "operation", "ops/s", "vs SET", "server us", "x SET",
              "busy", "raw", "raw ops/s", "vs raw", "raw us");
  for (size_t k = 0; k < batches.size(); ++k) {
    for (int o = 0; o < kNumOps; ++o) {
      const Series& s = series[k][o];
      std::printf(
          "%-6d %-19s %10.0f %7.0f%% %10.2f %6.1fx %6.0f%%   %-7s %10.0f "
          "%6.0f%% %10.2f\n",
          batches[k], kOps[o].name, Median(s.rps), 100 * Median(s.ratio),
          Median(s.server_us), Median(s.server_ratio),
          100 * Median(s.server_busy), kRawName[o], Median(s.raw_rps),
          100 * Median(s.ratio_raw), Median(s.raw_server_us));
    }
  }
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Server server;
  if (absl::Status s = StartOrFindServer(&server); !s.ok()) return Fail(s);
  auto direct = testing::DirectRedis::Connect(server.host, server.port);
  if (!direct.ok()) return Fail(direct.status());

  const int threads = absl::GetFlag(FLAGS_threads);
  const int n = absl::GetFlag(FLAGS_fingerprints);
  IndexOptions options;
  options.pool_size = absl::GetFlag(FLAGS_pool_size) > 0
                          ? absl::GetFlag(FLAGS_pool_size)
                          : std::max(threads, 1);
  auto index = CreateIndex(
      absl::StrCat("redis://", server.host, ":", server.port), options);
  if (!index.ok()) return Fail(index.status());
  auto batches = ParseBatches();
  if (!batches.ok()) return Fail(batches.status());

  std::printf(
      "redis at %s:%d, %d client threads, pool of %d connections, %d "
      "fingerprints per measurement, %d repetitions\n",
      server.host.c_str(), server.port, threads, options.pool_size, n,
      absl::GetFlag(FLAGS_repetitions));
  const Setup setup{index->get(), direct->get(), server.host, server.port, n,
                    threads};
  const int requests = absl::GetFlag(FLAGS_benchmark_requests);
  std::vector<Baselines> baselines;
  std::vector<std::vector<Series>> series(batches->size(),
                                          std::vector<Series>(kNumOps));
  uint64_t run = 0;
  bool all_ok = true;
  for (int rep = 0; rep < absl::GetFlag(FLAGS_repetitions); ++rep) {
    auto measured =
        MeasureBaselines(**direct, server.host, server.port, requests);
    if (!measured.ok()) return Fail(measured.status());
    baselines.push_back(*measured);
    PrintBaselines(rep, *measured);
    for (size_t k = 0; k < batches->size(); ++k) {
      ++run;
      all_ok = MeasureBatch(setup, run, (*batches)[k], *measured, series[k]) &&
               all_ok;
    }
  }
  PrintBaselineMedians(baselines);
  PrintSeries(*batches, series);
  (void)(*direct)->Command({"FLUSHDB"});
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace chunkd::index

int main(int argc, char** argv) { return chunkd::index::Main(argc, argv); }
