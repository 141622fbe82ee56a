// index_bench: the Redis index's two layouts side by side on one private
// redis-server in one run (docs/benchmarks.md, "How we measure", "The Redis
// index"): the bucket layout chunkd writes ("new", redis_layout.h) and the
// key-per-entry layout of chunkd 0.3 ("old", RedisConfig::legacy_layout),
// each in a database of its own (0 old, 1 new; redis-benchmark uses 2).
//
// 1. Bytes per entry. For each --fill count N, each layout's database is
//    flushed and filled through chunkd's index API (Insert, batches of
//    --fill_batch from --threads threads, as Dedup writes) with N random
//    32-byte fingerprints (SHA-256 alike) of chunk sizes of 4-28 KiB; then
//    every entry gets a next-size hint and its run of 3 sizes under one
//    parameter key (RecordNextSizes, the sizes of the entries after it, as a
//    stream records them). INFO memory's used_memory, once settled (an old
//    layout's main dict may still be rehashing), before the fill, after the
//    inserts and after the hints, over N: bytes per entry without and with
//    hints. OBJECT ENCODING of a sample of keys tells the share kept as
//    listpacks (a bucket converted to a full hash would cost several times
//    its listpack; the server runs with --hash-max-listpack-entries 512, as
//    tests/support/redis_process.h starts every server).
// 2. Redis CPU per operation at that fill (both databases filled, hints
//    included): insert of a new fingerprint, of a known one, of a known one
//    with a WriteToken (as Dedup streams write), lookup; --fingerprints per
//    measurement, batches of --batch, each batch one pipelined round trip.
//    The yardstick is `redis-benchmark -P 64` of `SET` on one key, measured
//    in the same repetition: the redis-server's CPU time per operation
//    (INFO cpu before and after) over SET's per request. Redis runs one
//    command at a time, so that ratio is the throughput ratio the two reach
//    when each keeps the server busy, whatever the client machine does.
//    Beside it, the plainest pipelined command on the very same keys
//    (MeasureRaw), without scripts or atomicity: for the old layout HSET of
//    a new key's two fields, HINCRBY, EXISTS; for the new one HSET of a new
//    field of the bucket, HSET over an existing field, HEXISTS. It
//    separates what the scripts cost from what the keys cost (a random key
//    misses the CPU caches, SET's one key never does; a bucket's listpack
//    is scanned field by field). After each repetition the entries it made
//    are deleted again, so that the fill stays N (to N + 2 * --fingerprints
//    during a repetition).
//
//   index_bench                          # its own redis-server, 1M and 10M
//   index_bench --fill=200000 --repetitions=3   # a smoke run
//   index_bench --redis=127.0.0.1:6379   # a server of yours: databases 0,
//                                        # 1 and 2 are flushed!
//
// The run checks its output and fails rather than print a wrong figure:
// every fill insert is new with count 1 and the databases hold exactly N
// entries (DBSIZE; the buckets' HLEN summed), hints read back as written;
// every measured first insert is new with count 1, the second a duplicate
// with count 2, the tokened one count 3, every lookup a hit, every raw
// command's and every clean-up's reply as expected. Repetitions are
// interleaved (baselines, then the layouts in alternating order) and
// medians reported: on a shared machine single runs vary by 2x.
#include "bench/index_bench_rates.h"
#include "absl/flags/parse.h"

ABSL_FLAG(std::string, redis, "",
          "host:port of a Redis to measure (its databases 0, 1 and 2 are "
          "flushed); empty: start a private redis-server on a free loopback "
          "port");
ABSL_FLAG(std::string, fill, "1000000,10000000",
          "entries each layout is filled with, comma-separated: bytes per "
          "entry and CPU per operation are measured at each");
ABSL_FLAG(int, fill_batch, 256,
          "fingerprints per Insert and RecordNextSizes call of the fill");
ABSL_FLAG(std::string, batch, "256", "batch sizes measured, comma-separated");
ABSL_FLAG(int, threads, 4, "client threads (each one batch in flight)");
ABSL_FLAG(int, pool_size, 0,
          "connections of chunkd's index (IndexOptions::pool_size); 0: as "
          "many as --threads");
ABSL_FLAG(int, fingerprints, 100000,
          "distinct fingerprints per measurement (inserted, then inserted "
          "again and looked up)");
ABSL_FLAG(int, benchmark_requests, 1000000, "redis-benchmark -n");
ABSL_FLAG(int, repetitions, 5,
          "measurements of everything, interleaved; medians are reported");
ABSL_FLAG(int, bucket_bits, 0,
          "the new layout's bucket bits (IndexOptions::redis_bucket_bits); "
          "0: chunkd's default");
ABSL_FLAG(int, encoding_sample, 10000,
          "entries whose key's OBJECT ENCODING is asked after each fill");

namespace chunkd::index::bench {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "index_bench: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

absl::Status StartOrFindServer(Server* server) {
  const std::string redis = absl::GetFlag(FLAGS_redis);
  if (redis.empty()) {
    // RedisProcess starts it with --hash-max-listpack-entries 512.
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

template <typename T>
absl::StatusOr<std::vector<T>> ParseList(const char* flag,
                                         const std::string& text) {
  std::vector<T> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    T v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --", flag, " entry '", item, "'"));
    }
    out.push_back(v);
  }
  return out;
}

constexpr int kNumOps = 4;
constexpr struct {
  Op op;
  const char* name;
  double target;  // the target for Redis CPU per op, x SET; 0: none
} kOps[kNumOps] = {{Op::kInsertNew, "insert (new)", 6.4},
                   {Op::kInsertDuplicate, "insert (duplicate)", 2.7},
                   {Op::kInsertTokened, "insert (dup, token)", 0},
                   {Op::kLookup, "lookup", 1.5}};
// The raw command measured beside each of kOps, per layout.
const char* RawName(const Subject& s, int op) {
  static constexpr const char* kOld[kNumOps] = {"HSET", "HINCRBY", "HINCRBY",
                                                "EXISTS"};
  static constexpr const char* kNew[kNumOps] = {"HSET", "HSET", "HSET",
                                                "HEXISTS"};
  return s.legacy ? kOld[op] : kNew[op];
}

// Per layout, batch size and operation, one value per repetition.
struct Series {
  std::vector<double> rps, ratio, server_us, server_busy, server_ratio, raw_rps,
      ratio_raw, raw_server_us;
};

// What every CPU measurement runs on.
struct Setup {
  const Server* server;
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

// Measures every operation and its raw command of `s` with batches of
// `batch` on fingerprints of `run`, adding to `series` (one per operation),
// then deletes what they created; false if a measurement failed.
bool MeasureBatch(const Setup& setup, Subject& s, uint64_t run, int batch,
                  const Baselines& b, std::vector<Series>& series) {
  const int n = setup.n;
  const int threads = setup.threads;
  const Server& server = *setup.server;
  Rate rates[kNumOps];
  for (int o = 0; o < kNumOps; ++o) {
    rates[o] = Measure(s, kOps[o].op, run, n, batch, threads);
  }
  // The raw commands last: the increment counts a fourth reference, the
  // create makes the entries of another run.
  const Rate exists =
      MeasureRaw(s, server, Raw::kExists, run, n, batch, threads);
  const Rate increment =
      MeasureRaw(s, server, Raw::kIncrement, run, n, batch, threads);
  const Rate create =
      MeasureRaw(s, server, Raw::kCreate, run + kRawRun, n, batch, threads);
  const Rate raw[kNumOps] = {create, increment, increment, exists};
  bool all_ok = true;
  for (int o = 0; o < kNumOps; ++o) {
    const Rate& r = rates[o];
    if (r.ops < 0 || raw[o].ops < 0) {
      all_ok = false;
      continue;
    }
    Series& x = series[o];
    x.rps.push_back(r.ops);
    x.ratio.push_back(r.ops / b.set.ops);
    x.server_us.push_back(r.server_us);
    x.server_busy.push_back(r.server_busy);
    x.server_ratio.push_back(r.server_us / b.set.server_us);
    x.raw_rps.push_back(raw[o].ops);
    x.ratio_raw.push_back(r.ops / raw[o].ops);
    x.raw_server_us.push_back(raw[o].server_us);
  }
  if (rates[0].ops >= 0 && !DeleteEntries(s, server, run, n, threads).ok()) {
    all_ok = false;
  }
  if (create.ops >= 0 &&
      !DeleteEntries(s, server, run + kRawRun, n, threads).ok()) {
    all_ok = false;
  }
  return all_ok;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median over repetitions of a[i] / b[i].
double MedianRatio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    r.push_back(a[i] / b[i]);
  }
  return Median(r);
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

// Per layout: per batch size, per operation.
using LayoutSeries = std::vector<std::vector<Series>>;

void PrintSeries(const std::vector<int>& batches, const Subject& s,
                 const LayoutSeries& series) {
  std::printf(
      "\n%s layout; server: redis-server CPU per operation, x SET: that "
      "over SET's per request; raw: the plainest command on the same keys, "
      "pipelined alike:\n",
      s.name);
  std::printf("%-6s %-19s %10s %8s %10s %7s %7s   %-7s %10s %7s %10s\n",
              "batch", "operation", "ops/s", "vs SET", "server us", "x SET",
              "busy", "raw", "raw ops/s", "vs raw", "raw us");
  for (size_t k = 0; k < batches.size(); ++k) {
    for (int o = 0; o < kNumOps; ++o) {
      const Series& x = series[k][o];
      std::printf(
          "%-6d %-19s %10.0f %7.0f%% %10.2f %6.2fx %6.0f%%   %-7s %10.0f "
          "%6.0f%% %10.2f\n",
          batches[k], kOps[o].name, Median(x.rps), 100 * Median(x.ratio),
          Median(x.server_us), Median(x.server_ratio),
          100 * Median(x.server_busy), RawName(s, o), Median(x.raw_rps),
          100 * Median(x.ratio_raw), Median(x.raw_server_us));
    }
  }
}

// Old and new side by side: Redis CPU per op over SET's, and new / old
// (the median of the per-repetition ratios), against the targets.
void PrintComparison(int64_t fill, double per_bucket,
                     const std::vector<int>& batches, const LayoutSeries& old,
                     const LayoutSeries& fresh) {
  std::printf(
      "\nRedis CPU per operation, x a pipelined SET's, at a fill of %lld "
      "entries (new layout: %.1f entries per bucket):\n",
      static_cast<long long>(fill), per_bucket);
  std::printf("%-6s %-19s %9s %9s %10s   %s\n", "batch", "operation", "old",
              "new", "new / old", "target (new)");
  for (size_t k = 0; k < batches.size(); ++k) {
    for (int o = 0; o < kNumOps; ++o) {
      const double a = Median(old[k][o].server_ratio);
      const double b = Median(fresh[k][o].server_ratio);
      const std::string verdict =
          kOps[o].target > 0
              ? absl::StrCat("<= ", kOps[o].target, "x: ",
                             b <= kOps[o].target ? "met" : "NOT met")
              : "-";
      std::printf("%-6d %-19s %8.2fx %8.2fx %9.2f    %s\n", batches[k],
                  kOps[o].name, a, b,
                  MedianRatio(fresh[k][o].server_us, old[k][o].server_us),
                  verdict.c_str());
    }
  }
}

void PrintFootprints(const std::vector<std::pair<Footprint, Footprint>>& fps) {
  std::printf(
      "\nRedis used_memory per entry (bytes; INFO memory after the fill "
      "minus before, over the entries; hints: one next size and a run of "
      "3 per entry):\n");
  std::printf("%-10s %-6s %9s %12s %10s %14s %12s\n", "entries", "layout",
              "no hints", "hints+runs", "keys", "entries/key", "listpack");
  for (const auto& [old, fresh] : fps) {
    for (const Footprint* f : {&old, &fresh}) {
      std::printf("%-10lld %-6s %9.1f %12.1f %10lld %14.1f %6.1f%% of %d\n",
                  static_cast<long long>(f->entries),
                  f == &old ? "old" : "new", f->plain, f->hinted,
                  static_cast<long long>(f->check.keys),
                  static_cast<double>(f->check.entries) / f->check.keys,
                  100.0 * f->check.listpack / f->check.sampled,
                  f->check.sampled);
    }
    std::printf("%-10s %-6s %8.2fx %11.2fx\n", "", "new/old",
                fresh.plain / old.plain, fresh.hinted / old.hinted);
    if (fresh.entries == kTargetFill) {
      std::printf(
          "  targets at %lld entries: <= %.0f bytes without hints: %.1f, "
          "%s; <= %.0f with hints and runs: %.1f, %s\n",
          static_cast<long long>(kTargetFill), kTargetBytes, fresh.plain,
          fresh.plain <= kTargetBytes ? "met" : "NOT met", kTargetBytesHinted,
          fresh.hinted, fresh.hinted <= kTargetBytesHinted ? "met" : "NOT met");
    }
  }
}

// Everything the run keeps between phases.
struct Bench {
  Server server;
  std::unique_ptr<testing::DirectRedis> baseline;  // on kBaselineDb
  std::unique_ptr<Subject> subjects[2];            // old, new
  std::vector<int> batches;
  std::vector<std::pair<Footprint, Footprint>> footprints;
  uint64_t run = 0;  // of the last measurement
  bool all_ok = true;
};

// The CPU phase at one fill: repetitions of the baselines and both
// layouts (in alternating order) at every batch size.
void MeasureCpu(Bench& bench, int64_t fill, double per_bucket) {
  const Setup setup{&bench.server, absl::GetFlag(FLAGS_fingerprints),
                    absl::GetFlag(FLAGS_threads)};
  const int requests = absl::GetFlag(FLAGS_benchmark_requests);
  std::vector<Baselines> baselines;
  LayoutSeries series[2] = {
      LayoutSeries(bench.batches.size(), std::vector<Series>(kNumOps)),
      LayoutSeries(bench.batches.size(), std::vector<Series>(kNumOps))};
  for (int rep = 0; rep < absl::GetFlag(FLAGS_repetitions); ++rep) {
    auto measured = MeasureBaselines(*bench.baseline, bench.server.host,
                                     bench.server.port, requests);
    if (!measured.ok()) {
      Fail(measured.status());
      bench.all_ok = false;
      return;
    }
    baselines.push_back(*measured);
    PrintBaselines(rep, *measured);
    for (int l = 0; l < 2; ++l) {
      const int which = (l + rep) % 2;
      for (size_t k = 0; k < bench.batches.size(); ++k) {
        bench.all_ok = MeasureBatch(setup, *bench.subjects[which], ++bench.run,
                                    bench.batches[k], *measured,
                                    series[which][k]) &&
                       bench.all_ok;
      }
    }
  }
  PrintBaselineMedians(baselines);
  for (int l = 0; l < 2; ++l) {
    PrintSeries(bench.batches, *bench.subjects[l], series[l]);
  }
  PrintComparison(fill, per_bucket, bench.batches, series[0], series[1]);
}

// Fills both layouts with `fill` entries (memory), then measures CPU.
absl::Status MeasureFill(Bench& bench, int64_t fill, uint64_t run) {
  Footprint fp[2];
  for (int l = 0; l < 2; ++l) {
    const absl::Time start = absl::Now();
    auto measured =
        MeasureFootprint(*bench.subjects[l], bench.server, run, fill);
    if (!measured.ok()) return measured.status();
    fp[l] = *measured;
    std::printf(
        "%s layout, %lld entries: %.1f bytes each, %.1f with hints and "
        "runs; %lld keys, %.1f %% of %d sampled listpack (%.0f s)\n",
        bench.subjects[l]->name, static_cast<long long>(fill), fp[l].plain,
        fp[l].hinted, static_cast<long long>(fp[l].check.keys),
        100.0 * fp[l].check.listpack / fp[l].check.sampled,
        fp[l].check.sampled,
        absl::ToDoubleSeconds(absl::Now() - start));
    std::fflush(stdout);
  }
  bench.footprints.emplace_back(fp[0], fp[1]);
  MeasureCpu(bench, fill,
             static_cast<double>(fill) / static_cast<double>(fp[1].check.keys));
  std::fflush(stdout);
  for (auto& s : bench.subjects) {
    if (absl::Status f = s->Flush(); !f.ok()) return f;
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Bench bench;
  if (auto s = StartOrFindServer(&bench.server); !s.ok()) return Fail(s);
  auto baseline = ConnectDb(bench.server, kBaselineDb);
  if (!baseline.ok()) return Fail(baseline.status());
  bench.baseline = *std::move(baseline);
  const int threads = absl::GetFlag(FLAGS_threads);
  IndexOptions options;
  options.pool_size = absl::GetFlag(FLAGS_pool_size) > 0
                          ? absl::GetFlag(FLAGS_pool_size)
                          : std::max(threads, 1);
  options.redis_bucket_bits = absl::GetFlag(FLAGS_bucket_bits);
  for (int l = 0; l < 2; ++l) {
    auto subject = OpenSubject(bench.server, /*legacy=*/l == 0, options);
    if (!subject.ok()) return Fail(subject.status());
    bench.subjects[l] = *std::move(subject);
  }
  auto batches = ParseList<int>("batch", absl::GetFlag(FLAGS_batch));
  if (!batches.ok()) return Fail(batches.status());
  bench.batches = *batches;
  auto fills = ParseList<int64_t>("fill", absl::GetFlag(FLAGS_fill));
  if (!fills.ok()) return Fail(fills.status());
  std::printf(
      "redis at %s:%d (old layout in database 0, new in 1, bucket_bits %d), "
      "%d client threads, pool of %d connections, fills of %s entries in "
      "batches of %d, %d fingerprints per measurement, %d repetitions\n",
      bench.server.host.c_str(), bench.server.port,
      bench.subjects[1]->buckets->bits(), threads, options.pool_size,
      absl::GetFlag(FLAGS_fill).c_str(), absl::GetFlag(FLAGS_fill_batch),
      absl::GetFlag(FLAGS_fingerprints), absl::GetFlag(FLAGS_repetitions));
  for (size_t f = 0; f < fills->size(); ++f) {
    if (auto s = MeasureFill(bench, (*fills)[f], kFillRun + f); !s.ok()) {
      return Fail(s);
    }
  }
  PrintFootprints(bench.footprints);
  return bench.all_ok ? 0 : 1;
}

}  // namespace
}  // namespace chunkd::index::bench

int main(int argc, char** argv) { return chunkd::index::bench::Main(argc, argv); }
