// The FingerprintIndex contract, run against every backend (docs/design.md, "The contract"):
// memory, rocksdb (a database per test in a temporary directory) and — when
// built with Redis — redis and redis_cluster against real
// servers this process starts on free 127.0.0.1 ports (one redis-server; a
// 3-master + 3-replica cluster). Each backend is its own ctest entry, so a
// process starts only the servers it needs, once; every test starts from an
// empty database (FLUSHALL). The servers die with the process.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "index/fingerprint_index.h"
#include "index/memory_index.h"

#ifdef CHUNKD_WITH_REDIS
#include "index/redis_index.h"
#include "support/redis_process.h"
#endif

namespace chunkd::index {
namespace {

using MakeIndex =
    std::function<absl::StatusOr<std::unique_ptr<FingerprintIndex>>()>;

struct Backend {
  std::string name;
  // A fresh, empty index. FAILED_PRECONDITION: cannot run here (skip).
  MakeIndex make;
  // A fresh, empty index that set_full(true) makes refuse new entries once
  // it holds two; set_full(false) gives it room again (room for one, at
  // least, once one of the two was released).
  MakeIndex make_limited;
  std::function<absl::Status(bool full)> set_full;
};

void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

#ifdef CHUNKD_WITH_REDIS
// Servers shared by every test of this process; stopped at exit.
struct Servers {
  std::unique_ptr<testing::RedisProcess> single;
  std::unique_ptr<testing::RedisClusterProcesses> cluster;
  absl::Status single_status = absl::OkStatus();
  absl::Status cluster_status = absl::OkStatus();
  bool single_started = false;
  bool cluster_started = false;
};

Servers& TheServers() {
  static auto* servers = new Servers();
  return *servers;
}

class ServersEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    TheServers().single.reset();
    TheServers().cluster.reset();
  }
};
[[maybe_unused]] ::testing::Environment* const kServersEnvironment =
    ::testing::AddGlobalTestEnvironment(new ServersEnvironment());

absl::Status Command(int port, const std::vector<std::string>& args) {
  auto direct = testing::DirectRedis::Connect("127.0.0.1", port);
  if (!direct.ok()) return direct.status();
  auto reply = (*direct)->Command(args);
  return reply.ok() ? absl::OkStatus() : reply.status();
}

// Empty, and with room (a test may have made it full).
absl::Status Flush(int port) {
  if (absl::Status s = Command(port, {"CONFIG", "SET", "maxmemory", "0"});
      !s.ok()) {
    return s;
  }
  return Command(port, {"FLUSHALL"});
}

// maxmemory 1 byte: full at once (noeviction is the default policy).
absl::Status SetFull(const std::vector<int>& ports, bool full) {
  for (int port : ports) {
    if (absl::Status s = Command(
            port, {"CONFIG", "SET", "maxmemory", full ? "1" : "0"});
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status SetRedisFull(bool full) {
  return SetFull({TheServers().single->port()}, full);
}

absl::Status SetRedisClusterFull(bool full) {
  auto masters = TheServers().cluster->MasterPorts();
  if (!masters.ok()) return masters.status();
  return SetFull(*masters, full);
}

absl::StatusOr<std::unique_ptr<FingerprintIndex>> MakeRedis() {
  if (absl::Status tools = testing::RedisToolsAvailable(); !tools.ok()) {
    return tools;
  }
  Servers& s = TheServers();
  if (!s.single_started) {
    s.single_started = true;
    auto started = testing::RedisProcess::Start({});
    if (started.ok()) {
      s.single = *std::move(started);
    } else {
      s.single_status = started.status();
    }
  }
  if (!s.single_status.ok()) return s.single_status;
  if (absl::Status f = Flush(s.single->port()); !f.ok()) return f;
  return CreateIndex(absl::StrCat("redis://", s.single->address()));
}

absl::StatusOr<std::unique_ptr<FingerprintIndex>> MakeRedisCluster() {
  if (absl::Status tools = testing::RedisToolsAvailable(); !tools.ok()) {
    return tools;
  }
  Servers& s = TheServers();
  if (!s.cluster_started) {
    s.cluster_started = true;
    auto started = testing::RedisClusterProcesses::Start(3, 1);
    if (started.ok()) {
      s.cluster = *std::move(started);
    } else {
      s.cluster_status = started.status();
    }
  }
  if (!s.cluster_status.ok()) return s.cluster_status;
  auto masters = s.cluster->MasterPorts();
  if (!masters.ok()) return masters.status();
  for (int port : *masters) {
    if (absl::Status f = Flush(port); !f.ok()) return f;
  }
  return CreateIndex(s.cluster->Spec());
}
#endif

#ifdef CHUNKD_WITH_ROCKSDB
// A database in a directory of its own under the test's temporary
// directory, removed when the process ends.
absl::StatusOr<std::unique_ptr<FingerprintIndex>> MakeRocksDb(
    const IndexOptions& options) {
  static std::atomic<int> next{0};
  static const std::string root = [] {
    std::string dir = ::testing::TempDir() + "index_contract_rocksdb." +
                      std::to_string(getpid());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(
          ::testing::TempDir() + "index_contract_rocksdb." +
              std::to_string(getpid()),
          ec);
    });
    return dir;
  }();
  return CreateIndex(absl::StrCat("rocksdb://", root, "/", next++), options);
}
#endif

const std::vector<Backend>& Backends() {
  static const auto* backends = new std::vector<Backend>{
      {"memory",
       []() -> absl::StatusOr<std::unique_ptr<FingerprintIndex>> {
         return std::make_unique<MemoryIndex>();
       },
       []() -> absl::StatusOr<std::unique_ptr<FingerprintIndex>> {
         IndexOptions options;
         options.max_entries = 2;
         return std::make_unique<MemoryIndex>(options);
       },
       [](bool) { return absl::OkStatus(); }},
#ifdef CHUNKD_WITH_ROCKSDB
      {"rocksdb", [] { return MakeRocksDb(IndexOptions()); },
       [] {
         IndexOptions options;
         options.max_entries = 2;
         return MakeRocksDb(options);
       },
       [](bool) { return absl::OkStatus(); }},
#endif
#ifdef CHUNKD_WITH_REDIS
      {"redis", MakeRedis, MakeRedis, SetRedisFull},
      {"redis_cluster", MakeRedisCluster, MakeRedisCluster,
       SetRedisClusterFull},
#endif
  };
  return *backends;
}

class IndexContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto made = GetParam().make();
    if (made.status().code() == absl::StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << made.status().message();
    }
    ASSERT_TRUE(made.ok()) << made.status();
    index_ = *std::move(made);
  }

  // The reference count of fp, read by counting one more reference and
  // dropping it again.
  uint64_t RefCount(absl::string_view ns, const std::string& fp) {
    auto found = index_->Lookup(ns, {fp});
    EXPECT_TRUE(found.ok()) << found.status();
    if (!found.ok() || !(*found)[0]) return 0;
    auto ins = index_->Insert(ns, {{fp, 1}});
    EXPECT_TRUE(ins.ok()) << ins.status();
    auto rel = index_->Release(ns, {fp});
    EXPECT_TRUE(rel.ok()) << rel.status();
    return ins.ok() ? (*ins)[0].ref_count - 1 : 0;
  }

  // The hints of each of `fps` under `params_key`, as "sizes / run" (e.g.
  // "200,100 / 4,5"; " / " for none), so that a failure shows both.
  std::vector<std::string> Hints(absl::string_view ns,
                                 absl::string_view params_key,
                                 const std::vector<std::string>& fps) {
    auto hints = index_->NextHintsOf(ns, params_key, fps);
    EXPECT_TRUE(hints.ok()) << hints.status();
    std::vector<std::string> shown;
    if (!hints.ok()) return shown;
    EXPECT_EQ(hints->size(), fps.size());
    for (const NextHints& h : *hints) {
      shown.push_back(absl::StrCat(absl::StrJoin(h.sizes, ","), " / ",
                                   absl::StrJoin(h.run, ",")));
    }
    return shown;
  }
  std::string Hint(absl::string_view ns, absl::string_view params_key,
                   const std::string& fp) {
    std::vector<std::string> shown =
        Hints(ns, params_key, std::vector<std::string>{fp});
    return shown.size() == 1 ? shown[0] : "(no answer)";
  }

  std::unique_ptr<FingerprintIndex> index_;
};

std::string Fp(int i) { return std::string(32, static_cast<char>(i)); }
// A realistic fingerprint: 32 bytes that differ everywhere, braces included.
std::string Sha(int i) {
  std::string fp(32, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
  for (char& c : fp) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    c = static_cast<char>(x >> 56);
  }
  return fp;
}

TEST_P(IndexContractTest, NamesItsBackendAndIsHealthy) {
  EXPECT_EQ(index_->backend(), GetParam().name == "redis_cluster"
                                   ? "redis-cluster"
                                   : GetParam().name);
  EXPECT_TRUE(index_->Health().ok()) << index_->Health();
}

TEST_P(IndexContractTest, InsertThenLookup) {
  auto missing = index_->Lookup("ns", {Fp(1), Fp(2)});
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(*missing, (std::vector<bool>{false, false}));

  auto ins = index_->Insert("ns", {{Fp(1), 100}});
  ASSERT_TRUE(ins.ok()) << ins.status();
  ASSERT_EQ(ins->size(), 1u);
  EXPECT_TRUE((*ins)[0].is_new);
  EXPECT_EQ((*ins)[0].ref_count, 1u);

  auto found = index_->Lookup("ns", {Fp(1), Fp(2)});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<bool>{true, false}));
}

TEST_P(IndexContractTest, EmptyBatchesAreEmpty) {
  auto found = index_->Lookup("ns", {});
  ASSERT_TRUE(found.ok());
  EXPECT_TRUE(found->empty());
  auto ins = index_->Insert("ns", {});
  ASSERT_TRUE(ins.ok());
  EXPECT_TRUE(ins->empty());
  auto rel = index_->Release("ns", {});
  ASSERT_TRUE(rel.ok());
  EXPECT_TRUE(rel->empty());
}

TEST_P(IndexContractTest, SecondInsertIsDuplicateAndCounts) {
  ASSERT_TRUE(index_->Insert("ns", {{Fp(1), 10}}).ok());
  auto again = index_->Insert("ns", {{Fp(1), 10}, {Fp(1), 10}});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)[0].is_new);
  EXPECT_EQ((*again)[0].ref_count, 2u);
  EXPECT_FALSE((*again)[1].is_new);
  EXPECT_EQ((*again)[1].ref_count, 3u);
}

TEST_P(IndexContractTest, DuplicateWithinOneBatchIsNewOnce) {
  auto ins = index_->Insert("ns", {{Fp(7), 1}, {Fp(7), 1}});
  ASSERT_TRUE(ins.ok());
  EXPECT_TRUE((*ins)[0].is_new);
  EXPECT_FALSE((*ins)[1].is_new);
}

TEST_P(IndexContractTest, NamespacesDoNotShareEntries) {
  ASSERT_TRUE(index_->Insert("tenant-a", {{Fp(3), 5}}).ok());
  auto other = index_->Lookup("tenant-b", {Fp(3)});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)[0]);
  auto ins = index_->Insert("tenant-b", {{Fp(3), 5}});
  ASSERT_TRUE(ins.ok());
  EXPECT_TRUE((*ins)[0].is_new);
}

TEST_P(IndexContractTest, RejectsBadNamespace) {
  for (absl::string_view ns : {"", "a:b", "a{b}"}) {
    auto found = index_->Lookup(ns, {Fp(1)});
    EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument) << ns;
    auto ins = index_->Insert(ns, {{Fp(1), 1}});
    EXPECT_EQ(ins.status().code(), absl::StatusCode::kInvalidArgument) << ns;
  }
}

TEST_P(IndexContractTest, ReleaseDecrementsAndRemovesAtZero) {
  ASSERT_TRUE(index_->Insert("ns", {{Fp(4), 1}, {Fp(4), 1}}).ok());
  auto left = index_->Release("ns", {Fp(4)});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ((*left)[0], 1u);
  left = index_->Release("ns", {Fp(4), Fp(5)});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, (std::vector<uint64_t>{0, 0}));
  auto found = index_->Lookup("ns", {Fp(4)});
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE((*found)[0]);
  auto ins = index_->Insert("ns", {{Fp(4), 1}});
  ASSERT_TRUE(ins.ok());
  EXPECT_TRUE((*ins)[0].is_new);
}

TEST_P(IndexContractTest, BinaryFingerprintsWithAnyBytes) {
  // Braces, colons, NULs: the key is binary and must route like Redis does.
  const std::vector<std::string> fps = {
      std::string("a{b}c", 5), std::string("{}", 2), std::string("\0:\0", 3),
      std::string("x}{y", 4), Sha(1)};
  std::vector<InsertEntry> entries;
  for (const std::string& fp : fps) entries.push_back({fp, 7});
  auto ins = index_->Insert("bin", entries);
  ASSERT_TRUE(ins.ok()) << ins.status();
  for (const InsertResult& r : *ins) EXPECT_TRUE(r.is_new);
  auto found = index_->Lookup("bin", fps);
  ASSERT_TRUE(found.ok());
  for (bool f : *found) EXPECT_TRUE(f);
  auto other = index_->Lookup("bin", {std::string("a{b}d", 5)});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)[0]);
}

TEST_P(IndexContractTest, LargeBatch) {
  std::vector<InsertEntry> entries;
  std::vector<std::string> fps;
  for (int i = 0; i < 5000; ++i) {
    fps.push_back(Sha(i));
    entries.push_back({fps.back(), static_cast<uint32_t>(i)});
  }
  auto ins = index_->Insert("big", entries);
  ASSERT_TRUE(ins.ok()) << ins.status();
  for (const InsertResult& r : *ins) ASSERT_TRUE(r.is_new);
  auto found = index_->Lookup("big", fps);
  ASSERT_TRUE(found.ok());
  for (bool f : *found) ASSERT_TRUE(f);
}

TEST_P(IndexContractTest, RacingInsertsSeeExactlyOneNew) {
  constexpr int kThreads = 8;
  constexpr int kFingerprints = 2000;
  std::vector<InsertEntry> batch;
  for (int i = 0; i < kFingerprints; ++i) {
    batch.push_back({std::to_string(i) + std::string(24, 'x'), 4096});
  }
  std::vector<std::atomic<int>> news(kFingerprints);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto r = index_->Insert("race", batch);
      ASSERT_TRUE(r.ok()) << r.status();
      for (int i = 0; i < kFingerprints; ++i) {
        if ((*r)[i].is_new) news[i].fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kFingerprints; ++i) {
    ASSERT_EQ(news[i].load(), 1) << "fingerprint " << i;
  }
  auto again = index_->Insert("race", {batch[0]});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].ref_count, kThreads + 1u);
}

TEST_P(IndexContractTest, ConcurrentInsertsAndReleasesLeaveExactCounts) {
  // Thread t inserts fingerprint i (t + i % 3) times in small batches and
  // releases it (i % 2) times; counts must add up exactly.
  constexpr int kThreads = 8;
  constexpr int kFingerprints = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < t + 2; ++round) {
        std::vector<InsertEntry> batch;
        for (int i = 0; i < kFingerprints; ++i) {
          if (round < t + i % 3) batch.push_back({Sha(i), 100});
        }
        auto r = index_->Insert("counts", batch);
        ASSERT_TRUE(r.ok()) << r.status();
      }
      std::vector<std::string> release;
      for (int i = 0; i < kFingerprints; ++i) {
        if (i % 2 == 1 && t + i % 3 > 0) release.push_back(Sha(i));
      }
      auto r = index_->Release("counts", release);
      ASSERT_TRUE(r.ok()) << r.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kFingerprints; ++i) {
    uint64_t expected = 0;
    for (int t = 0; t < kThreads; ++t) {
      const int inserts = t + i % 3;
      expected += inserts - (i % 2 == 1 && inserts > 0 ? 1 : 0);
    }
    ASSERT_EQ(RefCount("counts", Sha(i)), expected) << "fingerprint " << i;
  }
}

TEST_P(IndexContractTest, TokenMakesARetriedInsertCountOnce) {
  const WriteToken token{"stream-1", 0};
  const std::vector<InsertEntry> batch = {
      {Fp(1), 10}, {Fp(2), 20}, {Fp(1), 10}};
  auto first = index_->Insert("tok", batch, &token);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE((*first)[0].is_new);
  EXPECT_TRUE((*first)[1].is_new);
  EXPECT_FALSE((*first)[2].is_new);
  EXPECT_EQ((*first)[2].ref_count, 2u);

  // The same batch again (a client retrying after a failure): nothing is
  // applied, and the answers are those of the first time.
  auto retry = index_->Insert("tok", batch, &token);
  ASSERT_TRUE(retry.ok()) << retry.status();
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ((*retry)[i].is_new, (*first)[i].is_new) << i;
    EXPECT_EQ((*retry)[i].ref_count, (*first)[i].ref_count) << i;
  }
  EXPECT_EQ(RefCount("tok", Fp(1)), 2u);
  EXPECT_EQ(RefCount("tok", Fp(2)), 1u);

  // A retry that goes further than the first attempt: the known positions
  // replay, the new ones apply.
  const std::vector<InsertEntry> longer = {
      {Fp(1), 10}, {Fp(2), 20}, {Fp(1), 10}, {Fp(3), 30}};
  auto further = index_->Insert("tok", longer, &token);
  ASSERT_TRUE(further.ok());
  EXPECT_TRUE((*further)[3].is_new);
  EXPECT_EQ(RefCount("tok", Fp(1)), 2u);
  EXPECT_EQ(RefCount("tok", Fp(3)), 1u);

  // A later batch of the same stream continues at its position.
  const WriteToken next{"stream-1", 4};
  auto later = index_->Insert("tok", {{Fp(1), 10}}, &next);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ((*later)[0].ref_count, 3u);

  // Another stream counts on its own.
  const WriteToken other{"stream-2", 0};
  auto counted = index_->Insert("tok", batch, &other);
  ASSERT_TRUE(counted.ok());
  EXPECT_EQ((*counted)[0].ref_count, 4u);
  EXPECT_EQ((*counted)[2].ref_count, 5u);

  // Tokens belong to a namespace.
  auto elsewhere = index_->Insert("tok2", batch, &token);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_TRUE((*elsewhere)[0].is_new);
}

TEST_P(IndexContractTest, TokenMakesARetriedReleaseCountOnce) {
  ASSERT_TRUE(index_->Insert("tok", {{Fp(1), 1}, {Fp(1), 1}, {Fp(1), 1}}).ok());
  // Insert and release positions are separate: the same stream id and
  // position 0 is used for both.
  const WriteToken token{"stream-1", 0};
  ASSERT_TRUE(index_->Insert("tok", {{Fp(9), 1}}, &token).ok());
  auto first = index_->Release("tok", {Fp(1), Fp(1)}, &token);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, (std::vector<uint64_t>{2, 1}));
  auto retry = index_->Release("tok", {Fp(1), Fp(1)}, &token);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(*retry, (std::vector<uint64_t>{2, 1}));
  EXPECT_EQ(RefCount("tok", Fp(1)), 1u);
  EXPECT_EQ(RefCount("tok", Fp(9)), 1u);

  // A release that removed its entry is recorded too (a count of 0): a
  // retry after someone inserted the chunk again must not take that
  // reference away.
  const WriteToken last{"stream-1", 2};
  auto removed = index_->Release("tok", {Fp(1)}, &last);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, (std::vector<uint64_t>{0}));
  ASSERT_TRUE(index_->Insert("tok", {{Fp(1), 1}}).ok());
  auto again = index_->Release("tok", {Fp(1)}, &last);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, (std::vector<uint64_t>{0}));
  EXPECT_EQ(RefCount("tok", Fp(1)), 1u);
}

TEST_P(IndexContractTest, TokenPositionsAnywhereReplayWhateverTheBatching) {
  // Around 65536 (where the redis backend starts a new record of positions)
  // and far out: a retry cut into other batches replays every position.
  int fp = 100;
  for (const uint64_t base : {uint64_t{65536 - 3}, uint64_t{1} << 62}) {
    SCOPED_TRACE(base);
    std::vector<InsertEntry> entries;
    std::vector<std::string> fps;
    for (int i = 0; i < 6; ++i) {
      fps.push_back(Sha(fp++));
      entries.push_back({fps.back(), 100});
    }
    entries.push_back(entries[1]);  // a duplicate within the stream
    const WriteToken token{"far", base};
    auto first = index_->Insert("pos", entries, &token);
    ASSERT_TRUE(first.ok()) << first.status();
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_TRUE((*first)[i].is_new) << i;
    }
    EXPECT_FALSE((*first)[6].is_new);
    EXPECT_EQ((*first)[6].ref_count, 2u);

    // The retry in three batches, the last one starting past 65536.
    const absl::Span<const InsertEntry> all(entries);
    std::vector<InsertResult> replay;
    for (const auto& [from, count] :
         {std::pair<size_t, size_t>{0, 2}, {2, 2}, {4, 3}}) {
      const WriteToken part{"far", base + from};
      auto r = index_->Insert("pos", all.subspan(from, count), &part);
      ASSERT_TRUE(r.ok()) << r.status();
      replay.insert(replay.end(), r->begin(), r->end());
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      EXPECT_EQ(replay[i].is_new, (*first)[i].is_new) << i;
      EXPECT_EQ(replay[i].ref_count, (*first)[i].ref_count) << i;
    }
    EXPECT_EQ(RefCount("pos", fps[0]), 1u);
    EXPECT_EQ(RefCount("pos", fps[1]), 2u);

    // A position before those, never written, is applied.
    const WriteToken before{"far", base - 2};
    auto earlier = index_->Insert("pos", {{fps[0], 100}}, &before);
    ASSERT_TRUE(earlier.ok());
    EXPECT_EQ((*earlier)[0].ref_count, 2u);

    // Releases: counts left, recorded too (including a count of zero).
    const std::vector<std::string> drop = {fps[2], fps[2], fps[1]};
    auto left = index_->Release("pos", drop, &token);
    ASSERT_TRUE(left.ok()) << left.status();
    EXPECT_EQ(*left, (std::vector<uint64_t>{0, 0, 1}));
    const WriteToken release_tail{"far", base + 1};
    auto again = index_->Release("pos", {fps[2], fps[1]}, &release_tail);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, (std::vector<uint64_t>{0, 1}));
    EXPECT_EQ(RefCount("pos", fps[1]), 1u);
    auto found = index_->Lookup("pos", {fps[2]});
    ASSERT_TRUE(found.ok());
    EXPECT_FALSE((*found)[0]);
  }
}

TEST_P(IndexContractTest, RejectsBadStreamId) {
  const WriteToken bad{"a:b", 0};
  auto ins = index_->Insert("ns", {{Fp(1), 1}}, &bad);
  EXPECT_EQ(ins.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ins.status().message().find("stream_id"), std::string::npos);
  const WriteToken empty{"", 0};
  auto rel = index_->Release("ns", {Fp(1)}, &empty);
  EXPECT_EQ(rel.status().code(), absl::StatusCode::kInvalidArgument);
  auto found = index_->Lookup("ns", {Fp(1)});
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE((*found)[0]) << "a rejected batch must not apply anything";
}

TEST_P(IndexContractTest, NextSizesAreAShortMostRecentlyUsedList) {
  constexpr absl::string_view kParams = "fastcdc:4096:16384:65536:1:0";
  ASSERT_TRUE(index_->Insert("hint", {{Fp(1), 100}, {Fp(2), 100}}).ok());
  auto none = index_->NextSizes("hint", kParams, {Fp(1), Fp(3)});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, (std::vector<std::vector<uint32_t>>{{}, {}}));

  ASSERT_TRUE(index_->RecordNextSizes("hint", kParams, {{Fp(1), 100}}).ok());
  ASSERT_TRUE(index_
                  ->RecordNextSizes("hint", kParams,
                                    {{Fp(1), 200}, {Fp(2), 7}, {Fp(3), 9}})
                  .ok());
  auto two = index_->NextSizes("hint", kParams, {Fp(1), Fp(2), Fp(3)});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::vector<uint32_t>>{{200, 100}, {7}, {}}))
      << "an absent fingerprint learns nothing";

  // Default length 2: the oldest falls off; a known size moves to the front.
  ASSERT_TRUE(index_->RecordNextSizes("hint", kParams, {{Fp(1), 300}}).ok());
  auto three = index_->NextSizes("hint", kParams, {Fp(1)});
  ASSERT_TRUE(three.ok());
  EXPECT_EQ((*three)[0], (std::vector<uint32_t>{300, 200}));
  ASSERT_TRUE(index_->RecordNextSizes("hint", kParams, {{Fp(1), 200}}).ok());
  ASSERT_TRUE(index_->RecordNextSizes("hint", kParams, {{Fp(1), 200}}).ok());
  auto moved = index_->NextSizes("hint", kParams, {Fp(1)});
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ((*moved)[0], (std::vector<uint32_t>{200, 300}));

  // Hints are per chunking parameters and per namespace.
  auto other_params =
      index_->NextSizes("hint", "seqcdc:8192:16384:32768", {Fp(1)});
  ASSERT_TRUE(other_params.ok());
  EXPECT_TRUE((*other_params)[0].empty());
  ASSERT_TRUE(index_->Insert("hint2", {{Fp(1), 100}}).ok());
  auto other_ns = index_->NextSizes("hint2", kParams, {Fp(1)});
  ASSERT_TRUE(other_ns.ok());
  EXPECT_TRUE((*other_ns)[0].empty());

  // Hints die with their entry.
  ASSERT_TRUE(index_->Release("hint", {Fp(1)}).ok());
  ASSERT_TRUE(index_->Insert("hint", {{Fp(1), 100}}).ok());
  auto reborn = index_->NextSizes("hint", kParams, {Fp(1)});
  ASSERT_TRUE(reborn.ok());
  EXPECT_TRUE((*reborn)[0].empty());

  auto bad = index_->NextSizes("hint", "has space", {Fp(1)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index_->RecordNextSizes("hint", "", {{Fp(1), 1}}).code(),
            absl::StatusCode::kInvalidArgument);
}

// A hint's run (the sizes after the next one) is recorded with it and
// belongs to the list's first size: every record replaces the run, whether
// its size is new, moves to the front or is first already.
TEST_P(IndexContractTest, EachRecordReplacesTheRun) {
  constexpr absl::string_view kParams = "fastcdc:4096:16384:65536:1:0";
  ASSERT_TRUE(index_->Insert("run", {{Fp(1), 100}, {Fp(2), 100}}).ok());
  EXPECT_EQ(Hints("run", kParams, {Fp(1), Fp(2)}),
            (std::vector<std::string>{" / ", " / "}));

  ASSERT_TRUE(index_
                  ->RecordNextSizes("run", kParams,
                                    {{Fp(1), 100, {1, 2, 3}}, {Fp(2), 7, {5}}})
                  .ok());
  EXPECT_EQ(Hints("run", kParams, {Fp(1), Fp(2)}),
            (std::vector<std::string>{"100 / 1,2,3", "7 / 5"}));

  // A new size.
  ASSERT_TRUE(
      index_->RecordNextSizes("run", kParams, {{Fp(1), 200, {4, 5}}}).ok());
  EXPECT_EQ(Hint("run", kParams, Fp(1)), "200,100 / 4,5");
  // The first size again: its run is replaced all the same, by an empty
  // one too.
  ASSERT_TRUE(index_->RecordNextSizes("run", kParams, {{Fp(1), 200}}).ok());
  EXPECT_EQ(Hint("run", kParams, Fp(1)), "200,100 / ");
  ASSERT_TRUE(
      index_->RecordNextSizes("run", kParams, {{Fp(1), 200, {6}}}).ok());
  EXPECT_EQ(Hint("run", kParams, Fp(1)), "200,100 / 6");
  // A known size back to the front: the record's run, not the one that
  // size had before.
  ASSERT_TRUE(index_->RecordNextSizes("run", kParams, {{Fp(1), 100}}).ok());
  EXPECT_EQ(Hint("run", kParams, Fp(1)), "100,200 / ");
  for (int round = 0; round < 2; ++round) {  // twice changes nothing
    ASSERT_TRUE(
        index_->RecordNextSizes("run", kParams, {{Fp(1), 100, {7, 8, 9}}})
            .ok());
    EXPECT_EQ(Hint("run", kParams, Fp(1)), "100,200 / 7,8,9") << round;
  }
  // One call's hints apply in order.
  ASSERT_TRUE(index_
                  ->RecordNextSizes("run", kParams,
                                    {{Fp(1), 300, {1}}, {Fp(1), 200, {2}}})
                  .ok());
  EXPECT_EQ(Hints("run", kParams, {Fp(1), Fp(2)}),
            (std::vector<std::string>{"200,300 / 2", "7 / 5"}));
}

TEST_P(IndexContractTest, RunsLongerThanTheLimitAreCut) {
  ASSERT_EQ(kHintRunLength, 3u);
  ASSERT_TRUE(index_->Insert("run", {{Fp(1), 100}, {Fp(2), 100}}).ok());
  ASSERT_TRUE(index_
                  ->RecordNextSizes(
                      "run", "p",
                      {{Fp(1), 10, {1, 2, 3, 4, 5}}, {Fp(2), 20, {6, 7, 8, 9}}})
                  .ok());
  EXPECT_EQ(Hints("run", "p", {Fp(1), Fp(2)}),
            (std::vector<std::string>{"10 / 1,2,3", "20 / 6,7,8"}));
  ASSERT_TRUE(
      index_->RecordNextSizes("run", "p", {{Fp(1), 10, {4, 5, 6, 7}}}).ok());
  EXPECT_EQ(Hint("run", "p", Fp(1)), "10 / 4,5,6");
  ASSERT_TRUE(index_->RecordNextSizes("run", "p", {{Fp(1), 10, {1}}}).ok());
  EXPECT_EQ(Hint("run", "p", Fp(1)), "10 / 1");
}

// No sizes, no run: absent entries learn nothing, and a run recorded under
// one parameter key is no run under another.
TEST_P(IndexContractTest, NoSizesNoRun) {
  ASSERT_TRUE(index_->Insert("run", {{Fp(1), 100}}).ok());
  ASSERT_TRUE(
      index_
          ->RecordNextSizes("run", "p", {{Fp(1), 10, {1, 2}}, {Fp(2), 20, {3}}})
          .ok());
  EXPECT_EQ(Hints("run", "p", {Fp(1), Fp(2)}),
            (std::vector<std::string>{"10 / 1,2", " / "}));
  EXPECT_EQ(Hint("run", "q", Fp(1)), " / ");
  // An entry that comes later has learned nothing meanwhile.
  ASSERT_TRUE(index_->Insert("run", {{Fp(2), 100}}).ok());
  EXPECT_EQ(Hint("run", "p", Fp(2)), " / ");
  ASSERT_TRUE(index_->Insert("run2", {{Fp(1), 100}}).ok());
  EXPECT_EQ(Hint("run2", "p", Fp(1)), " / ");
}

TEST_P(IndexContractTest, RunsArePerParamsKey) {
  constexpr absl::string_view kA = "fastcdc:4096:16384:65536:1:0";
  constexpr absl::string_view kB = "seqcdc:8192:16384:32768";
  ASSERT_TRUE(index_->Insert("run", {{Fp(1), 100}}).ok());
  ASSERT_TRUE(index_->RecordNextSizes("run", kA, {{Fp(1), 100, {1}}}).ok());
  ASSERT_TRUE(index_->RecordNextSizes("run", kB, {{Fp(1), 200, {2, 3}}}).ok());
  EXPECT_EQ(Hint("run", kA, Fp(1)), "100 / 1");
  EXPECT_EQ(Hint("run", kB, Fp(1)), "200 / 2,3");
  ASSERT_TRUE(index_->RecordNextSizes("run", kA, {{Fp(1), 100}}).ok());
  EXPECT_EQ(Hint("run", kA, Fp(1)), "100 / ");
  EXPECT_EQ(Hint("run", kB, Fp(1)), "200 / 2,3");
  ASSERT_TRUE(index_->RecordNextSizes("run", kB, {{Fp(1), 100, {9}}}).ok());
  EXPECT_EQ(Hint("run", kA, Fp(1)), "100 / ");
  EXPECT_EQ(Hint("run", kB, Fp(1)), "100,200 / 9");
}

// Runs live and die with their entry, under every parameter key.
TEST_P(IndexContractTest, ReleaseToZeroDropsTheRuns) {
  ASSERT_TRUE(index_->Insert("run", {{Fp(1), 100}, {Fp(1), 100}}).ok());
  ASSERT_TRUE(
      index_->RecordNextSizes("run", "p", {{Fp(1), 10, {1, 2, 3}}}).ok());
  ASSERT_TRUE(index_->RecordNextSizes("run", "q", {{Fp(1), 20, {4}}}).ok());
  auto left = index_->Release("run", {Fp(1)});
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ((*left)[0], 1u);
  EXPECT_EQ(Hint("run", "p", Fp(1)), "10 / 1,2,3");
  EXPECT_EQ(Hint("run", "q", Fp(1)), "20 / 4");

  left = index_->Release("run", {Fp(1)});
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ((*left)[0], 0u);
  EXPECT_EQ(Hint("run", "p", Fp(1)), " / ");
  ASSERT_TRUE(index_->Insert("run", {{Fp(1), 100}}).ok());
  EXPECT_EQ(Hint("run", "p", Fp(1)), " / ");
  EXPECT_EQ(Hint("run", "q", Fp(1)), " / ");
  // A size recorded without a run has none, whatever the entry's earlier
  // life held.
  ASSERT_TRUE(index_->RecordNextSizes("run", "p", {{Fp(1), 10}}).ok());
  ASSERT_TRUE(index_->RecordNextSizes("run", "q", {{Fp(1), 30}}).ok());
  EXPECT_EQ(Hint("run", "p", Fp(1)), "10 / ");
  EXPECT_EQ(Hint("run", "q", Fp(1)), "30 / ");
}

TEST_P(IndexContractTest, NextSizesAreTheSizesWithoutTheRuns) {
  ASSERT_TRUE(index_->Insert("run", {{Fp(1), 100}, {Fp(2), 100}}).ok());
  ASSERT_TRUE(
      index_
          ->RecordNextSizes(
              "run", "p",
              {{Fp(1), 100, {1, 2}}, {Fp(1), 200, {3}}, {Fp(2), 7, {4, 5, 6}}})
          .ok());
  auto sizes = index_->NextSizes("run", "p", {Fp(1), Fp(2), Fp(3)});
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_EQ(*sizes, (std::vector<std::vector<uint32_t>>{{200, 100}, {7}, {}}));
  auto bad = index_->NextHintsOf("run", "has space", {Fp(1)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_ns = index_->NextHintsOf("a:b", "p", {Fp(1)});
  EXPECT_EQ(bad_ns.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(IndexContractTest, CountsEntriesWhereThatIsCheap) {
  ASSERT_TRUE(index_->Insert("a", {{Fp(1), 1}, {Fp(2), 1}, {Fp(1), 1}}).ok());
  ASSERT_TRUE(index_->Insert("b", {{Fp(1), 1}}).ok());
  if (GetParam().name == "memory" || GetParam().name == "rocksdb") {
    EXPECT_EQ(index_->EntryCount(), 3u);
    ASSERT_TRUE(index_->Release("b", {Fp(1)}).ok());
    EXPECT_EQ(index_->EntryCount(), 2u);
  } else {
    EXPECT_EQ(index_->EntryCount(), std::nullopt);
  }
}

// A full index (the memory and rocksdb indexes at max_entries, Redis at
// maxmemory)
// refuses new entries with RESOURCE_EXHAUSTED saying what to do, and keeps
// serving everything else; a token-carrying retry once there is room again
// counts every position exactly once, whatever part of the refused batch
// was applied.
TEST_P(IndexContractTest, AFullIndexRefusesOnlyNewEntries) {
  auto made = GetParam().make_limited();
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<FingerprintIndex> index = *std::move(made);
  const std::string a = Sha(1), b = Sha(2), c = Sha(3);
  ASSERT_TRUE(index->Insert("full", {{a, 1}, {b, 1}}).ok());
  ASSERT_TRUE(GetParam().set_full(true).ok());
  struct Restore {
    ~Restore() { (void)set_full(false); }
    std::function<absl::Status(bool)> set_full;
  } restore{GetParam().set_full};

  auto expect_full = [&](const absl::Status& s, bool health) {
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    const std::string m(s.message());
    EXPECT_TRUE(absl::StrContains(m, "releas")) << m;
    if (GetParam().name == "memory" || GetParam().name == "rocksdb") {
      EXPECT_TRUE(absl::StrContains(m, "holds its limit of 2 entries")) << m;
      EXPECT_TRUE(absl::StrContains(m, "--index_max_entries")) << m;
      return;
    }
    EXPECT_TRUE(absl::StrContains(m, "redis at 127.0.0.1:")) << m;
    EXPECT_TRUE(absl::StrContains(m, "raise its maxmemory")) << m;
    if (!health) {
      EXPECT_TRUE(absl::StrContains(
          m, "\"OOM command not allowed when used memory > 'maxmemory'.\""))
          << m;
    }
  };
  auto refused = index->Insert("full", {{c, 1}});
  expect_full(refused.status(), false);
  expect_full(index->Health(), true);

  auto found = index->Lookup("full", {a, b, c});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (std::vector<bool>{true, true, false}));
  auto dup = index->Insert("full", {{a, 1}, {b, 1}});
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_EQ((*dup)[0].ref_count, 2u);
  EXPECT_FALSE((*dup)[1].is_new);
  const WriteToken dup_token{"dups", 0};
  auto tokened_dup = index->Insert("full", {{a, 1}}, &dup_token);
  ASSERT_TRUE(tokened_dup.ok()) << tokened_dup.status();
  EXPECT_EQ((*tokened_dup)[0].ref_count, 3u);
  auto replayed = index->Insert("full", {{a, 1}}, &dup_token);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_EQ((*replayed)[0].ref_count, 3u);
  EXPECT_TRUE(index->RecordNextSizes("full", "p", {{a, 7}}).ok());
  auto hints = index->NextSizes("full", "p", {a, c});
  ASSERT_TRUE(hints.ok()) << hints.status();
  EXPECT_TRUE((*hints)[1].empty());

  // A and C with a token: C is refused, A may or may not have been
  // applied (the memory index: yes; one Redis: no, one script call; a
  // cluster: it depends on the slots).
  const WriteToken token{"stream", 0};
  const std::vector<InsertEntry> batch = {{a, 1}, {c, 1}};
  expect_full(index->Insert("full", batch, &token).status(), false);

  // Releases free entries, tokened or not.
  const WriteToken release_token{"stream", 0};
  auto left = index->Release("full", {b, b}, &release_token);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(*left, (std::vector<uint64_t>{1, 0}));
  ASSERT_TRUE(GetParam().set_full(false).ok());
  EXPECT_TRUE(index->Health().ok()) << index->Health();

  auto retry = index->Insert("full", batch, &token);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ((*retry)[0].ref_count, 4u);
  EXPECT_TRUE((*retry)[1].is_new);
  auto again = index->Insert("full", batch, &token);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].ref_count, 4u);
  EXPECT_TRUE((*again)[1].is_new);
  auto counts = index->Release("full", {a, c});
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, (std::vector<uint64_t>{3, 0}));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, IndexContractTest,
                         ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param.name; });

#ifdef CHUNKD_WITH_REDIS
// How the redis backend lays entries and hints out (redis_layout.h). One
// server, so that a plain connection reaches every entry; the cluster runs
// the same scripts.
class RedisHintFieldsTest : public IndexContractTest {
 protected:
  void SetUp() override {
    IndexContractTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto direct =
        testing::DirectRedis::Connect("127.0.0.1", TheServers().single->port());
    ASSERT_TRUE(direct.ok()) << direct.status();
    direct_ = *std::move(direct);
  }

  // HGET key field: the value, or "(nil)".
  std::string Field(const std::string& key, const std::string& field) {
    auto reply = direct_->Command({"HGET", key, field});
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return "(error)";
    if ((*reply)->type == REDIS_REPLY_NIL) return "(nil)";
    return std::string((*reply)->str, (*reply)->len);
  }

  // How many HSETs the server ran so far, scripts' included.
  long long HsetCalls() {
    auto stats = direct_->Command({"INFO", "commandstats"});
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return -1;
    absl::string_view text((*stats)->str, (*stats)->len);
    constexpr absl::string_view kCalls = "cmdstat_hset:calls=";
    const size_t at = text.find(kCalls);
    if (at == absl::string_view::npos) return 0;
    absl::string_view rest = text.substr(at + kCalls.size());
    long long calls = 0;
    EXPECT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find(',')), &calls));
    return calls;
  }

  std::unique_ptr<testing::DirectRedis> direct_;
};

// An entry is a field of its bucket: uvarint count, uvarint size, then its
// hint records, in a bucket Redis keeps as a listpack.
TEST_P(RedisHintFieldsTest, EntriesAreFieldsOfListpackBuckets) {
  const BucketLayout layout(kDefaultBucketBits);
  ASSERT_TRUE(index_->Insert("lay", {{Fp(1), 300}, {Fp(1), 300}}).ok());
  const std::string key = layout.BucketKey("lay", Fp(1));
  // 18 bits: two bytes and the top two bits of the third.
  const std::string prefix = Fp(1).substr(0, 3);
  EXPECT_EQ(key, absl::StrCat("chunkd-b18:lay:", prefix.substr(0, 2),
                              std::string(1, prefix[2] & '\xc0')));
  const std::string field(layout.Field(Fp(1)));
  EXPECT_EQ(field.size(), 30u);
  EntryValue value;
  ASSERT_TRUE(DecodeEntryValue(Field(key, field), &value));
  EXPECT_EQ(value.refs, 2u);
  EXPECT_EQ(value.size, 300u);
  EXPECT_TRUE(value.hints.empty());
  EXPECT_EQ(Field(key, field).size(), 3u) << "1 byte count, 2 bytes size";
  auto encoding = direct_->Command({"OBJECT", "ENCODING", key});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  EXPECT_EQ(std::string((*encoding)->str, (*encoding)->len), "listpack");
  auto layout_key = direct_->Command({"HGET", kLayoutKey, "bucket_bits"});
  ASSERT_TRUE(layout_key.ok());
  EXPECT_EQ(std::string((*layout_key)->str, (*layout_key)->len), "18");
}

// Hints of several parameter keys share the entry's value, the most
// recent first, as many as fit in 64 bytes; each reads back its own.
TEST_P(RedisHintFieldsTest, HintRecordsOfSeveralKeysShareTheValue) {
  const BucketLayout layout(kDefaultBucketBits);
  ASSERT_TRUE(index_->Insert("keys", {{Fp(1), 100}}).ok());
  ASSERT_TRUE(
      index_->RecordNextSizes("keys", "p", {{Fp(1), 16384, {1, 2, 3}}}).ok());
  ASSERT_TRUE(index_->RecordNextSizes("keys", "q", {{Fp(1), 7}}).ok());
  EXPECT_EQ(Hint("keys", "p", Fp(1)), "16384 / 1,2,3");
  EXPECT_EQ(Hint("keys", "q", Fp(1)), "7 / ");
  const std::string key = layout.BucketKey("keys", Fp(1));
  const std::string field(layout.Field(Fp(1)));
  EntryValue value;
  ASSERT_TRUE(DecodeEntryValue(Field(key, field), &value));
  ASSERT_EQ(value.hints.size(), 2u);
  EXPECT_EQ(value.hints[0].tag, HintTag("q"));
  EXPECT_EQ(value.hints[1].tag, HintTag("p"));
  // Many keys: the oldest records go; the value stays a listpack value.
  for (int k = 0; k < 12; ++k) {
    ASSERT_TRUE(index_
                    ->RecordNextSizes("keys", absl::StrCat("k", k),
                                      {{Fp(1), 100000u + k, {200000, 300000}}})
                    .ok());
  }
  EXPECT_LE(Field(key, field).size(), kMaxValueBytes);
  EXPECT_EQ(Hint("keys", "k11", Fp(1)), "100011 / 200000,300000");
  EXPECT_EQ(Hint("keys", "p", Fp(1)), " / ");
  ASSERT_TRUE(DecodeEntryValue(Field(key, field), &value));
  EXPECT_EQ(value.refs, 1u);
  EXPECT_EQ(value.size, 100u);
  // Counting keeps the hints.
  ASSERT_TRUE(index_->Insert("keys", {{Fp(1), 100}}).ok());
  EXPECT_EQ(Hint("keys", "k11", Fp(1)), "100011 / 200000,300000");
}

// A record that changes neither the list nor the run writes nothing.
TEST_P(RedisHintFieldsTest, UnchangedHintsAreNotWrittenAgain) {
  ASSERT_TRUE(index_->Insert("same", {{Fp(1), 100}}).ok());
  long long before = HsetCalls();
  ASSERT_TRUE(
      index_->RecordNextSizes("same", "p", {{Fp(1), 10, {1, 2, 3}}}).ok());
  EXPECT_EQ(HsetCalls() - before, 1) << "list and run in one HSET";
  struct Record {
    uint32_t next_size;
    std::vector<uint32_t> run;
    int writes;
  };
  const std::vector<Record> records = {
      {10, {1, 2, 3}, 0},     // the same
      {10, {1, 2, 3, 4}, 0},  // the same once cut to kHintRunLength
      {10, {1, 2}, 1},        // the run alone
      {20, {1, 2}, 1},        // the list alone
      {20, {1, 2}, 0},        // the same
      {10, {}, 1},            // both
      {10, {}, 0},            // the same
  };
  for (size_t i = 0; i < records.size(); ++i) {
    before = HsetCalls();
    ASSERT_TRUE(
        index_
            ->RecordNextSizes("same", "p",
                              {{Fp(1), records[i].next_size, records[i].run}})
            .ok());
    EXPECT_EQ(HsetCalls() - before, records[i].writes) << "record " << i;
  }
  EXPECT_EQ(Hint("same", "p", Fp(1)), "10,20 / ");
}

const Backend& RedisBackend() {
  for (const Backend& b : Backends()) {
    if (b.name == "redis") return b;
  }
  std::abort();
}

INSTANTIATE_TEST_SUITE_P(Redis, RedisHintFieldsTest,
                         ::testing::Values(RedisBackend()),
                         [](const auto& info) { return info.param.name; });
#endif

TEST(BackendOfSpecTest, NamesWhatCreateIndexWouldMake) {
  EXPECT_EQ(BackendOfSpec("memory"), "memory");
  EXPECT_EQ(BackendOfSpec("rocksdb:///var/lib/chunkd/index?sync=always"),
            "rocksdb");
  EXPECT_EQ(BackendOfSpec("redis://:pw@127.0.0.1:6379/2"), "redis");
  EXPECT_EQ(BackendOfSpec("redis-cluster://10.0.0.1:6379,10.0.0.2:6379"),
            "redis-cluster");
  for (const char* refused : {"", "Memory", "memory2", "rocksdb:/x", "etcd://x"}) {
    EXPECT_EQ(BackendOfSpec(refused), "") << refused;
    EXPECT_FALSE(CreateIndex(refused).ok()) << refused;
  }
  // What it names is what the index says it is.
  auto memory = CreateIndex("memory");
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ((*memory)->backend(), BackendOfSpec("memory"));
}

TEST(NamespaceTest, AcceptsAndRejects) {
  EXPECT_TRUE(ValidateNamespace("backup-2024.v1_a").ok());
  EXPECT_FALSE(ValidateNamespace("").ok());
  EXPECT_FALSE(
      ValidateNamespace(std::string(kMaxNamespaceLength + 1, 'a')).ok());
  auto colon = ValidateNamespace("a:b");
  EXPECT_EQ(colon.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(colon.message().find("namespace"), std::string::npos);
  EXPECT_FALSE(ValidateNamespace("a{b}").ok());
}

TEST(MemoryIndexTest, NextSizesLengthIsAnOption) {
  IndexOptions options;
  options.next_sizes_length = 3;
  auto index = CreateIndex("memory", options);
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->Insert("ns", {{Fp(1), 1}}).ok());
  for (uint32_t size : {1u, 2u, 3u, 4u}) {
    ASSERT_TRUE((*index)->RecordNextSizes("ns", "p", {{Fp(1), size}}).ok());
  }
  auto sizes = (*index)->NextSizes("ns", "p", {Fp(1)});
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ((*sizes)[0], (std::vector<uint32_t>{4, 3, 2}));
  options.next_sizes_length = 0;
  EXPECT_FALSE(CreateIndex("memory", options).ok());
}

TEST(CreateIndexTest, KnowsMemoryAndRedisSchemes) {
  auto mem = CreateIndex("memory");
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ((*mem)->backend(), "memory");
  auto bad = CreateIndex("cassandra://x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--index"), std::string::npos);
  auto redis = CreateIndex("redis://127.0.0.1:1");
  EXPECT_EQ(redis.ok(), RedisSupported()) << redis.status();
}

TEST(CreateIndexTest, RedactsPasswords) {
  EXPECT_EQ(RedactIndexSpec("redis://:s3cret@h:1/2"), "redis://:***@h:1/2");
  EXPECT_EQ(RedactIndexSpec("redis://u:s3cret@h:1?pool_size=2"),
            "redis://u:***@h:1?pool_size=2");
  EXPECT_EQ(RedactIndexSpec("redis-cluster://a:1,b:2"),
            "redis-cluster://a:1,b:2");
  EXPECT_EQ(RedactIndexSpec("memory"), "memory");
  auto bad = CreateIndex("redis://:s3cret@h");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("s3cret"), std::string::npos);
}

}  // namespace
}  // namespace chunkd::index
