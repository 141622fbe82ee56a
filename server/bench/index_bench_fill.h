// index_bench's subjects and fills: the two Redis layouts under test (each
// an index in a database of its own), the fingerprints and sizes of a fill,
// filling and checking a database, and its bytes per entry. index_bench.cc
// says what is measured and how.
#ifndef CHUNKD_SERVER_BENCH_INDEX_BENCH_FILL_H_
#define CHUNKD_SERVER_BENCH_INDEX_BENCH_FILL_H_

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
#include "absl/flags/declare.h"
#include "hiredis/hiredis.h"

ABSL_DECLARE_FLAG(std::string, redis);
ABSL_DECLARE_FLAG(std::string, fill);
ABSL_DECLARE_FLAG(int, fill_batch);
ABSL_DECLARE_FLAG(std::string, batch);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int, pool_size);
ABSL_DECLARE_FLAG(int, fingerprints);
ABSL_DECLARE_FLAG(int, benchmark_requests);
ABSL_DECLARE_FLAG(int, repetitions);
ABSL_DECLARE_FLAG(int, bucket_bits);
ABSL_DECLARE_FLAG(int, encoding_sample);

namespace chunkd::index::bench {

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

uint64_t Mix(uint64_t x);

std::string Fingerprint(uint64_t run, uint64_t i);

// The size of chunk i of a fill: 4-28 KiB (fastcdc 4/16/64 KiB's bulk), so
// that sizes and hints take 2 or 3 bytes each as in real streams.
uint32_t ChunkSize(uint64_t run, uint64_t i);

// The numeric INFO `section` fields `names` (with their colon) summed, or
// -1 when one is missing.
double InfoSum(testing::DirectRedis& direct, const char* section,
               const std::vector<const char*>& names);

// CPU seconds the redis-server has used (INFO cpu: user + system), or -1.
double ServerCpuSeconds(testing::DirectRedis& direct);

double UsedMemory(testing::DirectRedis& direct);

// used_memory once it holds still (within 0.05 % over a second; at most
// 60 s): a main dict that grew during the fill is rehashed into its new
// table incrementally, and holds both tables until then.
double SettledUsedMemory(testing::DirectRedis& direct);

// Runs work(thread, first, last) over [0, n) in batches of `batch` from
// `threads` threads; the first failure stops the others and is returned.
absl::Status ForBatches(
    int64_t n, int batch, int threads,
    const std::function<absl::Status(int, int64_t, int64_t)>& work);

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
    const Server& server, int db);

absl::StatusOr<std::unique_ptr<Subject>> OpenSubject(
    const Server& server, bool legacy, const IndexOptions& options);

// Inserts fingerprints [0, n) of `run`, each new with count 1.
absl::Status FillEntries(Subject& s, uint64_t run, int64_t n, int batch,
                         int threads);

// Entry i's hint: the size of chunk i + 1, then its run (i + 2 .. i + 4).
NextSize HintOf(uint64_t run, int64_t i);

absl::Status FillHints(Subject& s, uint64_t run, int64_t n, int batch,
                       int threads);

// Entries spread over [0, n): at most `sample` of them.
std::vector<int64_t> SampleOf(int64_t n, int sample);

// Every sampled entry's hints read back as FillHints wrote them.
absl::Status CheckHints(Subject& s, uint64_t run, int64_t n, int sample);

// What a fill left in a database.
struct FillCheck {
  int64_t keys = 0;     // entry keys (old) or buckets (new)
  int64_t entries = 0;  // DBSIZE (old) or the buckets' HLEN summed (new)
  int sampled = 0;      // distinct keys asked OBJECT ENCODING
  int listpack = 0;     // of them, listpack-encoded
};

// The new layout's buckets (SCAN) and their entries (HLEN, pipelined).
absl::Status CountBuckets(Subject& s, RawConnection& raw, FillCheck* check);

absl::StatusOr<FillCheck> CheckFill(Subject& s, const Server& server,
                                    uint64_t run, int64_t n, int sample);

// One layout's memory at one fill.
struct Footprint {
  int64_t entries = 0;
  double plain = -1;   // used_memory per entry without hints
  double hinted = -1;  // with a hint and its run per entry
  FillCheck check;
};

absl::StatusOr<Footprint> MeasureFootprint(Subject& s, const Server& server,
                                           uint64_t run, int64_t n);

}  // namespace chunkd::index::bench

#endif  // CHUNKD_SERVER_BENCH_INDEX_BENCH_FILL_H_
