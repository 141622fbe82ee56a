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
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
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
#include "index/redis_config.h"
#include "index/redis_connection.h"
#include "index/redis_index.h"
#include "index/redis_layout.h"
#include "support/redis_process.h"

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

namespace chunkd::index {
namespace {

constexpr char kNamespace[] = "bench";
constexpr char kParamsKey[] = "fastcdc:4096:16384:65536:2:0";
constexpr int kBaselineDb = 2;
// Runs of fingerprints: measurements use 1.., their raw commands 1000000..,
// fills kFillRun + the fill's index.
constexpr uint64_t kRawRun = 1000000;
constexpr uint64_t kFillRun = 5000000;

// The targets set for the new layout (docs/benchmarks.md, "The Redis
// index", where the run prints them): used_memory per entry at 10M
// entries, and Redis CPU per operation as a multiple of a pipelined SET's.
constexpr int64_t kTargetFill = 10000000;
constexpr double kTargetBytes = 64;
constexpr double kTargetBytesHinted = 80;

uint64_t Mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}

std::string Fingerprint(uint64_t run, uint64_t i) {
  std::string fp(32, '\0');
  uint64_t x = (run << 40) ^ (i + 1) * 0x9e3779b97f4a7c15ull;
  for (size_t k = 0; k < fp.size(); k += 8) {
    x = Mix(x);
    for (size_t b = 0; b < 8; ++b) fp[k + b] = static_cast<char>(x >> (8 * b));
  }
  return fp;
}

// The size of chunk i of a fill: 4-28 KiB (fastcdc 4/16/64 KiB's bulk), so
// that sizes and hints take 2 or 3 bytes each as in real streams.
uint32_t ChunkSize(uint64_t run, uint64_t i) {
  return 4096 + static_cast<uint32_t>(
                    Mix((run << 40) ^ (i * 0x2545f4914f6cdd1dull) ^ 77) %
                    24576);
}

// The numeric INFO `section` fields `names` (with their colon) summed, or
// -1 when one is missing.
double InfoSum(testing::DirectRedis& direct, const char* section,
               const std::vector<const char*>& names) {
  auto reply = direct.Command({"INFO", section});
  if (!reply.ok() || (*reply)->type != REDIS_REPLY_STRING) return -1;
  double total = 0;
  size_t found = 0;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view((*reply)->str, (*reply)->len), "\r\n")) {
    for (const char* field : names) {
      if (absl::ConsumePrefix(&line, field)) {
        double v = 0;
        if (!absl::SimpleAtod(line, &v)) return -1;
        total += v;
        ++found;
      }
    }
  }
  return found == names.size() ? total : -1;
}

// CPU seconds the redis-server has used (INFO cpu: user + system), or -1.
double ServerCpuSeconds(testing::DirectRedis& direct) {
  return InfoSum(direct, "cpu", {"used_cpu_user:", "used_cpu_sys:"});
}

double UsedMemory(testing::DirectRedis& direct) {
  return InfoSum(direct, "memory", {"used_memory:"});
}

// used_memory once it holds still (within 0.05 % over a second; at most
// 60 s): a main dict that grew during the fill is rehashed into its new
// table incrementally, and holds both tables until then.
double SettledUsedMemory(testing::DirectRedis& direct) {
  double last = UsedMemory(direct);
  for (int i = 0; i < 60; ++i) {
    absl::SleepFor(absl::Seconds(1));
    const double now = UsedMemory(direct);
    if (now < 0 || std::abs(now - last) <= 0.0005 * last) return now;
    last = now;
  }
  return last;
}

// Runs work(thread, first, last) over [0, n) in batches of `batch` from
// `threads` threads; the first failure stops the others and is returned.
absl::Status ForBatches(
    int64_t n, int batch, int threads,
    const std::function<absl::Status(int, int64_t, int64_t)>& work) {
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  absl::Status failure;
  std::mutex failure_mu;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!failed.load()) {
        const int64_t first = next.fetch_add(batch);
        if (first >= n) return;
        absl::Status s = work(t, first, std::min(n, first + batch));
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(failure_mu);
          if (failure.ok()) failure = s;
          failed = true;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  return failure;
}

// A plain connection to one database, for pipelined raw commands.
class RawConnection {
 public:
  static absl::StatusOr<std::unique_ptr<RawConnection>> Open(
      const std::string& host, int port, int db) {
    redisContext* context = redisConnectWithTimeout(
        host.c_str(), port, absl::ToTimeval(absl::Seconds(1)));
    if (context == nullptr || context->err != 0) {
      if (context != nullptr) redisFree(context);
      return absl::UnavailableError("raw: cannot connect");
    }
    redisSetTimeout(context, absl::ToTimeval(absl::Seconds(60)));
    auto raw = std::unique_ptr<RawConnection>(new RawConnection(context));
    raw->Append({"SELECT", std::to_string(db)});
    absl::StatusOr<ReplyPtr> ok = raw->Read();
    if (!ok.ok()) return ok.status();
    return raw;
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  ~RawConnection() { redisFree(context_); }

  void Append(const std::vector<absl::string_view>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> len;
    for (absl::string_view a : args) {
      argv.push_back(a.data());
      len.push_back(a.size());
    }
    RedisAppend(context_, static_cast<int>(args.size()), argv.data(),
                len.data());
  }
  absl::StatusOr<ReplyPtr> Read() {
    ReplyPtr reply = RedisReadReply(context_);
    if (reply == nullptr) {
      return absl::UnavailableError(absl::StrCat("raw: ", context_->errstr));
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      return absl::InternalError(
          absl::StrCat("raw: ", absl::string_view(reply->str, reply->len)));
    }
    return reply;
  }
  // Reads `count` replies, each the integer `want`.
  absl::Status ExpectIntegers(size_t count, long long want) {
    absl::Status status;
    for (size_t k = 0; k < count; ++k) {
      absl::StatusOr<ReplyPtr> reply = Read();
      if (!reply.ok()) return reply.status();
      if (status.ok() && ((*reply)->type != REDIS_REPLY_INTEGER ||
                          (*reply)->integer != want)) {
        status = absl::InternalError(
            absl::StrCat("raw: unexpected reply (wanted ", want, ")"));
      }
    }
    return status;
  }

 private:
  explicit RawConnection(redisContext* context) : context_(context) {}
  redisContext* context_;
};

// The redis-server measured: a private one, or --redis.
struct Server {
  std::unique_ptr<testing::RedisProcess> own;
  std::string host = "127.0.0.1";
  int port = 0;
};

// One layout under test: its index, in a database of its own.
struct Subject {
  const char* name = "";  // "old", "new"
  bool legacy = false;
  int db = 0;
  std::unique_ptr<FingerprintIndex> index;
  std::unique_ptr<testing::DirectRedis> direct;  // SELECTed to db
  std::optional<BucketLayout> buckets;           // new layout only

  std::string Key(absl::string_view fp) const {
    return legacy ? LegacyEntryKey(kNamespace, fp)
                  : buckets->BucketKey(kNamespace, fp);
  }
  absl::string_view Field(absl::string_view fp) const {
    return legacy ? absl::string_view() : buckets->Field(fp);
  }
  // An empty database; the new layout keeps its layout key.
  absl::Status Flush() {
    if (auto s = direct->Command({"FLUSHDB"}); !s.ok()) return s.status();
    if (legacy) return absl::OkStatus();
    return direct
        ->Command({"HSET", kLayoutKey, "version",
                   std::to_string(kLayoutVersion), "bucket_bits",
                   std::to_string(buckets->bits())})
        .status();
  }
};

absl::StatusOr<std::unique_ptr<testing::DirectRedis>> ConnectDb(
    const Server& server, int db) {
  auto direct = testing::DirectRedis::Connect(server.host, server.port);
  if (!direct.ok()) return direct.status();
  if (auto s = (*direct)->Command({"SELECT", std::to_string(db)}); !s.ok()) {
    return s.status();
  }
  return direct;
}

absl::StatusOr<std::unique_ptr<Subject>> OpenSubject(
    const Server& server, bool legacy, const IndexOptions& options) {
  auto subject = std::make_unique<Subject>();
  subject->name = legacy ? "old" : "new";
  subject->legacy = legacy;
  subject->db = legacy ? 0 : 1;
  auto direct = ConnectDb(server, subject->db);
  if (!direct.ok()) return direct.status();
  subject->direct = *std::move(direct);
  if (auto s = subject->direct->Command({"FLUSHDB"}); !s.ok()) {
    return s.status();
  }
  auto config = ParseRedisSpec(
      absl::StrCat("redis://", server.host, ":", server.port, "/",
                   subject->db),
      options);
  if (!config.ok()) return config.status();
  config->legacy_layout = legacy;
  auto index = CreateRedisIndex(*std::move(config));
  if (!index.ok()) return index.status();
  subject->index = *std::move(index);
  if (!legacy) {
    auto bits = subject->direct->Command({"HGET", kLayoutKey, "bucket_bits"});
    int b = 0;
    if (!bits.ok() || (*bits)->type != REDIS_REPLY_STRING ||
        !absl::SimpleAtoi(absl::string_view((*bits)->str, (*bits)->len), &b)) {
      return absl::InternalError("the new index wrote no bucket_bits");
    }
    subject->buckets.emplace(b);
  }
  return subject;
}

// Inserts fingerprints [0, n) of `run`, each new with count 1.
absl::Status FillEntries(Subject& s, uint64_t run, int64_t n, int batch,
                         int threads) {
  return ForBatches(n, batch, threads,
                    [&](int, int64_t first, int64_t last) -> absl::Status {
                      std::vector<InsertEntry> entries;
                      for (int64_t i = first; i < last; ++i) {
                        entries.push_back(
                            {Fingerprint(run, i), ChunkSize(run, i)});
                      }
                      auto r = s.index->Insert(kNamespace, entries, nullptr);
                      if (!r.ok()) return r.status();
                      for (const InsertResult& x : *r) {
                        if (!x.is_new || x.ref_count != 1) {
                          return absl::InternalError(
                              "fill: an insert was not new with count 1");
                        }
                      }
                      return absl::OkStatus();
                    });
}

// Entry i's hint: the size of chunk i + 1, then its run (i + 2 .. i + 4).
NextSize HintOf(uint64_t run, int64_t i) {
  return NextSize(Fingerprint(run, i), ChunkSize(run, i + 1),
                  {ChunkSize(run, i + 2), ChunkSize(run, i + 3),
                   ChunkSize(run, i + 4)});
}

absl::Status FillHints(Subject& s, uint64_t run, int64_t n, int batch,
                       int threads) {
  return ForBatches(n, batch, threads,
                    [&](int, int64_t first, int64_t last) -> absl::Status {
                      std::vector<NextSize> hints;
                      for (int64_t i = first; i < last; ++i) {
                        hints.push_back(HintOf(run, i));
                      }
                      return s.index->RecordNextSizes(kNamespace, kParamsKey,
                                                      hints);
                    });
}

// Entries spread over [0, n): at most `sample` of them.
std::vector<int64_t> SampleOf(int64_t n, int sample) {
  std::vector<int64_t> out;
  const int64_t step = std::max<int64_t>(1, n / std::max(sample, 1));
  for (int64_t i = 0; i < n && static_cast<int>(out.size()) < sample;
       i += step) {
    out.push_back(i);
  }
  return out;
}

// Every sampled entry's hints read back as FillHints wrote them.
absl::Status CheckHints(Subject& s, uint64_t run, int64_t n, int sample) {
  std::vector<std::string> fps;
  std::vector<NextSize> want;
  for (int64_t i : SampleOf(n, sample)) {
    want.push_back(HintOf(run, i));
    fps.push_back(want.back().fingerprint);
  }
  for (size_t k = 0; k < fps.size(); k += 256) {
    const size_t count = std::min<size_t>(256, fps.size() - k);
    auto got = s.index->NextHintsOf(
        kNamespace, kParamsKey, absl::MakeConstSpan(fps).subspan(k, count));
    if (!got.ok()) return got.status();
    for (size_t j = 0; j < count; ++j) {
      const NextHints& h = (*got)[j];
      const NextSize& w = want[k + j];
      if (h.sizes != std::vector<uint32_t>{w.next_size} || h.run != w.run) {
        return absl::InternalError(
            absl::StrCat(s.name, ": hints read back differ from those "
                                 "recorded"));
      }
    }
  }
  return absl::OkStatus();
}

// What a fill left in a database.
struct FillCheck {
  int64_t keys = 0;     // entry keys (old) or buckets (new)
  int64_t entries = 0;  // DBSIZE (old) or the buckets' HLEN summed (new)
  int sampled = 0;      // distinct keys asked OBJECT ENCODING
  int listpack = 0;     // of them, listpack-encoded
};

// The new layout's buckets (SCAN) and their entries (HLEN, pipelined).
absl::Status CountBuckets(Subject& s, RawConnection& raw, FillCheck* check) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  const std::string match =
      absl::StrCat(s.buckets->KeyPrefix(kNamespace), "*");
  do {
    auto reply = s.direct->Command(
        {"SCAN", cursor, "MATCH", match, "COUNT", "10000"});
    if (!reply.ok()) return reply.status();
    const redisReply& r = **reply;
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 2) {
      return absl::InternalError("SCAN: unexpected reply");
    }
    cursor.assign(r.element[0]->str, r.element[0]->len);
    for (size_t k = 0; k < r.element[1]->elements; ++k) {
      keys.emplace_back(r.element[1]->element[k]->str,
                        r.element[1]->element[k]->len);
    }
  } while (cursor != "0");
  for (const std::string& key : keys) raw.Append({"HLEN", key});
  for (size_t k = 0; k < keys.size(); ++k) {
    auto reply = raw.Read();
    if (!reply.ok()) return reply.status();
    check->entries += (*reply)->integer;
  }
  check->keys = static_cast<int64_t>(keys.size());
  return absl::OkStatus();
}

absl::StatusOr<FillCheck> CheckFill(Subject& s, const Server& server,
                                    uint64_t run, int64_t n, int sample) {
  FillCheck check;
  auto raw = RawConnection::Open(server.host, server.port, s.db);
  if (!raw.ok()) return raw.status();
  if (s.legacy) {
    auto size = s.direct->Integer({"DBSIZE"});
    if (!size.ok()) return size.status();
    check.keys = check.entries = *size;
  } else if (absl::Status c = CountBuckets(s, **raw, &check); !c.ok()) {
    return c;
  }
  if (check.entries != n) {
    return absl::InternalError(absl::StrCat(s.name, ": ", check.entries,
                                            " entries after a fill of ", n));
  }
  std::set<std::string> keys;
  for (int64_t i : SampleOf(n, sample)) keys.insert(s.Key(Fingerprint(run, i)));
  for (const std::string& key : keys) (*raw)->Append({"OBJECT", "ENCODING", key});
  for (size_t k = 0; k < keys.size(); ++k) {
    auto reply = (*raw)->Read();
    if (!reply.ok()) return reply.status();
    if (absl::string_view((*reply)->str, (*reply)->len) == "listpack") {
      ++check.listpack;
    }
  }
  check.sampled = static_cast<int>(keys.size());
  return check;
}

// One layout's memory at one fill.
struct Footprint {
  int64_t entries = 0;
  double plain = -1;   // used_memory per entry without hints
  double hinted = -1;  // with a hint and its run per entry
  FillCheck check;
};

absl::StatusOr<Footprint> MeasureFootprint(Subject& s, const Server& server,
                                           uint64_t run, int64_t n) {
  const int batch = absl::GetFlag(FLAGS_fill_batch);
  const int threads = absl::GetFlag(FLAGS_threads);
  const int sample = absl::GetFlag(FLAGS_encoding_sample);
  if (absl::Status f = s.Flush(); !f.ok()) return f;
  Footprint fp;
  fp.entries = n;
  const double before = SettledUsedMemory(*s.direct);
  if (absl::Status f = FillEntries(s, run, n, batch, threads); !f.ok()) {
    return f;
  }
  const double filled = SettledUsedMemory(*s.direct);
  if (absl::Status f = FillHints(s, run, n, batch, threads); !f.ok()) {
    return f;
  }
  const double hinted = SettledUsedMemory(*s.direct);
  if (before < 0 || filled < 0 || hinted < 0) {
    return absl::InternalError("INFO memory: no used_memory");
  }
  fp.plain = (filled - before) / static_cast<double>(n);
  fp.hinted = (hinted - before) / static_cast<double>(n);
  if (absl::Status c = CheckHints(s, run, n, 1000); !c.ok()) return c;
  auto check = CheckFill(s, server, run, n, sample);
  if (!check.ok()) return check.status();
  fp.check = *check;
  return fp;
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
// (-P 64, its default 50 connections) on database kBaselineDb, with the
// server's CPU per request. `random_keys`: -r, so that __rand_int__ in the
// command becomes a random 12-digit number (a new key each time, mostly).
Rate RedisBenchmark(testing::DirectRedis& direct, const std::string& host,
                    int port, int requests, const std::string& command,
                    int64_t random_keys) {
  const std::string line = absl::StrCat(
      "redis-benchmark -h ", host, " -p ", port, " --dbnum ", kBaselineDb,
      " -P 64 -n ", requests,
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
//   SET      SET of one key, again and again: the yardstick;
//   SET -r   SET of new keys;
//   HSET, HINCRBY, EXISTS of random keys.
struct Baselines {
  Rate set, set_r, hset_new, hincrby, exists;
};

// `direct` is on database kBaselineDb.
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
// connection per thread, without scripts (and without their atomicity).
enum class Raw {
  kCreate,     // old: HSET <key> r 1 s 16384 of a new key (replies 2);
               // new: HSET <bucket> <field> <value> of a new field (1)
  kIncrement,  // old: HINCRBY <key> r 1 (replies 4, a fourth reference);
               // new: HSET <bucket> <field> <value of count 4> (0)
  kExists,     // old: EXISTS <key>; new: HEXISTS <bucket> <field> (1)
};

// One raw command for fingerprint `fp` of `s`, appended; its reply.
long long AppendRaw(const Subject& s, Raw raw, const std::string& fp,
                    const std::string& key, const std::string& value,
                    RawConnection& c) {
  if (s.legacy) {
    switch (raw) {
      case Raw::kCreate:
        c.Append({"HSET", key, "r", "1", "s", "16384"});
        return 2;
      case Raw::kIncrement:
        c.Append({"HINCRBY", key, "r", "1"});
        return 4;
      case Raw::kExists:
        c.Append({"EXISTS", key});
        return 1;
    }
  }
  switch (raw) {
    case Raw::kCreate:
      c.Append({"HSET", key, s.Field(fp), value});
      return 1;
    case Raw::kIncrement:
      c.Append({"HSET", key, s.Field(fp), value});
      return 0;
    case Raw::kExists:
      c.Append({"HEXISTS", key, s.Field(fp)});
      return 1;
  }
  return -1;
}

// What `run`'s first n fingerprints cost the server per operation, from
// `threads` connections, or ops < 0 (printed) after a failure. `work`
// gets the thread's connection and a batch.
Rate MeasureOnConnections(
    testing::DirectRedis& direct, const Server& server, int db, int n,
    int batch, int threads,
    const std::function<absl::Status(RawConnection&, int64_t, int64_t)>&
        work) {
  std::vector<std::unique_ptr<RawConnection>> connections;
  for (int t = 0; t < threads; ++t) {
    auto c = RawConnection::Open(server.host, server.port, db);
    if (!c.ok()) {
      std::fprintf(stderr, "index_bench: %s\n",
                   std::string(c.status().message()).c_str());
      return Rate{};
    }
    connections.push_back(*std::move(c));
  }
  const double cpu_before = ServerCpuSeconds(direct);
  const absl::Time start = absl::Now();
  absl::Status status =
      ForBatches(n, batch, threads, [&](int t, int64_t first, int64_t last) {
        return work(*connections[t], first, last);
      });
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu_after = ServerCpuSeconds(direct);
  Rate rate;
  if (!status.ok()) {
    std::fprintf(stderr, "index_bench: %s\n",
                 std::string(status.message()).c_str());
    return rate;
  }
  rate.ops = n / seconds;
  if (cpu_before >= 0 && cpu_after >= 0) {
    rate.server_us = 1e6 * (cpu_after - cpu_before) / n;
    rate.server_busy = (cpu_after - cpu_before) / seconds;
  }
  return rate;
}

Rate MeasureRaw(Subject& s, const Server& server, Raw raw, uint64_t run,
                int n, int batch, int threads) {
  const std::string value = EncodeEntryValue(
      EntryValue{raw == Raw::kCreate ? 1u : 4u, 16384, {}});
  return MeasureOnConnections(
      *s.direct, server, s.db, n, batch, threads,
      [&](RawConnection& c, int64_t first, int64_t last) {
        long long want = 0;
        for (int64_t i = first; i < last; ++i) {
          const std::string fp = Fingerprint(run, i);
          want = AppendRaw(s, raw, fp, s.Key(fp), value, c);
        }
        return c.ExpectIntegers(last - first, want);
      });
}

// Deletes `run`'s first n entries (each must exist), unmeasured.
absl::Status DeleteEntries(Subject& s, const Server& server, uint64_t run,
                           int n, int threads) {
  Rate r = MeasureOnConnections(
      *s.direct, server, s.db, n, 1024, threads,
      [&](RawConnection& c, int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i) {
          const std::string fp = Fingerprint(run, i);
          if (s.legacy) {
            c.Append({"DEL", s.Key(fp)});
          } else {
            c.Append({"HDEL", s.Key(fp), s.Field(fp)});
          }
        }
        return c.ExpectIntegers(last - first, 1);
      });
  return r.ops < 0 ? absl::InternalError("clean-up failed") : absl::OkStatus();
}

// Checks the answers of one batch of `op`.
absl::Status RunOp(FingerprintIndex& index, Op op, uint64_t run, int64_t first,
                   int64_t last) {
  std::vector<InsertEntry> entries;
  std::vector<std::string> fps;
  for (int64_t i = first; i < last; ++i) {
    fps.push_back(Fingerprint(run, i));
    entries.push_back({fps.back(), 16384});
  }
  bool wrong = false;
  if (op == Op::kLookup) {
    auto found = index.Lookup(kNamespace, fps);
    if (!found.ok()) return found.status();
    for (bool f : *found) wrong = wrong || !f;
  } else {
    // kInsertTokened: a third reference, idempotent per position
    // (WriteToken), as Dedup streams write.
    const WriteToken token{absl::StrCat("bench-", run),
                           static_cast<uint64_t>(first)};
    auto inserted = index.Insert(kNamespace, entries,
                                 op == Op::kInsertTokened ? &token : nullptr);
    if (!inserted.ok()) return inserted.status();
    const uint64_t expect_count = op == Op::kInsertNew         ? 1
                                  : op == Op::kInsertDuplicate ? 2
                                                               : 3;
    for (const InsertResult& r : *inserted) {
      wrong = wrong || r.is_new != (op == Op::kInsertNew) ||
              r.ref_count != expect_count;
    }
  }
  return wrong ? absl::InternalError("wrong answers from the index")
               : absl::OkStatus();
}

// Runs `op` over fingerprints [0, n) of `run` split over threads.
Rate Measure(Subject& s, Op op, uint64_t run, int n, int batch, int threads) {
  const double cpu_before = ServerCpuSeconds(*s.direct);
  const absl::Time start = absl::Now();
  absl::Status status =
      ForBatches(n, batch, threads, [&](int, int64_t first, int64_t last) {
        return RunOp(*s.index, op, run, first, last);
      });
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu_after = ServerCpuSeconds(*s.direct);
  Rate rate;
  if (!status.ok()) {
    std::fprintf(stderr, "index_bench: %s: %s\n", s.name,
                 std::string(status.message()).c_str());
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
}  // namespace chunkd::index

int main(int argc, char** argv) { return chunkd::index::Main(argc, argv); }
