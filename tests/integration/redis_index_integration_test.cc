// The redis and redis-cluster index backends against real servers, through
// failures: servers down at start, kill -9 mid-batch and restart, a cluster
// master killed during a long series of batches (its replica promoted), a
// master stopped (SIGSTOP) and going on, a slot that never gets a master
// again, a whole cluster restarted from its AOF, NOSCRIPT, MOVED and ASK,
// commands whose replies are lost. Counts are read back from Redis
// directly, not through the index.
//
// Every server is started by this test on free 127.0.0.1 ports in its own
// temporary directory and dies with the test (see tests/support/redis_process.h).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "index/fingerprint_index.h"
#include "index/redis_cluster.h"
#include "index/redis_config.h"
#include "index/redis_index.h"
#include "index/redis_layout.h"
#include "support/redis_process.h"

namespace chunkd::index {
namespace {

using testing::DirectRedis;
using testing::RedisClusterProcesses;
using testing::RedisProcess;

#define SKIP_WITHOUT_REDIS()                             \
  do {                                                   \
    absl::Status tools = testing::RedisToolsAvailable(); \
    if (!tools.ok()) GTEST_SKIP() << tools.message();    \
  } while (0)

// A 32-byte fingerprint, different everywhere (braces and NULs included).
std::string Fp(uint64_t i) {
  std::string fp(32, '\0');
  uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;
  for (char& c : fp) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    c = static_cast<char>(x >> 56);
  }
  return fp;
}

// ---- What the servers hold, read directly -------------------------------

// The bucket key of `fp` in `ns` (chunkd's default bucket_bits).
std::string EntryKey(absl::string_view ns, absl::string_view fp) {
  return BucketLayout(kDefaultBucketBits).BucketKey(ns, fp);
}

// Reference count per fingerprint of namespace `ns` on one server (SCAN of
// its buckets + HGETALL); also checks each entry's value decodes.
absl::Status ReadCounts(int port, absl::string_view ns,
                        std::map<std::string, uint64_t>* counts) {
  const BucketLayout layout(kDefaultBucketBits);
  const std::string prefix = layout.KeyPrefix(ns);
  auto direct = DirectRedis::Connect("127.0.0.1", port);
  if (!direct.ok()) return direct.status();
  std::string cursor = "0";
  do {
    auto page = (*direct)->Command(
        {"SCAN", cursor, "MATCH", absl::StrCat(prefix, "*"), "COUNT", "1000"});
    if (!page.ok()) return page.status();
    cursor.assign((*page)->element[0]->str, (*page)->element[0]->len);
    const redisReply* keys = (*page)->element[1];
    for (size_t k = 0; k < keys->elements; ++k) {
      std::string key(keys->element[k]->str, keys->element[k]->len);
      auto fields = (*direct)->Command({"HGETALL", key});
      if (!fields.ok()) return fields.status();
      const absl::string_view bucket =
          absl::string_view(key).substr(prefix.size());
      for (size_t f = 0; f + 1 < (*fields)->elements; f += 2) {
        const redisReply* field = (*fields)->element[f];
        const redisReply* value = (*fields)->element[f + 1];
        EntryValue entry;
        if (!DecodeEntryValue(absl::string_view(value->str, value->len),
                              &entry)) {
          return absl::InternalError(absl::StrCat(
              "entry on port ", port, " has a malformed value"));
        }
        (*counts)[layout.Fingerprint(
            bucket, absl::string_view(field->str, field->len))] = entry.refs;
      }
    }
  } while (cursor != "0");
  return absl::OkStatus();
}

// Expects the servers on `ports` to hold exactly `expected` (fingerprint
// index -> count; zero counts must be absent) in namespace `ns`.
void ExpectCounts(const std::vector<int>& ports, absl::string_view ns,
                  const std::map<uint64_t, uint64_t>& expected) {
  std::map<std::string, uint64_t> counts;
  for (int port : ports) {
    ASSERT_TRUE(ReadCounts(port, ns, &counts).ok());
  }
  size_t live = 0;
  for (const auto& [i, count] : expected) {
    auto it = counts.find(Fp(i));
    if (count == 0) {
      EXPECT_TRUE(it == counts.end())
          << "fingerprint " << i << " should be gone";
      continue;
    }
    ++live;
    ASSERT_TRUE(it != counts.end()) << "fingerprint " << i << " is missing";
    EXPECT_EQ(it->second, count) << "fingerprint " << i;
  }
  EXPECT_EQ(counts.size(), live) << "entries nobody inserted";
}

// ---- A stream of token-carrying batches that retries until it lands -----

struct StreamPlan {
  std::string stream_id;
  // Fingerprint indices, in stream order, cut into batches.
  std::vector<std::vector<uint64_t>> batches;
};

std::vector<StreamPlan> MakePlans(int streams, int batches, int batch_size,
                                  uint64_t distinct) {
  std::vector<StreamPlan> plans(streams);
  for (int s = 0; s < streams; ++s) {
    plans[s].stream_id = absl::StrCat("stream-", s);
    for (int b = 0; b < batches; ++b) {
      std::vector<uint64_t> batch;
      for (int j = 0; j < batch_size; ++j) {
        // Overlaps inside a stream and between streams: dedup happens.
        batch.push_back((static_cast<uint64_t>(s) * 7919 +
                         static_cast<uint64_t>(b) * batch_size +
                         static_cast<uint64_t>(j) * 13) %
                        distinct);
      }
      plans[s].batches.push_back(std::move(batch));
    }
  }
  return plans;
}

struct StreamOutcome {
  int failed_attempts = 0;
  std::vector<std::string> errors;  // distinct messages seen
  bool gave_up = false;
  std::map<uint64_t, int> news;  // fingerprint -> times reported new
};

// A fault that strikes while streams are under way: `strike` runs with
// every stream held after its share of the batches, so that they all still
// have batches to send (however fast the server is); `then` runs once they
// go on, with the count of failed attempts so far.
struct Fault {
  std::function<void()> strike;
  std::function<void(const std::atomic<int>& failed)> then =
      [](const std::atomic<int>&) {};
};

// What the streams of a run share: the batches done, the failed attempts,
// and the gate that holds each stream before its batch `hold_at` until the
// fault struck.
struct StreamsState {
  explicit StreamsState(size_t hold_at) : hold_at(hold_at) {}
  const size_t hold_at;
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::atomic<bool> struck{false};
};

// Runs a plan: each batch is retried with the same token until it succeeds
// or `deadline` passes.
StreamOutcome RunStream(FingerprintIndex& index, absl::string_view ns,
                        const StreamPlan& plan, absl::Time deadline,
                        StreamsState* state) {
  StreamOutcome out;
  uint64_t position = 0;
  for (size_t b = 0; b < plan.batches.size(); ++b) {
    const std::vector<uint64_t>& batch = plan.batches[b];
    while (b == state->hold_at && !state->struck.load()) {
      if (absl::Now() > deadline) {
        out.gave_up = true;
        return out;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    std::vector<InsertEntry> entries;
    for (uint64_t i : batch) entries.push_back({Fp(i), 4096});
    const WriteToken token{plan.stream_id, position};
    while (true) {
      auto r = index.Insert(ns, entries, &token);
      if (r.ok()) {
        for (size_t j = 0; j < batch.size(); ++j) {
          if ((*r)[j].is_new) ++out.news[batch[j]];
        }
        break;
      }
      ++out.failed_attempts;
      state->failed.fetch_add(1);
      const std::string message(r.status().message());
      if (std::find(out.errors.begin(), out.errors.end(), message) ==
              out.errors.end() &&
          out.errors.size() < 20) {
        out.errors.push_back(absl::StrCat(
            absl::StatusCodeToString(r.status().code()), ": ", message));
      }
      if (absl::Now() > deadline) {
        out.gave_up = true;
        return out;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    position += batch.size();
    state->done.fetch_add(1);
  }
  return out;
}

// Runs all plans on threads, each held after `hold_at` batches until
// `fault` struck (REQUIRES: each plan has more); checks every error was
// UNAVAILABLE naming a Redis server, that nothing gave up, and returns the
// merged "new" reports.
std::map<uint64_t, int> RunStreamsWithFault(
    FingerprintIndex& index, absl::string_view ns,
    const std::vector<StreamPlan>& plans, size_t hold_at, const Fault& fault,
    int* failed_attempts, std::vector<std::string>* errors) {
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  StreamsState state(hold_at);
  std::vector<StreamOutcome> outcomes(plans.size());
  std::vector<std::thread> threads;
  for (size_t s = 0; s < plans.size(); ++s) {
    threads.emplace_back([&, s] {
      outcomes[s] = RunStream(index, ns, plans[s], deadline, &state);
    });
  }
  const int held = static_cast<int>(hold_at * plans.size());
  while (state.done.load() < held && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(state.done.load(), held) << "the streams did not reach the hold";
  fault.strike();
  state.struck.store(true);
  fault.then(state.failed);
  for (auto& t : threads) t.join();
  std::map<uint64_t, int> news;
  *failed_attempts = 0;
  for (const StreamOutcome& o : outcomes) {
    EXPECT_FALSE(o.gave_up) << "a stream could not finish within 120 s";
    *failed_attempts += o.failed_attempts;
    for (const std::string& e : o.errors) {
      EXPECT_TRUE(absl::StartsWith(e, "UNAVAILABLE: ")) << e;
      EXPECT_TRUE(absl::StrContains(e, "redis")) << e;
      errors->push_back(e);
    }
    for (const auto& [i, n] : o.news) news[i] += n;
  }
  return news;
}

// Lookups of `fingerprints` (all indexed) over and over on a thread until
// Stop(): counts the calls that failed or did not find them all.
class LookupLoop {
 public:
  LookupLoop(FingerprintIndex& index, std::string ns,
             std::vector<std::string> fingerprints)
      : thread_([this, &index, ns = std::move(ns),
                 fps = std::move(fingerprints)] {
          // Bounded: Stop() ends it long before.
          for (int i = 0; i < 1000000 && !stop_.load(); ++i) {
            auto found = index.Lookup(ns, fps);
            ++calls_;
            if (!found.ok()) {
              if (failures_++ == 0) first_error_ = found.status();
            } else if (std::count(found->begin(), found->end(), true) !=
                       static_cast<long>(fps.size())) {
              ++failures_;
            }
          }
        }) {}
  // Returns the calls that failed; *calls: all calls.
  int Stop(int* calls, absl::Status* first_error) {
    stop_.store(true);
    thread_.join();
    *calls = calls_;
    *first_error = first_error_;
    return failures_;
  }

 private:
  std::atomic<bool> stop_{false};
  int calls_ = 0;
  int failures_ = 0;
  absl::Status first_error_;
  std::thread thread_;
};

// Counts the calls of an index that wait for Redis (IndexOptions::on_wait).
class WaitWatch {
 public:
  void Attach(IndexOptions& options) {
    options.on_wait = [this](bool waiting) {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ += waiting ? 1 : -1;
      if (waiting) ++started_;
    };
  }
  // Until `n` calls wait at once (bounded); false if they never did.
  bool AwaitWaiting(int n) {
    for (int i = 0; i < 6000; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (waiting_ >= n) return true;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }
  int started() {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }

 private:
  std::mutex mu_;
  int waiting_ = 0;
  int started_ = 0;
};

// The options of the tests with the failover wait: far longer than any
// failover or restart here (the tests do not depend on how fast one is);
// waiting calls are counted by `watch`.
IndexOptions WaitingOptions(WaitWatch& watch) {
  IndexOptions options;
  // Generous on a loaded machine (a cluster's batch is acknowledged only
  // once its master's replica has it, so a failover cannot lose it).
  options.cluster_wait_timeout = absl::Seconds(1);
  options.connect_timeout = absl::Milliseconds(300);
  options.failover_wait = absl::Seconds(90);
  watch.Attach(options);
  return options;
}

std::map<uint64_t, uint64_t> ExpectedCounts(
    const std::vector<StreamPlan>& plans) {
  std::map<uint64_t, uint64_t> expected;
  for (const StreamPlan& p : plans) {
    for (const auto& batch : p.batches) {
      for (uint64_t i : batch) ++expected[i];
    }
  }
  return expected;
}

// What a run of the plans through a kill and restart of one server did.
struct KillRun {
  std::map<uint64_t, int> news;
  int failed = 0;
  std::vector<std::string> errors;
  absl::Status restarted;
};

// Runs the plans, kills `server` once each stream did 15 batches (all
// held there), and restarts it (from its AOF) after `while_down` returned,
// called with the count of failed attempts so far.
KillRun RunThroughKillAndRestart(
    FingerprintIndex& index, absl::string_view ns,
    const std::vector<StreamPlan>& plans, RedisProcess& server,
    const std::function<void(const std::atomic<int>& failed)>& while_down) {
  KillRun run;
  run.news = RunStreamsWithFault(
      index, ns, plans, /*hold_at=*/15,
      {[&] { server.Kill(); },
       [&](const std::atomic<int>& failed) {
         while_down(failed);
         run.restarted = server.Restart();
       }},
      &run.failed, &run.errors);
  return run;
}

// A server with its AOF (appendfsync always): nothing acknowledged is lost
// to kill -9, and a restart finds it again.
absl::StatusOr<std::unique_ptr<RedisProcess>> StartPersistentRedis() {
  RedisProcess::Options options;
  options.persistent = true;
  return RedisProcess::Start(options);
}

// Every fingerprint of `expected` was reported new exactly once.
void ExpectEachNewOnce(const std::map<uint64_t, uint64_t>& expected,
                       const std::map<uint64_t, int>& news) {
  for (const auto& [i, count] : expected) {
    auto it = news.find(i);
    const int n = it == news.end() ? 0 : it->second;
    EXPECT_EQ(n, 1) << "fingerprint " << i << " reported new " << n
                    << " times";
  }
}

// ---- A full server (maxmemory reached, noeviction) ----------------------

absl::StatusOr<uint64_t> UsedMemory(int port) {
  auto direct = DirectRedis::Connect("127.0.0.1", port);
  if (!direct.ok()) return direct.status();
  auto info = (*direct)->Command({"INFO", "memory"});
  if (!info.ok()) return info.status();
  const absl::string_view text((*info)->str, (*info)->len);
  const size_t at = text.find("used_memory:");
  uint64_t used = 0;
  if (at == absl::string_view::npos ||
      !absl::SimpleAtoi(text.substr(at + 12, text.find('\r', at) - at - 12),
                        &used)) {
    return absl::InternalError("INFO memory without used_memory");
  }
  return used;
}

absl::Status SetMaxmemory(int port, absl::string_view bytes) {
  auto direct = DirectRedis::Connect("127.0.0.1", port);
  if (!direct.ok()) return direct.status();
  auto ok = (*direct)->Command(
      {"CONFIG", "SET", "maxmemory", std::string(bytes)});
  return ok.ok() ? absl::OkStatus() : ok.status();
}

// What a refused insert says about the server on `port`.
void ExpectRefusedForMemory(const absl::Status& status, int port) {
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  const std::string m(status.message());
  EXPECT_TRUE(absl::StrContains(m, absl::StrCat("redis at 127.0.0.1:", port)))
      << m;
  EXPECT_TRUE(absl::StrContains(
      m, "\"OOM command not allowed when used memory > 'maxmemory'.\""))
      << m;
  EXPECT_TRUE(absl::StrContains(m, "raise its maxmemory")) << m;
  EXPECT_TRUE(absl::StrContains(m, "releasing chunks")) << m;
}

// What Health() says about the full server on `port`.
void ExpectHealthFull(const absl::Status& status, int port) {
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  const std::string m(status.message());
  EXPECT_TRUE(absl::StrContains(m, absl::StrCat("redis at 127.0.0.1:", port)))
      << m;
  EXPECT_TRUE(absl::StrContains(m, "for lack of memory")) << m;
  EXPECT_TRUE(absl::StrContains(m, "maxmemory-policy noeviction")) << m;
  EXPECT_TRUE(absl::StrContains(m, "raise its maxmemory")) << m;
}

// ============================== redis ======================================

TEST(RedisIndexIntegration, DownAtStartThenRecoversByItself) {
  SKIP_WITHOUT_REDIS();
  auto port = testing::PickFreePort();
  ASSERT_TRUE(port.ok());
  auto index = CreateIndex(
      absl::StrCat("redis://127.0.0.1:", *port, "?failover_wait_ms=300"));
  ASSERT_TRUE(index.ok()) << index.status();  // starts without its server

  const std::string address = absl::StrCat("redis at 127.0.0.1:", *port);
  absl::Status health = (*index)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(health.message(), address)) << health;
  EXPECT_TRUE(absl::StrContains(health.message(), "unreachable")) << health;
  EXPECT_TRUE(absl::StrContains(health.message(), "Connection refused"))
      << health;
  // After the failover wait, counted from the failed probe.
  auto ins = (*index)->Insert("ns", {{Fp(1), 1}});
  EXPECT_EQ(ins.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(ins.status().message(), address));
  EXPECT_TRUE(absl::StrContains(
      ins.status().message(),
      "(redis did not come back within the failover wait of 300ms, "
      "--redis_failover_wait)"))
      << ins.status();

  RedisProcess::Options options;
  options.port = *port;
  auto server = RedisProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!(*index)->Health().ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE((*index)->Health().ok()) << (*index)->Health();
  ins = (*index)->Insert("ns", {{Fp(1), 1}});
  ASSERT_TRUE(ins.ok()) << ins.status();
  EXPECT_TRUE((*ins)[0].is_new);
}

TEST(RedisIndexIntegration, KillNineMidBatchThenRestartCountsExactly) {
  SKIP_WITHOUT_REDIS();
  auto server = StartPersistentRedis();
  ASSERT_TRUE(server.ok()) << server.status();
  // Waiting off: the callers' retries with their tokens make it exact.
  auto index = CreateIndex(absl::StrCat("redis://", (*server)->address(),
                                        "?connect_timeout_ms=300"
                                        "&failover_wait_ms=0"));
  ASSERT_TRUE(index.ok());

  const auto plans = MakePlans(/*streams=*/4, /*batches=*/60, /*size=*/64,
                               /*distinct=*/3000);
  // Down until a batch failed (the streams, held until the kill, still
  // have 45 batches each to send).
  const KillRun run = RunThroughKillAndRestart(
      **index, "kill", plans, **server, [](const std::atomic<int>& failed) {
        for (int i = 0; i < 60000 && failed.load() == 0; ++i) {
          absl::SleepFor(absl::Milliseconds(1));
        }
      });
  ASSERT_TRUE(run.restarted.ok()) << run.restarted;
  EXPECT_GT(run.failed, 0) << "the kill should have failed some batches";
  const std::vector<std::string>& errors = run.errors;
  bool named = false;
  for (const std::string& e : errors) {
    named = named ||
            absl::StrContains(e, absl::StrCat("redis at ", (*server)->address(),
                                              " is unreachable: "));
  }
  EXPECT_TRUE(named) << "no error named the server; first: "
                     << (errors.empty() ? "" : errors[0]);

  const auto expected = ExpectedCounts(plans);
  ExpectCounts({(*server)->port()}, "kill", expected);
  ExpectEachNewOnce(expected, run.news);
  EXPECT_TRUE((*index)->Health().ok());
}

// The same kill and restart with the failover wait (here far longer than
// any restart): no call fails, no caller retries, and the counts are exact
// all the same.
TEST(RedisIndexIntegration, RestartWithinTheFailoverWaitFailsNoCall) {
  SKIP_WITHOUT_REDIS();
  auto server = StartPersistentRedis();
  ASSERT_TRUE(server.ok()) << server.status();
  WaitWatch watch;
  auto index = CreateIndex(absl::StrCat("redis://", (*server)->address()),
                           WaitingOptions(watch));
  ASSERT_TRUE(index.ok());
  std::vector<std::string> early;
  for (int i = 0; i < 20; ++i) early.push_back(Fp(100000 + i));
  for (const std::string& fp : early) {
    ASSERT_TRUE((*index)->Insert("restart", {{fp, 1}}).ok());
  }
  LookupLoop lookups(**index, "restart", early);

  const auto plans = MakePlans(/*streams=*/4, /*batches=*/60, /*size=*/64,
                               /*distinct=*/3000);
  // Down until calls wait for it: the restart comes while they do.
  const KillRun run = RunThroughKillAndRestart(
      **index, "restart", plans, **server,
      [&](const std::atomic<int>&) { EXPECT_TRUE(watch.AwaitWaiting(1)); });
  ASSERT_TRUE(run.restarted.ok()) << run.restarted;
  EXPECT_EQ(run.failed, 0) << (run.errors.empty() ? "" : run.errors[0]);
  EXPECT_GT(watch.started(), 0);
  int calls = 0;
  absl::Status first_error;
  EXPECT_EQ(lookups.Stop(&calls, &first_error), 0) << first_error;
  EXPECT_GT(calls, 0);

  auto expected = ExpectedCounts(plans);
  for (int i = 0; i < 20; ++i) expected[100000 + i] = 1;
  ExpectCounts({(*server)->port()}, "restart", expected);
  ExpectEachNewOnce(ExpectedCounts(plans), run.news);
}

// A restart between two calls: the index's idle connection to the old
// process is closed, and the next call notices before it sends anything on
// it, so that even a write without a token has a known outcome and is
// applied once.
TEST(RedisIndexIntegration, RestartBetweenCallsLeavesNoUnknownOutcome) {
  SKIP_WITHOUT_REDIS();
  auto server = StartPersistentRedis();
  ASSERT_TRUE(server.ok()) << server.status();
  auto index = CreateIndex(absl::StrCat("redis://", (*server)->address()));
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->Insert("between", {{Fp(1), 1}}).ok());
  ASSERT_TRUE((*server)->Restart().ok());
  auto again = (*index)->Insert("between", {{Fp(1), 1}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].ref_count, 2u);
  ExpectCounts({(*server)->port()}, "between", {{1, 2}});
}

// The reference count of `fp` in `ns` on the server on `port`, read until
// it is `want` (a write the server runs later) or 60 s passed.
std::string CountOnceItShows(int port, absl::string_view ns,
                             const std::string& fp, absl::string_view want) {
  auto direct = DirectRedis::Connect("127.0.0.1", port);
  EXPECT_TRUE(direct.ok()) << direct.status();
  if (!direct.ok()) return "";
  std::string count;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int i = 0; i < 60000 && count != want && absl::Now() < deadline; ++i) {
    const BucketLayout layout(kDefaultBucketBits);
    auto reply = (*direct)->Command(
        {"HGET", layout.BucketKey(ns, fp), std::string(layout.Field(fp))});
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return "";
    EntryValue entry;
    count = (*reply)->str != nullptr &&
                    DecodeEntryValue(
                        absl::string_view((*reply)->str, (*reply)->len), &entry)
                ? std::to_string(entry.refs)
                : "";
    if (count != want) absl::SleepFor(absl::Milliseconds(1));
  }
  return count;
}

// A server that stops answering (SIGSTOP) while the index has a connection
// to it: a write without a token meets the command timeout and fails — it
// must, as it is applied once the server goes on (the count says so) —
// while reads and token-carrying writes sent meanwhile wait and go through
// once it does.
TEST(RedisIndexIntegration, StoppedServerUnknownWritesFailTheRestWaits) {
  SKIP_WITHOUT_REDIS();
  auto server = RedisProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  WaitWatch watch;
  IndexOptions options = WaitingOptions(watch);
  options.command_timeout = absl::Milliseconds(300);
  auto index =
      CreateIndex(absl::StrCat("redis://", (*server)->address()), options);
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->Insert("stop", {{Fp(1), 1}, {Fp(2), 1}}).ok());

  (*server)->Pause();
  struct Resume {
    ~Resume() { server->Resume(); }
    RedisProcess* server;
  } resume{server->get()};
  auto untokened = (*index)->Insert("stop", {{Fp(1), 1}});
  ASSERT_FALSE(untokened.ok());
  EXPECT_EQ(untokened.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(untokened.status().message(),
                                "no answer within the command timeout"))
      << untokened.status();
  EXPECT_TRUE(absl::StrContains(untokened.status().message(),
                                "without a write token it is not sent again"))
      << untokened.status();

  const WriteToken token{"stopped", 0};
  absl::StatusOr<std::vector<InsertResult>> tokened;
  absl::StatusOr<std::vector<bool>> found;
  std::thread writer(
      [&] { tokened = (*index)->Insert("stop", {{Fp(2), 1}}, &token); });
  std::thread reader([&] { found = (*index)->Lookup("stop", {Fp(1), Fp(3)}); });
  const bool both_waited = watch.AwaitWaiting(2);
  (*server)->Resume();
  writer.join();
  reader.join();
  ASSERT_TRUE(both_waited);
  ASSERT_TRUE(tokened.ok()) << tokened.status();
  EXPECT_EQ((*tokened)[0].ref_count, 2u);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (std::vector<bool>{true, false}));
  // The failed write ran once the server went on (it was in the server's
  // buffer of a connection the index had closed).
  EXPECT_EQ(CountOnceItShows((*server)->port(), "stop", Fp(1), "2"), "2");
  ExpectCounts({(*server)->port()}, "stop", {{1, 2}, {2, 2}});
}

// A server stopped (SIGSTOP) while the object lives, so that commands sent
// meanwhile queue up unread: a client's reads time out and the server runs
// the commands once it goes on — the client saw "failed", the truth is
// "applied". Held for as long as the test needs, whatever the speed.
class StalledServer {
 public:
  explicit StalledServer(RedisProcess& server) : server_(server) {
    server_.Pause();
  }
  StalledServer(const StalledServer&) = delete;
  StalledServer& operator=(const StalledServer&) = delete;
  ~StalledServer() { server_.Resume(); }

 private:
  RedisProcess& server_;
};

// The local ports of this machine's established TCP connections to
// 127.0.0.1:`port` (/proc/net/tcp): the kernel completes a connection to a
// stopped server, so a client's new connection shows here.
std::set<int> ConnectionsTo(int port) {
  std::set<int> local_ports;
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  const std::string remote =
      absl::StrCat("0100007F:", absl::Hex(port, absl::kZeroPad4));
  while (std::getline(table, line)) {
    const std::vector<std::string> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int local = 0;
    if (fields.size() > 3 && absl::EqualsIgnoreCase(fields[2], remote) &&
        fields[3] == "01" &&
        absl::SimpleHexAtoi(fields[1].substr(fields[1].find(':') + 1),
                            &local)) {
      local_ports.insert(local);
    }
  }
  return local_ports;
}

std::vector<InsertEntry> FiftyEntries() {
  std::vector<InsertEntry> entries;
  for (int i = 0; i < 50; ++i) entries.push_back({Fp(i), 100});
  return entries;
}

TEST(RedisIndexIntegration, LostReplyOfATokenBatchIsResentOnce) {
  SKIP_WITHOUT_REDIS();
  auto server = RedisProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  auto index = CreateIndex(absl::StrCat("redis://", (*server)->address(),
                                        "?command_timeout_ms=200"
                                        "&connect_timeout_ms=60000"));
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->Health().ok());  // connected before the server stalls
  const std::set<int> before = ConnectionsTo((*server)->port());
  const WriteToken token{"lost-once", 0};
  absl::StatusOr<std::vector<InsertResult>> r;
  {
    std::optional<StalledServer> stalled(std::in_place, **server);
    // Times out on the pooled connection; the index re-sends the batch on a
    // new one, whose handshake waits (connect timeout: 60 s) until the
    // server goes on, once that connection shows: both copies run, the
    // record makes the second a replay.
    std::thread insert(
        [&] { r = (*index)->Insert("lost", FiftyEntries(), &token); });
    bool reconnected = false;
    for (int i = 0; i < 60000 && !reconnected; ++i) {
      for (int local : ConnectionsTo((*server)->port())) {
        reconnected = reconnected || before.count(local) == 0;
      }
      if (!reconnected) absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_TRUE(reconnected) << "the index did not connect again";
    stalled.reset();
    insert.join();
  }
  ASSERT_TRUE(r.ok()) << r.status();
  for (const InsertResult& x : *r) {
    EXPECT_TRUE(x.is_new);
    EXPECT_EQ(x.ref_count, 1u);
  }
  std::map<uint64_t, uint64_t> expected;
  for (int i = 0; i < 50; ++i) expected[i] = 1;
  ExpectCounts({(*server)->port()}, "lost", expected);
}

TEST(RedisIndexIntegration, LostRepliesThenClientRetryCountOnce) {
  SKIP_WITHOUT_REDIS();
  auto server = RedisProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  // Waiting off: the batch fails, and the caller retries.
  auto index = CreateIndex(absl::StrCat("redis://", (*server)->address(),
                                        "?command_timeout_ms=200"
                                        "&connect_timeout_ms=100"
                                        "&failover_wait_ms=0"));
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->Health().ok());
  const WriteToken token{"lost-replies", 0};
  absl::StatusOr<std::vector<InsertResult>> first;
  {
    // The batch times out, and so does the handshake of the new connection
    // the index tries for its re-send.
    StalledServer stalled(**server);
    first = (*index)->Insert("lost", FiftyEntries(), &token);
  }
  ASSERT_FALSE(first.ok()) << "the batch should have timed out";
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(first.status().message(), "timeout"))
      << first.status();

  // The client retries with the same token until the index reconnects:
  // whatever ran before counts once.
  absl::StatusOr<std::vector<InsertResult>> retry;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int attempt = 0; attempt < 10000; ++attempt) {
    retry = (*index)->Insert("lost", FiftyEntries(), &token);
    if (retry.ok() || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(retry.ok()) << retry.status();
  for (const InsertResult& x : *retry) {
    EXPECT_TRUE(x.is_new);
    EXPECT_EQ(x.ref_count, 1u);
  }
  std::map<uint64_t, uint64_t> expected;
  for (int i = 0; i < 50; ++i) expected[i] = 1;
  ExpectCounts({(*server)->port()}, "lost", expected);

  // Without a token the same loss is not repairable: the batch was applied
  // although the caller saw it fail. (Why Dedup must pass tokens.)
  {
    StalledServer stalled(**server);
    auto untokened = (*index)->Insert("lost", FiftyEntries());
    EXPECT_FALSE(untokened.ok());
  }
  // It runs once the server goes on (in the buffer of a connection the
  // index closed).
  EXPECT_EQ(CountOnceItShows((*server)->port(), "lost", Fp(0), "2"), "2");
}

// Writing a large pipeline on a connection whose server died must fail the
// batch, not raise SIGPIPE (which would kill chunkd).
TEST(RedisIndexIntegration, DeadServerDoesNotRaiseSigpipe) {
  SKIP_WITHOUT_REDIS();
  auto server = RedisProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  IndexOptions options;
  options.pool_size = 4;
  options.failover_wait = absl::ZeroDuration();  // each call fails at once
  auto index =
      CreateIndex(absl::StrCat("redis://", (*server)->address()), options);
  ASSERT_TRUE(index.ok());
  // Four pooled connections, all idle when the server dies.
  std::vector<std::thread> warm;
  for (int t = 0; t < 4; ++t) {
    warm.emplace_back([&] {
      EXPECT_TRUE((*index)->Insert("w", {{Fp(t), 1}}).ok());
    });
  }
  for (auto& t : warm) t.join();
  (*server)->Kill();
  std::vector<InsertEntry> big;
  for (int i = 0; i < 30000; ++i) big.push_back({Fp(i), 100});  // ~3 MB
  for (int attempt = 0; attempt < 6; ++attempt) {
    auto r = (*index)->Insert("w", big);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  }
}

TEST(RedisIndexIntegration, NoscriptIsRecoveredByReloading) {
  SKIP_WITHOUT_REDIS();
  auto server = RedisProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  auto index = CreateIndex(absl::StrCat("redis://", (*server)->address()));
  ASSERT_TRUE(index.ok());
  auto direct = DirectRedis::Connect("127.0.0.1", (*server)->port());
  ASSERT_TRUE(direct.ok());

  ASSERT_TRUE((*index)->Insert("ns", {{Fp(1), 10}}).ok());
  ASSERT_TRUE((*direct)->Command({"SCRIPT", "FLUSH"}).ok());
  auto ins = (*index)->Insert("ns", {{Fp(1), 10}, {Fp(2), 20}});
  ASSERT_TRUE(ins.ok()) << ins.status();
  EXPECT_EQ((*ins)[0].ref_count, 2u);
  EXPECT_TRUE((*ins)[1].is_new);
  ASSERT_TRUE((*direct)->Command({"SCRIPT", "FLUSH"}).ok());
  auto rel = (*index)->Release("ns", {Fp(1)});
  ASSERT_TRUE(rel.ok()) << rel.status();
  EXPECT_EQ((*rel)[0], 1u);
  ASSERT_TRUE((*direct)->Command({"SCRIPT", "FLUSH"}).ok());
  ASSERT_TRUE((*index)->RecordNextSizes("ns", "p", {{Fp(1), 5}}).ok());
  ExpectCounts({(*server)->port()}, "ns", {{1, 1}, {2, 1}});
}

TEST(RedisIndexIntegration, ConcurrentInsertsAndReleasesReadBackExactly) {
  SKIP_WITHOUT_REDIS();
  auto server = RedisProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  auto index = CreateIndex(absl::StrCat("redis://", (*server)->address()));
  ASSERT_TRUE(index.ok());

  // Thread t inserts fingerprint i (1 + (t + i) % 4) times and releases it
  // (t + i) % 3 times (never more than inserted).
  constexpr int kThreads = 8;
  constexpr int kFingerprints = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        std::vector<InsertEntry> batch;
        for (int i = 0; i < kFingerprints; ++i) {
          if (round < 1 + (t + i) % 4) batch.push_back({Fp(i), 4096});
        }
        ASSERT_TRUE((*index)->Insert("cc", batch).ok());
        std::vector<std::string> release;
        for (int i = 0; i < kFingerprints; ++i) {
          if (round < std::min((t + i) % 3, 1 + (t + i) % 4)) {
            release.push_back(Fp(i));
          }
        }
        ASSERT_TRUE((*index)->Release("cc", release).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::map<uint64_t, uint64_t> expected;
  for (int i = 0; i < kFingerprints; ++i) {
    for (int t = 0; t < kThreads; ++t) {
      const int inserts = 1 + (t + i) % 4;
      expected[i] += inserts - std::min((t + i) % 3, inserts);
    }
  }
  ExpectCounts({(*server)->port()}, "cc", expected);
}

TEST(RedisIndexIntegration, PasswordFromTheEnvironment) {
  SKIP_WITHOUT_REDIS();
  RedisProcess::Options options;
  options.extra_args = {"--requirepass", "s3cret"};
  auto server = RedisProcess::Start(options);
  // The helper's PING is refused with NOAUTH, which still proves it is up.
  ASSERT_TRUE(server.ok()) << server.status();
  auto no_password =
      CreateIndex(absl::StrCat("redis://", (*server)->address()));
  ASSERT_TRUE(no_password.ok());
  absl::Status health = (*no_password)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(health.message(), "NOAUTH")) << health;

  setenv(kRedisPasswordEnv, "s3cret", 1);
  auto with_password =
      CreateIndex(absl::StrCat("redis://", (*server)->address()));
  unsetenv(kRedisPasswordEnv);
  ASSERT_TRUE(with_password.ok());
  EXPECT_TRUE((*with_password)->Health().ok()) << (*with_password)->Health();
  EXPECT_TRUE((*with_password)->Insert("ns", {{Fp(1), 1}}).ok());
}

// Redis fills up to its maxmemory (noeviction) under a stream of new
// chunks: the insert that meets the limit fails with RESOURCE_EXHAUSTED
// quoting Redis, and applies nothing; lookups, duplicates, releases and new
// connections keep working, Health() says the server is full; once
// maxmemory is raised, Health() is OK and the retried batch lands, counts
// exact.
TEST(RedisIndexIntegration, FullRedisRefusesNewEntriesUntilMaxmemoryIsRaised) {
  SKIP_WITHOUT_REDIS();
  auto server = RedisProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto index = CreateIndex(absl::StrCat("redis://", (*server)->address()));
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->Health().ok()) << (*index)->Health();
  // Room for a few thousand entries (about 100 bytes each).
  auto used = UsedMemory(port);
  ASSERT_TRUE(used.ok()) << used.status();
  ASSERT_TRUE(SetMaxmemory(port, std::to_string(*used + 1000000)).ok());
  EXPECT_TRUE((*index)->Health().ok()) << (*index)->Health();

  constexpr int kBatch = 200;
  std::map<uint64_t, uint64_t> expected;
  absl::Status refused;
  std::vector<InsertEntry> batch;
  WriteToken token{"filling", 0};
  for (int b = 0; b < 1000 && refused.ok(); ++b) {
    batch.clear();
    for (int i = 0; i < kBatch; ++i) batch.push_back({Fp(b * kBatch + i), 100});
    token.first_position = uint64_t(b) * kBatch;
    auto r = (*index)->Insert("full", batch, &token);
    if (!r.ok()) {
      refused = r.status();
      break;
    }
    for (int i = 0; i < kBatch; ++i) {
      ASSERT_TRUE((*r)[i].is_new);
      expected[b * kBatch + i] = 1;
    }
  }
  ASSERT_FALSE(refused.ok()) << "1 MB of room never filled up";
  ExpectRefusedForMemory(refused, port);
  ASSERT_GT(expected.size(), 1000u);
  // One script call: the refused batch applied nothing.
  ExpectCounts({port}, "full", expected);
  // Redis refused it counting that call's own request buffer, freed since,
  // which may take used_memory back under the limit by a few KB: the limit
  // goes below what the server now holds, so that it stays full whatever
  // buffers come and go.
  auto held = UsedMemory(port);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(SetMaxmemory(port, std::to_string(*held - 200000)).ok());
  ExpectHealthFull((*index)->Health(), port);

  // Reads work.
  const std::string old_fp = Fp(0);
  const std::string refused_fp = batch[0].fingerprint;
  auto found = (*index)->Lookup("full", {old_fp, refused_fp});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (std::vector<bool>{true, false}));
  auto hints = (*index)->NextSizes("full", "p", {old_fp});
  ASSERT_TRUE(hints.ok()) << hints.status();
  // Duplicates count, with and without a token.
  std::vector<InsertEntry> dups;
  for (int i = 0; i < kBatch; ++i) dups.push_back({Fp(i), 100});
  auto dup = (*index)->Insert("full", dups);
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_EQ((*dup)[0].ref_count, 2u);
  const WriteToken dup_token{"dups", 0};
  auto tokened = (*index)->Insert("full", dups, &dup_token);
  ASSERT_TRUE(tokened.ok()) << tokened.status();
  EXPECT_EQ((*tokened)[0].ref_count, 3u);
  // A batch of duplicates and one new chunk is refused as a whole.
  dups.push_back(batch[0]);
  ExpectRefusedForMemory((*index)->Insert("full", dups).status(), port);
  dups.pop_back();
  // Hints are not learned on a full server, and that is no failure.
  EXPECT_TRUE((*index)->RecordNextSizes("full", "p", {{old_fp, 7}}).ok());
  // Releases work (they free memory).
  std::vector<std::string> drop;
  for (int i = 0; i < kBatch; ++i) drop.push_back(Fp(i));
  auto left = (*index)->Release("full", drop);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ((*left)[0], 2u);
  for (int i = 0; i < kBatch; ++i) expected[i] = 2;
  // A new connection (its handshake loads the scripts) works too.
  auto fresh = CreateIndex(absl::StrCat("redis://", (*server)->address()));
  ASSERT_TRUE(fresh.ok());
  auto fresh_found = (*fresh)->Lookup("full", {old_fp});
  ASSERT_TRUE(fresh_found.ok()) << fresh_found.status();
  EXPECT_TRUE((*fresh_found)[0]);
  ExpectHealthFull((*fresh)->Health(), port);
  ExpectCounts({port}, "full", expected);

  // More memory: healthy again, and the refused batch lands on retry.
  ASSERT_TRUE(SetMaxmemory(port, "256mb").ok());
  EXPECT_TRUE((*index)->Health().ok()) << (*index)->Health();
  auto retry = (*index)->Insert("full", batch, &token);
  ASSERT_TRUE(retry.ok()) << retry.status();
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_TRUE((*retry)[i].is_new) << i;
    expected[token.first_position + i] = 1;
  }
  ExpectCounts({port}, "full", expected);
  EXPECT_TRUE((*index)->RecordNextSizes("full", "p", {{old_fp, 7}}).ok());
  auto learned = (*index)->NextSizes("full", "p", {old_fp});
  ASSERT_TRUE(learned.ok());
  EXPECT_EQ((*learned)[0], (std::vector<uint32_t>{7}));
}

// Collects what an index warns about.
class Warnings {
 public:
  IndexOptions Options() {
    IndexOptions options;
    options.warn = [this](const std::string& w) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(w);
    };
    return options;
  }
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// A Redis whose listpack settings would turn buckets into full hashes is
// named at connect, once, with the setting and what it needs.
TEST(RedisIndexIntegration, WarnsWhenBucketsWouldNotStayListpacks) {
  SKIP_WITHOUT_REDIS();
  RedisProcess::Options small;
  small.extra_args = {"--hash-max-listpack-entries", "128",
                      "--hash-max-listpack-value", "32"};
  auto server = RedisProcess::Start(small);
  ASSERT_TRUE(server.ok()) << server.status();
  Warnings log;
  auto index =
      CreateIndex(absl::StrCat("redis://", (*server)->address()), log.Options());
  ASSERT_TRUE(index.ok()) << index.status();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*index)->Insert("ns", {{Fp(i), 1}}).ok());
  }
  ASSERT_TRUE((*index)->Health().ok());
  const std::vector<std::string> warnings = log.Lines();
  ASSERT_EQ(warnings.size(), 1u) << absl::StrJoin(warnings, "\n");
  EXPECT_TRUE(absl::StartsWith(
      warnings[0], absl::StrCat("WARNING: redis at ", (*server)->address())))
      << warnings[0];
  EXPECT_TRUE(absl::StrContains(warnings[0],
                                "hash-max-listpack-entries is 128, below the "
                                "512"))
      << warnings[0];
  EXPECT_TRUE(absl::StrContains(warnings[0],
                                "hash-max-listpack-value is 32, below the 64"))
      << warnings[0];
}

TEST(RedisIndexIntegration, WarnsOnceWhenRedisMayEvictEntries) {
  SKIP_WITHOUT_REDIS();
  RedisProcess::Options evicting;
  evicting.extra_args = {"--maxmemory-policy", "allkeys-lru"};
  auto lru = RedisProcess::Start(evicting);
  ASSERT_TRUE(lru.ok()) << lru.status();
  auto safe = RedisProcess::Start({});
  ASSERT_TRUE(safe.ok()) << safe.status();

  Warnings log;
  const IndexOptions options = log.Options();
  auto on_safe =
      CreateIndex(absl::StrCat("redis://", (*safe)->address()), options);
  ASSERT_TRUE(on_safe.ok());
  ASSERT_TRUE((*on_safe)->Health().ok());
  ASSERT_TRUE((*on_safe)->Insert("ns", {{Fp(1), 1}}).ok());
  EXPECT_TRUE(log.Lines().empty()) << log.Lines().front();
  auto on_lru =
      CreateIndex(absl::StrCat("redis://", (*lru)->address()), options);
  ASSERT_TRUE(on_lru.ok());

  ASSERT_TRUE((*on_lru)->Health().ok());
  // Many connections, one warning.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        EXPECT_TRUE((*on_lru)->Insert("ns", {{Fp(i), 1}}).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::vector<std::string> warnings = log.Lines();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(warnings[0], (*lru)->address())) << warnings[0];
  EXPECT_TRUE(absl::StrContains(warnings[0], "allkeys-lru")) << warnings[0];
  EXPECT_TRUE(absl::StrContains(warnings[0], "noeviction")) << warnings[0];
}

// ============================ redis-cluster ================================

TEST(RedisClusterDown, StartsWithoutItsClusterAndSaysWhy) {
  SKIP_WITHOUT_REDIS();
  auto a = testing::PickFreePort();
  auto b = testing::PickFreePort();
  ASSERT_TRUE(a.ok() && b.ok());
  auto index = CreateIndex(absl::StrCat("redis-cluster://127.0.0.1:", *a,
                                        ",127.0.0.1:", *b,
                                        "?failover_wait_ms=200"));
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ((*index)->backend(), "redis-cluster");
  absl::Status health = (*index)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(
      absl::StrContains(health.message(), "redis cluster (seeds 127.0.0.1:"))
      << health;
  EXPECT_TRUE(absl::StrContains(health.message(), "Connection refused"))
      << health;
  auto found = (*index)->Lookup("ns", {Fp(1)});
  EXPECT_EQ(found.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(found.status().message(),
                                "failover wait of 200ms"))
      << found.status();
}

class RedisClusterIntegration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::RedisToolsAvailable().ok()) return;
    auto started = RedisClusterProcesses::Start(3, 1);
    start_status_ = new absl::Status(started.status());
    if (started.ok()) cluster_ = started->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete start_status_;
    start_status_ = nullptr;
  }
  void SetUp() override {
    absl::Status tools = testing::RedisToolsAvailable();
    if (!tools.ok()) GTEST_SKIP() << tools.message();
    ASSERT_TRUE(start_status_->ok()) << *start_status_;
    auto masters = cluster_->MasterPorts();
    ASSERT_TRUE(masters.ok());
    masters_ = *masters;
    ASSERT_EQ(masters_.size(), 3u);
    for (int port : masters_) {
      auto direct = DirectRedis::Connect("127.0.0.1", port);
      ASSERT_TRUE(direct.ok());
      ASSERT_TRUE(
          (*direct)->Command({"CONFIG", "SET", "maxmemory", "0"}).ok());
      ASSERT_TRUE((*direct)->Command({"FLUSHALL"}).ok());
    }
    // The replicas are healthy here: a write waits for its replica as long
    // as a loaded machine may take, never into a timeout (the timeout's
    // own tests are the failover ones).
    IndexOptions options;
    options.cluster_wait_timeout = absl::Seconds(30);
    options.command_timeout = absl::Seconds(60);
    auto index = CreateIndex(cluster_->Spec(), options);
    ASSERT_TRUE(index.ok()) << index.status();
    index_ = *std::move(index);
  }

  static RedisClusterProcesses* cluster_;
  static absl::Status* start_status_;
  std::vector<int> masters_;
  std::unique_ptr<FingerprintIndex> index_;
};
RedisClusterProcesses* RedisClusterIntegration::cluster_ = nullptr;
absl::Status* RedisClusterIntegration::start_status_ = nullptr;

TEST_F(RedisClusterIntegration, OneNamespaceSpreadsOverEveryMaster) {
  constexpr int kEntries = 30000;
  std::vector<InsertEntry> entries;
  for (int i = 0; i < kEntries; ++i) entries.push_back({Fp(i), 4096});
  for (size_t at = 0; at < entries.size(); at += 256) {
    auto r = index_->Insert(
        "tenant", absl::MakeSpan(entries).subspan(
                      at, std::min<size_t>(256, entries.size() - at)));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  size_t total = 0;
  for (int port : masters_) {
    std::map<std::string, uint64_t> counts;
    ASSERT_TRUE(ReadCounts(port, "tenant", &counts).ok());
    // Each master serves a third of the slots: 33% +- 5% of the entries
    // (one sigma is about 0.5%, buckets holding one entry or two).
    EXPECT_GE(counts.size(), kEntries * 0.28) << "master on port " << port;
    EXPECT_LE(counts.size(), kEntries * 0.38) << "master on port " << port;
    total += counts.size();
  }
  EXPECT_EQ(total, static_cast<size_t>(kEntries));
}

TEST_F(RedisClusterIntegration, ConcurrentInsertsAndReleasesReadBackExactly) {
  constexpr int kThreads = 8;
  constexpr int kFingerprints = 400;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        std::vector<InsertEntry> batch;
        for (int i = 0; i < kFingerprints; ++i) {
          if (round < 1 + (t + i) % 3) batch.push_back({Fp(i), 4096});
        }
        auto r = index_->Insert("cc", batch);
        ASSERT_TRUE(r.ok()) << r.status();
        std::vector<std::string> release;
        for (int i = 0; i < kFingerprints; ++i) {
          if (round < std::min((t * i) % 3, 1 + (t + i) % 3)) {
            release.push_back(Fp(i));
          }
        }
        auto l = index_->Release("cc", release);
        ASSERT_TRUE(l.ok()) << l.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::map<uint64_t, uint64_t> expected;
  for (int i = 0; i < kFingerprints; ++i) {
    for (int t = 0; t < kThreads; ++t) {
      const int inserts = 1 + (t + i) % 3;
      expected[i] += inserts - std::min((t * i) % 3, inserts);
    }
  }
  ExpectCounts(masters_, "cc", expected);
}

TEST_F(RedisClusterIntegration, RacingStreamsSeeEachNewChunkOnce) {
  constexpr int kThreads = 8;
  std::vector<InsertEntry> batch;
  for (int i = 0; i < 1000; ++i) batch.push_back({Fp(i), 4096});
  std::vector<std::atomic<int>> news(batch.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto r = index_->Insert("race", batch);
      ASSERT_TRUE(r.ok()) << r.status();
      for (size_t i = 0; i < batch.size(); ++i) {
        if ((*r)[i].is_new) news[i].fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::map<uint64_t, uint64_t> expected;
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(news[i].load(), 1) << i;
    expected[i] = kThreads;
  }
  ExpectCounts(masters_, "race", expected);
}

// Writes end each master's pipeline with WAIT 1, so that a batch reported
// applied is on the replica too (and survives a failover).
TEST_F(RedisClusterIntegration, WritesWaitForTheReplica) {
  auto waits = [&] {
    long long total = 0;
    for (int port : masters_) {
      auto direct = DirectRedis::Connect("127.0.0.1", port);
      EXPECT_TRUE(direct.ok());
      auto stats = (*direct)->Command({"INFO", "commandstats"});
      EXPECT_TRUE(stats.ok());
      absl::string_view text((*stats)->str, (*stats)->len);
      const size_t at = text.find("cmdstat_wait:calls=");
      if (at == absl::string_view::npos) continue;
      long long calls = 0;
      absl::string_view rest = text.substr(at + 19);
      EXPECT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find(',')), &calls));
      total += calls;
    }
    return total;
  };
  const long long before = waits();
  std::vector<InsertEntry> entries;
  for (int i = 0; i < 300; ++i) entries.push_back({Fp(i), 4096});
  ASSERT_TRUE(index_->Insert("wait", entries).ok());
  EXPECT_EQ(waits() - before, 3) << "one WAIT per master of the batch";
  ASSERT_TRUE(index_->Lookup("wait", {Fp(1), Fp(2)}).ok());
  EXPECT_EQ(waits() - before, 3) << "reads do not wait";
}

TEST_F(RedisClusterIntegration, NoscriptOnEveryMasterIsRecovered) {
  std::vector<InsertEntry> entries;
  for (int i = 0; i < 100; ++i) entries.push_back({Fp(i), 4096});
  ASSERT_TRUE(index_->Insert("ns", entries).ok());
  for (int port : masters_) {
    auto direct = DirectRedis::Connect("127.0.0.1", port);
    ASSERT_TRUE(direct.ok());
    ASSERT_TRUE((*direct)->Command({"SCRIPT", "FLUSH"}).ok());
  }
  auto again = index_->Insert("ns", entries);
  ASSERT_TRUE(again.ok()) << again.status();
  for (const InsertResult& r : *again) EXPECT_EQ(r.ref_count, 2u);
}

// One master of three full: a batch over all of them fails with
// RESOURCE_EXHAUSTED naming that master, what the others got stays, and a
// token-carrying retry after its maxmemory was raised completes it with
// every chunk new exactly once. Meanwhile reads, duplicates and releases on
// the full master work, and Health() names it.
TEST_F(RedisClusterIntegration, FullMasterRefusesNewEntriesAndRecovers) {
  const int full = masters_[1];
  // Chunks indexed before the master filled up, some of them on it.
  std::vector<InsertEntry> seeds;
  std::vector<std::string> seed_fps;
  for (int i = 0; i < 30; ++i) {
    seeds.push_back({Fp(1000 + i), 4096});
    seed_fps.push_back(seeds.back().fingerprint);
  }
  ASSERT_TRUE(index_->Insert("seed", seeds).ok());
  std::map<std::string, uint64_t> on_full;
  ASSERT_TRUE(ReadCounts(full, "seed", &on_full).ok());
  ASSERT_FALSE(on_full.empty());

  ASSERT_TRUE(SetMaxmemory(full, "1").ok());
  struct Restore {
    ~Restore() { (void)SetMaxmemory(port, "0"); }
    int port;
  } restore{full};
  ExpectHealthFull(index_->Health(), full);

  std::vector<InsertEntry> entries;
  for (int i = 0; i < 300; ++i) entries.push_back({Fp(i), 4096});
  const WriteToken token{"cluster-full", 0};
  ExpectRefusedForMemory(index_->Insert("cf", entries, &token).status(), full);
  for (int port : masters_) {
    std::map<std::string, uint64_t> counts;
    ASSERT_TRUE(ReadCounts(port, "cf", &counts).ok());
    if (port == full) {
      EXPECT_TRUE(counts.empty()) << "the full master took nothing";
    } else {
      EXPECT_GT(counts.size(), 50u) << "the others took theirs, port " << port;
    }
  }

  // Reads, duplicates and releases work on the full master too.
  auto found = index_->Lookup("seed", seed_fps);
  ASSERT_TRUE(found.ok()) << found.status();
  for (bool f : *found) EXPECT_TRUE(f);
  auto dup = index_->Insert("seed", seeds);
  ASSERT_TRUE(dup.ok()) << dup.status();
  for (const InsertResult& r : *dup) EXPECT_EQ(r.ref_count, 2u);
  auto once = index_->Release("seed", seed_fps);
  ASSERT_TRUE(once.ok()) << once.status();
  auto twice = index_->Release("seed", seed_fps);
  ASSERT_TRUE(twice.ok()) << twice.status();
  for (uint64_t left : *twice) EXPECT_EQ(left, 0u);
  ExpectHealthFull(index_->Health(), full);

  ASSERT_TRUE(SetMaxmemory(full, "0").ok());
  EXPECT_TRUE(index_->Health().ok()) << index_->Health();
  auto retry = index_->Insert("cf", entries, &token);
  ASSERT_TRUE(retry.ok()) << retry.status();
  std::map<uint64_t, uint64_t> expected;
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_TRUE((*retry)[i].is_new) << i;
    EXPECT_EQ((*retry)[i].ref_count, 1u) << i;
    expected[i] = 1;
  }
  ExpectCounts(masters_, "cf", expected);
  ExpectCounts(masters_, "seed", {});
}

// Moves one slot between masters by hand, with keys of that slot on both
// sides mid-migration: the index follows ASK (with ASKING) while the slot
// migrates and MOVED after it moved, and counts stay exact.
TEST_F(RedisClusterIntegration, FollowsAskDuringMigrationAndMovedAfter) {
  // Two fingerprints whose keys share a slot.
  const std::string ns = "mig";
  std::vector<uint64_t> same_slot;
  const int slot = KeySlot(EntryKey(ns, Fp(0)));
  same_slot.push_back(0);
  for (uint64_t i = 1; same_slot.size() < 2; ++i) {
    if (KeySlot(EntryKey(ns, Fp(i))) == slot &&
        EntryKey(ns, Fp(i)) != EntryKey(ns, Fp(0))) {
      same_slot.push_back(i);
    }
  }
  const std::string a = Fp(same_slot[0]);
  const std::string b = Fp(same_slot[1]);
  ASSERT_TRUE(index_->Insert(ns, {{a, 1}, {b, 1}}).ok());

  // Which master owns the slot, and another one to move it to.
  int from_port = 0;
  std::string from_id, to_id;
  int to_port = 0;
  for (int port : masters_) {
    auto direct = DirectRedis::Connect("127.0.0.1", port);
    ASSERT_TRUE(direct.ok());
    auto id = (*direct)->Command({"CLUSTER", "MYID"});
    ASSERT_TRUE(id.ok());
    auto owns = (*direct)->Integer(
        {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
    ASSERT_TRUE(owns.ok());
    if (*owns > 0) {
      from_port = port;
      from_id.assign((*id)->str, (*id)->len);
    } else if (to_port == 0) {
      to_port = port;
      to_id.assign((*id)->str, (*id)->len);
    }
  }
  ASSERT_NE(from_port, 0);
  ASSERT_NE(to_port, 0);
  auto from = DirectRedis::Connect("127.0.0.1", from_port);
  auto to = DirectRedis::Connect("127.0.0.1", to_port);
  ASSERT_TRUE(from.ok() && to.ok());
  const std::string s = std::to_string(slot);
  ASSERT_TRUE(
      (*to)->Command({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}).ok());
  ASSERT_TRUE(
      (*from)->Command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}).ok());
  ASSERT_TRUE((*from)
                  ->Command({"MIGRATE", "127.0.0.1", std::to_string(to_port),
                             "", "0", "5000", "KEYS", EntryKey(ns, a)})
                  .ok());

  // Mid-migration: a is on the target (ASK), b still on the source.
  auto mid = index_->Insert(ns, {{a, 1}, {b, 1}});
  ASSERT_TRUE(mid.ok()) << mid.status();
  EXPECT_EQ((*mid)[0].ref_count, 2u);
  EXPECT_EQ((*mid)[1].ref_count, 2u);
  auto found = index_->Lookup(ns, {a, b});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (std::vector<bool>{true, true}));

  // Finish the move: the index's slot map is now wrong, MOVED corrects it.
  ASSERT_TRUE((*from)
                  ->Command({"MIGRATE", "127.0.0.1", std::to_string(to_port),
                             "", "0", "5000", "KEYS", EntryKey(ns, b)})
                  .ok());
  for (int port : masters_) {
    auto direct = DirectRedis::Connect("127.0.0.1", port);
    ASSERT_TRUE(direct.ok());
    ASSERT_TRUE(
        (*direct)->Command({"CLUSTER", "SETSLOT", s, "NODE", to_id}).ok());
  }
  auto after = index_->Insert(ns, {{a, 1}, {b, 1}});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)[0].ref_count, 3u);
  EXPECT_EQ((*after)[1].ref_count, 3u);
  ExpectCounts({to_port}, ns, {{same_slot[0], 3}, {same_slot[1], 3}});

  // Token-carrying writes keep their record in the entry's slot: they move
  // with it too.
  const WriteToken token{"mig-stream", 0};
  auto tokened = index_->Insert(ns, {{a, 1}}, &token);
  ASSERT_TRUE(tokened.ok()) << tokened.status();
  auto replay = index_->Insert(ns, {{a, 1}}, &token);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ((*replay)[0].ref_count, 4u);
}

// Fingerprints (indices for Fp) whose entries in `ns` live on the master
// on `port`.
std::vector<uint64_t> FingerprintsOnMaster(const RedisClusterProcesses& cluster,
                                           int port, absl::string_view ns,
                                           size_t n) {
  std::map<int, int> owner;  // slot -> master port
  std::vector<uint64_t> out;
  for (uint64_t i = 0; out.size() < n && i < 100000; ++i) {
    const int slot = KeySlot(EntryKey(ns, Fp(i)));
    auto it = owner.find(slot);
    if (it == owner.end()) {
      auto master = cluster.MasterPortOfSlot(slot);
      EXPECT_TRUE(master.ok()) << master.status();
      if (!master.ok()) return out;
      it = owner.emplace(slot, *master).first;
    }
    if (it->second == port) out.push_back(i);
  }
  return out;
}

// The node of the first master of `cluster`.
RedisProcess* FirstMaster(const RedisClusterProcesses& cluster) {
  auto masters = cluster.MasterPorts();
  EXPECT_TRUE(masters.ok()) << masters.status();
  if (!masters.ok() || masters->size() != 3) return nullptr;
  return cluster.NodeWithPort(masters->front());
}

// Runs the plans through `fault` with the failover wait on (far longer
// than any failover here): no call fails, no caller retries; lookups of
// chunks indexed before go through all along; the counts read from
// `masters_after()` are exact and every chunk was new once.
void ExpectNoFailureThrough(RedisClusterProcesses& cluster,
                            FingerprintIndex& index, absl::string_view ns,
                            const Fault& fault, WaitWatch& watch) {
  std::vector<std::string> early;
  std::map<uint64_t, uint64_t> early_counts;
  for (int i = 0; i < 30; ++i) {
    early.push_back(Fp(100000 + i));
    early_counts[100000 + i] = 1;
    ASSERT_TRUE(index.Insert(ns, {{early.back(), 1}}).ok());
  }
  LookupLoop lookups(index, std::string(ns), early);
  const auto plans = MakePlans(/*streams=*/4, /*batches=*/120, /*size=*/64,
                               /*distinct=*/5000);
  int failed = 0;
  std::vector<std::string> errors;
  // Each stream held after 25 of its 120 batches until the fault struck.
  auto news = RunStreamsWithFault(index, ns, plans, /*hold_at=*/25, fault,
                                  &failed, &errors);
  EXPECT_EQ(failed, 0) << (errors.empty() ? "" : errors[0]);
  int calls = 0;
  absl::Status first_error;
  EXPECT_EQ(lookups.Stop(&calls, &first_error), 0) << first_error;
  EXPECT_GT(calls, 0);
  EXPECT_GT(watch.started(), 0) << "no call ever waited: no fault seen";

  absl::Status healthy = cluster.WaitHealthy(absl::Seconds(60), false);
  ASSERT_TRUE(healthy.ok()) << healthy;
  auto masters = cluster.MasterPorts();
  ASSERT_TRUE(masters.ok());
  ASSERT_EQ(masters->size(), 3u);
  auto expected = ExpectedCounts(plans);
  ExpectEachNewOnce(expected, news);
  expected.insert(early_counts.begin(), early_counts.end());
  ExpectCounts(*masters, ns, expected);
}

// A master killed (kill -9) while four streams write long series of
// token-carrying batches and a reader looks chunks up; its replica is
// promoted. The calls in flight and those made during the failover wait
// for the new master and go through: none fails, counts exact, every
// chunk new once. (With the wait off, each caller would see UNAVAILABLE
// and retry with its token: KillNineMidBatchThenRestartCountsExactly.)
TEST(RedisClusterFailover, MasterKilledDuringLongSeriesOfBatches) {
  SKIP_WITHOUT_REDIS();
  auto cluster = RedisClusterProcesses::Start(3, 1, /*node_timeout_ms=*/1000);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  WaitWatch watch;
  auto index = CreateIndex((*cluster)->Spec(), WaitingOptions(watch));
  ASSERT_TRUE(index.ok());
  RedisProcess* victim = FirstMaster(**cluster);
  ASSERT_NE(victim, nullptr);

  ExpectNoFailureThrough(**cluster, **index, "failover",
                         {[&] { victim->Kill(); }}, watch);
  auto after = (*cluster)->MasterPorts();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(std::find(after->begin(), after->end(), victim->port()),
            after->end());
  EXPECT_TRUE((*index)->Health().ok()) << (*index)->Health();
}

// Every node of the cluster killed at once and started again from its AOF
// (a whole-cluster restart): calls wait for it as for a failover.
TEST(RedisClusterFailover, WholeClusterRestartedFromItsAof) {
  SKIP_WITHOUT_REDIS();
  auto cluster = RedisClusterProcesses::Start(3, 1, /*node_timeout_ms=*/1000,
                                              /*persistent=*/true);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  WaitWatch watch;
  auto index = CreateIndex((*cluster)->Spec(), WaitingOptions(watch));
  ASSERT_TRUE(index.ok());

  absl::Status restarted;
  ExpectNoFailureThrough(
      **cluster, **index, "restart",
      {[&] {
         for (const auto& node : (*cluster)->nodes()) node->Kill();
       },
       [&](const std::atomic<int>&) {
         // Down until calls wait for it: the restart comes while they do.
         EXPECT_TRUE(watch.AwaitWaiting(1));
         for (const auto& node : (*cluster)->nodes()) {
           absl::Status s = node->Restart();
           if (restarted.ok()) restarted = s;
         }
       }},
      watch);
  EXPECT_TRUE(restarted.ok()) << restarted;
}

// A master stopped (SIGSTOP) for less than the node timeout, so that no
// failover happens: a write without a token in flight to it meets the
// command timeout and fails (its outcome is unknown: it runs once the
// master goes on); reads, token-carrying inserts and releases sent
// meanwhile wait and go through after SIGCONT.
TEST(RedisClusterFailover, MasterStoppedBelowTheNodeTimeout) {
  SKIP_WITHOUT_REDIS();
  // A node timeout far longer than the stop: the replica stays a replica.
  auto cluster = RedisClusterProcesses::Start(3, 1, /*node_timeout_ms=*/60000);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  WaitWatch watch;
  IndexOptions options = WaitingOptions(watch);
  options.command_timeout = absl::Milliseconds(1200);
  auto index = CreateIndex((*cluster)->Spec(), options);
  ASSERT_TRUE(index.ok());
  auto masters = (*cluster)->MasterPorts();
  ASSERT_TRUE(masters.ok());
  RedisProcess* stopped = FirstMaster(**cluster);
  ASSERT_NE(stopped, nullptr);
  const std::vector<uint64_t> on_it =
      FingerprintsOnMaster(**cluster, stopped->port(), "stop", 3);
  ASSERT_EQ(on_it.size(), 3u);
  const std::string a = Fp(on_it[0]), b = Fp(on_it[1]), c = Fp(on_it[2]);
  // Each once; the index now has a connection to the master.
  ASSERT_TRUE((*index)->Insert("stop", {{a, 1}, {b, 1}, {c, 1}}).ok());

  stopped->Pause();
  struct Resume {
    ~Resume() { node->Resume(); }
    RedisProcess* node;
  } resume{stopped};
  auto untokened = (*index)->Insert("stop", {{a, 1}});
  ASSERT_FALSE(untokened.ok());
  EXPECT_EQ(untokened.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(untokened.status().message(),
                                "without a write token it is not sent again"))
      << untokened.status();

  const WriteToken insert_token{"stopped-insert", 0};
  const WriteToken release_token{"stopped-release", 0};
  absl::StatusOr<std::vector<InsertResult>> inserted;
  absl::StatusOr<std::vector<uint64_t>> released;
  absl::StatusOr<std::vector<bool>> found;
  std::vector<std::thread> calls;
  calls.emplace_back(
      [&] { inserted = (*index)->Insert("stop", {{b, 1}}, &insert_token); });
  calls.emplace_back(
      [&] { released = (*index)->Release("stop", {c}, &release_token); });
  calls.emplace_back([&] { found = (*index)->Lookup("stop", {a, b, c}); });
  const bool all_waited = watch.AwaitWaiting(3);
  stopped->Resume();
  for (auto& t : calls) t.join();
  ASSERT_TRUE(all_waited) << "the calls did not wait for the stopped master";
  ASSERT_TRUE(inserted.ok()) << inserted.status();
  EXPECT_EQ((*inserted)[0].ref_count, 2u);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ((*released)[0], 0u);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE((*found)[0] && (*found)[1]);

  // No failover happened; the failed write ran once the master went on.
  auto after = (*cluster)->MasterPorts();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *masters);
  EXPECT_EQ(CountOnceItShows(stopped->port(), "stop", a, "2"), "2");
  ExpectCounts({stopped->port()}, "stop",
               {{on_it[0], 2}, {on_it[1], 2}, {on_it[2], 0}});
}

// A master without a replica killed: its slots never get a master again.
// Calls that need them wait for the failover wait and fail with UNAVAILABLE
// saying so; once chunkd stops waiting (StopWaiting, at shutdown), a
// waiting call fails at once and so does every later one.
TEST(RedisClusterFailover, ASlotThatNeverGetsAMasterFailsAfterTheWait) {
  SKIP_WITHOUT_REDIS();
  auto cluster = RedisClusterProcesses::Start(3, 0, /*node_timeout_ms=*/1000);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  RedisProcess* victim = FirstMaster(**cluster);
  ASSERT_NE(victim, nullptr);
  const std::vector<uint64_t> on_it =
      FingerprintsOnMaster(**cluster, victim->port(), "gone", 1);
  ASSERT_EQ(on_it.size(), 1u);
  const std::string fp = Fp(on_it[0]);
  victim->Kill();

  IndexOptions options;
  options.failover_wait = absl::Milliseconds(1500);
  auto bounded = CreateIndex((*cluster)->Spec(), options);
  ASSERT_TRUE(bounded.ok());
  auto found = (*bounded)->Lookup("gone", {fp});
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(
      found.status().message(),
      "(redis did not come back within the failover wait of 1.5s, "
      "--redis_failover_wait)"))
      << found.status();
  EXPECT_TRUE(absl::StrContains(found.status().message(), "redis"))
      << found.status();

  options.failover_wait = absl::Hours(1);
  WaitWatch watch;
  watch.Attach(options);
  auto stopping = CreateIndex((*cluster)->Spec(), options);
  ASSERT_TRUE(stopping.ok());
  const WriteToken token{"never", 0};
  absl::StatusOr<std::vector<InsertResult>> waiting;
  std::thread call(
      [&] { waiting = (*stopping)->Insert("gone", {{fp, 1}}, &token); });
  const bool waited = watch.AwaitWaiting(1);
  (*stopping)->StopWaiting();
  call.join();
  ASSERT_TRUE(waited);
  ASSERT_FALSE(waiting.ok());
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(waiting.status().message(),
                                "(no more waiting for redis to come back: "
                                "chunkd is stopping)"))
      << waiting.status();
  auto later = (*stopping)->Lookup("gone", {fp});
  EXPECT_EQ(later.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(later.status().message(), "chunkd is stopping"))
      << later.status();
  EXPECT_EQ(watch.started(), 1) << "a call waited after StopWaiting";
}

}  // namespace
}  // namespace chunkd::index
