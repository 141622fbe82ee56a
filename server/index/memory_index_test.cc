// MemoryIndex beyond the contract (index_contract_test.cc): the limit on
// entries (IndexOptions::max_entries), exact under concurrency, the bounded
// write-token records, and the tables behind it: fingerprints of every
// length, namespaces' ids freed and reused. (The tables themselves:
// compact_table_test.cc.)
#include "index/memory_index.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <initializer_list>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace chunkd::index {
namespace {

// A 32-byte fingerprint, different everywhere.
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

// A clock that moves only when the test says, so that write-token expiry
// depends on no machine's speed.
class TestClock {
 public:
  absl::Time Now() const { return now_.load(); }
  void Advance(absl::Duration d) { now_.store(now_.load() + d); }
  MemoryIndex::Clock clock() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<absl::Time> now_{absl::FromUnixSeconds(1000)};
};

IndexOptions WithLimit(uint64_t max_entries) {
  IndexOptions options;
  options.max_entries = max_entries;
  return options;
}

void ExpectLimitMessage(const absl::Status& status, uint64_t limit) {
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  const std::string m(status.message());
  EXPECT_TRUE(absl::StrContains(
      m, absl::StrCat("holds its limit of ", limit, " entries")))
      << m;
  EXPECT_TRUE(absl::StrContains(m, "--index_max_entries")) << m;
  EXPECT_TRUE(absl::StrContains(m, "release chunks")) << m;
  EXPECT_TRUE(absl::StrContains(m, "Redis")) << m;
}

TEST(MemoryIndexLimitTest, UnlimitedByDefault) {
  MemoryIndex index;
  EXPECT_EQ(index.max_entries(), 0u);
  std::vector<InsertEntry> entries;
  for (int i = 0; i < 10000; ++i) entries.push_back({Fp(i), 1});
  ASSERT_TRUE(index.Insert("ns", entries).ok());
  EXPECT_EQ(index.EntryCount(), 10000u);
  EXPECT_TRUE(index.Health().ok());
  EXPECT_EQ(index.TokenPositionLimit(), 0u);
}

TEST(MemoryIndexLimitTest, AtTheLimitOnlyNewEntriesAreRefused) {
  MemoryIndex index(WithLimit(3));
  EXPECT_TRUE(index.Health().ok());
  ASSERT_TRUE(index.Insert("ns", {{Fp(1), 10}, {Fp(2), 20}}).ok());
  EXPECT_TRUE(index.Health().ok()) << "one entry of room left";
  // Namespaces share the limit.
  ASSERT_TRUE(index.Insert("other", {{Fp(1), 10}}).ok());
  EXPECT_EQ(index.EntryCount(), 3u);

  auto refused = index.Insert("ns", {{Fp(3), 30}});
  ExpectLimitMessage(refused.status(), 3);
  EXPECT_EQ(refused.status().message(), index.EntryLimitMessage());
  ExpectLimitMessage(index.Health(), 3);
  EXPECT_EQ(index.Health().message(), index.EntryLimitMessage());
  EXPECT_EQ(index.EntryCount(), 3u);
  EXPECT_EQ(index.size(), 3u);

  // Everything but a new entry works.
  auto found = index.Lookup("ns", {Fp(1), Fp(2), Fp(3)});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<bool>{true, true, false}));
  auto dup = index.Insert("ns", {{Fp(1), 10}, {Fp(2), 20}, {Fp(1), 10}});
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_FALSE((*dup)[0].is_new);
  EXPECT_EQ((*dup)[2].ref_count, 3u);
  const WriteToken token{"dups", 0};
  auto tokened = index.Insert("ns", {{Fp(2), 20}}, &token);
  ASSERT_TRUE(tokened.ok()) << tokened.status();
  EXPECT_EQ((*tokened)[0].ref_count, 3u);
  ASSERT_TRUE(index.RecordNextSizes("ns", "p", {{Fp(1), 7}}).ok());
  auto hints = index.NextSizes("ns", "p", {Fp(1)});
  ASSERT_TRUE(hints.ok());
  EXPECT_EQ((*hints)[0], (std::vector<uint32_t>{7}));
  auto left = index.Release("ns", {Fp(2)}, &token);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ((*left)[0], 2u);
  ExpectLimitMessage(index.Health(), 3);

  // Removing an entry makes room for exactly one.
  ASSERT_TRUE(index.Release("other", {Fp(1)}).ok());
  EXPECT_EQ(index.EntryCount(), 2u);
  EXPECT_TRUE(index.Health().ok()) << index.Health();
  auto room = index.Insert("ns", {{Fp(3), 30}});
  ASSERT_TRUE(room.ok()) << room.status();
  EXPECT_TRUE((*room)[0].is_new);
  ExpectLimitMessage(index.Insert("ns", {{Fp(4), 40}}).status(), 3);
  ExpectLimitMessage(index.Health(), 3);
}

TEST(MemoryIndexLimitTest, RefusedBatchKeepsWhatCameBeforeTheRefusal) {
  MemoryIndex index(WithLimit(3));
  ASSERT_TRUE(index.Insert("ns", {{Fp(1), 1}}).ok());
  // 2 and 3 fill the index, 1 is a duplicate, 4 is refused, 5 and the
  // duplicate after it are not tried.
  auto r = index.Insert("ns", {{Fp(2), 1},
                               {Fp(1), 1},
                               {Fp(3), 1},
                               {Fp(4), 1},
                               {Fp(5), 1},
                               {Fp(1), 1}});
  ExpectLimitMessage(r.status(), 3);
  auto found = index.Lookup("ns", {Fp(1), Fp(2), Fp(3), Fp(4), Fp(5)});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<bool>{true, true, true, false, false}));
  auto counts = index.Insert("ns", {{Fp(1), 1}, {Fp(2), 1}, {Fp(3), 1}});
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[0].ref_count, 3u) << "counted once in the refused batch";
  EXPECT_EQ((*counts)[1].ref_count, 2u);
  EXPECT_EQ((*counts)[2].ref_count, 2u);
}

TEST(MemoryIndexLimitTest, TokenRetryAfterRoomWasFreedIsExact) {
  MemoryIndex index(WithLimit(3));
  ASSERT_TRUE(index.Insert("ns", {{Fp(9), 1}}).ok());
  const WriteToken token{"stream", 100};
  const std::vector<InsertEntry> batch = {
      {Fp(1), 1}, {Fp(9), 1}, {Fp(2), 1}, {Fp(3), 1}, {Fp(1), 1}};
  ExpectLimitMessage(index.Insert("ns", batch, &token).status(), 3);
  // Positions 100..102 were applied (1 and 2 new, 9 counted), 103 refused,
  // 104 not tried.
  auto found = index.Lookup("ns", {Fp(1), Fp(2), Fp(3)});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<bool>{true, true, false}));

  // The same retry, still full: refused again, nothing counted twice.
  ExpectLimitMessage(index.Insert("ns", batch, &token).status(), 3);

  // Room for one: 9 is released away entirely (two references).
  ASSERT_TRUE(index.Release("ns", {Fp(9), Fp(9)}).ok());
  auto retry = index.Insert("ns", batch, &token);
  ASSERT_TRUE(retry.ok()) << retry.status();
  // Recorded positions replay what they returned the first time, although
  // 9 is gone now; 103 and 104 are applied.
  EXPECT_TRUE((*retry)[0].is_new);
  EXPECT_EQ((*retry)[0].ref_count, 1u);
  EXPECT_FALSE((*retry)[1].is_new);
  EXPECT_EQ((*retry)[1].ref_count, 2u);
  EXPECT_TRUE((*retry)[2].is_new);
  EXPECT_TRUE((*retry)[3].is_new);
  EXPECT_EQ((*retry)[3].ref_count, 1u);
  EXPECT_FALSE((*retry)[4].is_new);
  EXPECT_EQ((*retry)[4].ref_count, 2u);
  EXPECT_EQ(index.EntryCount(), 3u);
  auto left = index.Release("ns", {Fp(1), Fp(1), Fp(2), Fp(3), Fp(9)});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, (std::vector<uint64_t>{1, 0, 0, 0, 0}))
      << "every position counted exactly once";
  EXPECT_EQ(index.EntryCount(), 0u);
}

// Threads insert distinct fingerprints past the limit, with and without
// tokens, while a watcher samples the count: it never passes the limit, and
// exactly `limit` inserts were reported new.
TEST(MemoryIndexLimitTest, ConcurrentInsertsNeverPassTheLimit) {
  constexpr uint64_t kLimit = 1000;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 400;
  MemoryIndex index(WithLimit(kLimit));
  std::atomic<bool> done{false};
  std::atomic<uint64_t> max_seen{0};
  std::thread watcher([&] {
    while (!done.load()) {
      const uint64_t n = *index.EntryCount();
      if (n > max_seen.load()) max_seen.store(n);
    }
  });
  std::atomic<uint64_t> news{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kPerThread / 8; ++b) {
        std::vector<InsertEntry> batch;
        for (int i = 0; i < 8; ++i) {
          batch.push_back({Fp(t * kPerThread + b * 8 + i), 1});
        }
        const WriteToken token{absl::StrCat("t", t), uint64_t(b) * 8};
        auto r = index.Insert("ns", batch, b % 2 == 0 ? &token : nullptr);
        if (!r.ok()) {
          EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
          ++refused;
          continue;
        }
        for (const InsertResult& x : *r) news += x.is_new ? 1 : 0;
      }
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  watcher.join();
  EXPECT_GT(refused.load(), 0);
  EXPECT_LE(max_seen.load(), kLimit);
  EXPECT_EQ(*index.EntryCount(), kLimit);
  EXPECT_EQ(index.size(), kLimit);
  // Refused batches applied a prefix: count what is there.
  std::vector<std::string> all;
  for (int i = 0; i < kThreads * kPerThread; ++i) all.push_back(Fp(i));
  auto found = index.Lookup("ns", all);
  ASSERT_TRUE(found.ok());
  uint64_t present = 0;
  for (bool f : *found) present += f ? 1 : 0;
  EXPECT_EQ(present, kLimit);
  EXPECT_LE(news.load(), kLimit);
  ExpectLimitMessage(index.Health(), kLimit);
}

// Threads released at once race for the last free entry, round after
// round: exactly one wins each time.
TEST(MemoryIndexLimitTest, RacingForTheLastEntryExactlyOneWins) {
  const int threads = static_cast<int>(
      std::clamp(std::thread::hardware_concurrency(), 2u, 4u));
  MemoryIndex index(WithLimit(1));
  for (int round = 0; round < 1000; ++round) {
    std::atomic<int> ready{0};
    std::atomic<int> won{0};
    std::vector<std::thread> racers;
    for (int t = 0; t < threads; ++t) {
      racers.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < threads) {
        }
        auto r = index.Insert("ns", {{Fp(round * 8 + t), 1}});
        if (r.ok()) won.fetch_add(1);
      });
    }
    for (auto& r : racers) r.join();
    ASSERT_EQ(won.load(), 1) << "round " << round;
    ASSERT_EQ(*index.EntryCount(), 1u);
    std::vector<std::string> all;
    for (int t = 0; t < threads; ++t) all.push_back(Fp(round * 8 + t));
    ASSERT_TRUE(index.Release("ns", all).ok());
    ASSERT_EQ(*index.EntryCount(), 0u);
  }
}

// Inserts and releases racing at the limit: the count stays exact (equal to
// the maps' sizes) and within the limit.
TEST(MemoryIndexLimitTest, ConcurrentInsertsAndReleasesKeepTheCountExact) {
  constexpr uint64_t kLimit = 64;
  MemoryIndex index(WithLimit(kLimit));
  std::vector<std::thread> threads;
  std::atomic<uint64_t> max_seen{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 300; ++round) {
        std::vector<InsertEntry> batch;
        std::vector<std::string> fps;
        for (int i = 0; i < 12; ++i) {
          fps.push_back(Fp(t * 1000 + (round * 7 + i) % 40));
          batch.push_back({fps.back(), 1});
        }
        auto r = index.Insert("ns", batch);
        if (r.ok()) {
          ASSERT_TRUE(index.Release("ns", fps).ok());
        } else {
          ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
        }
        const uint64_t n = *index.EntryCount();
        if (n > max_seen.load()) max_seen.store(n);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(max_seen.load(), kLimit);
  EXPECT_EQ(*index.EntryCount(), index.size());
}

// A long stream of duplicates under tokens at the bound on token positions:
// refused with its own message until positions expire; releases never.
TEST(MemoryIndexTokenTest, PositionsAreBoundedAndExpire) {
  IndexOptions options = WithLimit(2);  // one entry, and room
  options.token_ttl = absl::Seconds(2);
  TestClock clock;
  MemoryIndex index(options, clock.clock());
  EXPECT_EQ(index.TokenPositionLimit(), MemoryIndex::kMinTokenPositions);
  ASSERT_TRUE(index.Insert("ns", {{Fp(1), 1}}).ok());
  EXPECT_EQ(index.TokenPositions(), 0u);

  // The record costs one block's worth, each block of 64 positions one.
  constexpr uint64_t kBlock = MemoryIndex::kTokenBlockPositions;
  const uint64_t fit = MemoryIndex::kMinTokenPositions - kBlock;
  std::vector<InsertEntry> batch(kBlock, InsertEntry{Fp(1), 1});
  uint64_t position = 0;
  for (; position < fit; position += kBlock) {
    const WriteToken token{"long", position};
    auto r = index.Insert("ns", batch, &token);
    ASSERT_TRUE(r.ok()) << position << ": " << r.status();
  }
  EXPECT_EQ(index.TokenPositions(), MemoryIndex::kMinTokenPositions);
  const WriteToken next{"long", position};
  auto refused = index.Insert("ns", {{Fp(1), 1}}, &next);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(), index.TokenLimitMessage());
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "write-token positions"));
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "--index_max_entries"));
  EXPECT_EQ(index.Health().message(), index.TokenLimitMessage());
  // Another stream cannot start either; a replay of known positions can;
  // releases are never refused.
  const WriteToken other{"other", 0};
  EXPECT_EQ(index.Insert("ns", {{Fp(1), 1}}, &other).status().code(),
            absl::StatusCode::kResourceExhausted);
  const WriteToken replay{"long", 0};
  auto replayed = index.Insert("ns", batch, &replay);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_EQ((*replayed)[0].ref_count, 2u);
  auto released = index.Release("ns", {Fp(1)}, &other);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_GT(index.TokenPositions(), MemoryIndex::kMinTokenPositions);
  auto counted = index.Insert("ns", {{Fp(1), 1}});
  ASSERT_TRUE(counted.ok());
  EXPECT_EQ((*counted)[0].ref_count, fit + 1)
      << "every tokened position counted once, the release undid one";

  // Positions are forgotten token_ttl (to 1.1 token_ttl) after they were
  // written, and not before.
  clock.Advance(absl::Milliseconds(1900));
  EXPECT_EQ(index.Health().message(), index.TokenLimitMessage());
  clock.Advance(absl::Milliseconds(400));
  EXPECT_TRUE(index.Health().ok()) << index.Health();
  EXPECT_EQ(index.TokenPositions(), 0u);
  auto later = index.Insert("ns", {{Fp(1), 1}}, &next);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(index.TokenPositions(), 2 * kBlock);
}

// A stream that keeps writing holds only the positions of its last
// token_ttl, not all it ever wrote.
TEST(MemoryIndexTokenTest, ALongStreamHoldsOnlyItsRecentPositions) {
  IndexOptions options;
  options.token_ttl = absl::Milliseconds(200);
  TestClock clock;
  MemoryIndex index(options, clock.clock());
  std::vector<InsertEntry> batch(MemoryIndex::kTokenBlockPositions,
                                 InsertEntry{Fp(1), 1});
  uint64_t position = 0;
  for (int round = 0; round < 6; ++round) {
    for (int b = 0; b < 10; ++b) {
      const WriteToken token{"long", position};
      ASSERT_TRUE(index.Insert("ns", batch, &token).ok());
      position += batch.size();
    }
    clock.Advance(absl::Milliseconds(100));
  }
  // 60 blocks written; those older than 200 ms (to 220 ms) are gone: at
  // most the last three rounds' 30 blocks and the record remain.
  ASSERT_TRUE(index.Health().ok());
  EXPECT_LE(index.TokenPositions(), 31 * MemoryIndex::kTokenBlockPositions);
  EXPECT_GE(index.TokenPositions(), 11 * MemoryIndex::kTokenBlockPositions);
  // The recent positions still replay.
  const WriteToken last{"long", position - batch.size()};
  auto replay = index.Insert("ns", batch, &last);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(replay->back().ref_count, position);
}

TEST(MemoryIndexLimitTest, CreateIndexPassesTheLimit) {
  auto index = CreateIndex("memory", WithLimit(1));
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->Insert("ns", {{Fp(1), 1}}).ok());
  ExpectLimitMessage((*index)->Insert("ns", {{Fp(2), 1}}).status(), 1);
  EXPECT_EQ((*index)->EntryCount(), 1u);
}

// SHA-256 (32 bytes), xxh128 (16) and other lengths live in different
// tables; each behaves the same, hints included.
TEST(MemoryIndexTablesTest, EveryFingerprintLengthBehavesTheSame) {
  MemoryIndex index;
  std::vector<std::string> fps;
  for (size_t length : {32, 16, 0, 1, 20, 31, 33, 64}) {
    fps.push_back(Fp(length).substr(0, std::min<size_t>(length, 32)) +
                  std::string(length > 32 ? length - 32 : 0, 'z'));
    ASSERT_EQ(fps.back().size(), length);
  }
  std::vector<InsertEntry> entries;
  for (const std::string& fp : fps) entries.push_back({fp, 100});
  ASSERT_TRUE(index.Insert("ns", entries).ok());
  auto twice = index.Insert("ns", entries);
  ASSERT_TRUE(twice.ok());
  for (const InsertResult& r : *twice) {
    EXPECT_FALSE(r.is_new);
    EXPECT_EQ(r.ref_count, 2u);
  }
  EXPECT_EQ(index.size(), fps.size());
  std::vector<NextSize> hints;
  for (const std::string& fp : fps) hints.push_back({fp, 7});
  ASSERT_TRUE(index.RecordNextSizes("ns", "p", hints).ok());
  auto sizes = index.NextSizes("ns", "p", fps);
  ASSERT_TRUE(sizes.ok());
  for (const auto& s : *sizes) EXPECT_EQ(s, std::vector<uint32_t>{7});
  // A 16-byte prefix of a 32-byte fingerprint is another fingerprint.
  auto prefix = index.Lookup("ns", {fps[0].substr(0, 16)});
  EXPECT_FALSE((*prefix)[0]);
  for (int round = 0; round < 2; ++round) {
    auto left = index.Release("ns", fps);
    ASSERT_TRUE(left.ok());
    for (uint64_t l : *left) EXPECT_EQ(l, round == 0 ? 1u : 0u);
  }
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.EntryCount(), 0u);
  // Hints went with their entries.
  ASSERT_TRUE(index.Insert("ns", entries).ok());
  sizes = index.NextSizes("ns", "p", fps);
  for (const auto& s : *sizes) EXPECT_TRUE(s.empty());
}

// The hints of `fp` under `params_key` as "sizes / run" (e.g.
// "200,100 / 4,5"; " / " for none).
std::string Shown(MemoryIndex& index, absl::string_view ns,
                  absl::string_view params_key, const std::string& fp) {
  auto hints = index.NextHintsOf(ns, params_key, {fp});
  if (!hints.ok()) return std::string(hints.status().message());
  if (hints->size() != 1) return "(no answer)";
  return absl::StrCat(absl::StrJoin((*hints)[0].sizes, ","), " / ",
                      absl::StrJoin((*hints)[0].run, ","));
}

// Fp(1) released to zero and inserted again in "ns" has no hints left
// under any of `keys`.
void ExpectReleaseDropsHints(MemoryIndex& index,
                             std::initializer_list<const char*> keys) {
  ASSERT_TRUE(index.Release("ns", {Fp(1)}).ok());
  ASSERT_TRUE(index.Insert("ns", {{Fp(1), 1}}).ok());
  for (const char* key : keys) {
    EXPECT_EQ(Shown(index, "ns", key, Fp(1)), " / ") << key;
  }
}

// An entry's hints under its first parameter key sit in its slot; hints
// under a second key move its lists to the side map, runs included (and
// only the run recorded last, never one a slot still held the bytes of).
TEST(MemoryIndexHintsTest, RunsMoveWithTheirListsToTheSideMap) {
  MemoryIndex index;
  ASSERT_TRUE(index.Insert("ns", {{Fp(1), 1}, {Fp(2), 1}}).ok());
  ASSERT_TRUE(index
                  .RecordNextSizes("ns", "a",
                                   {{Fp(1), 100, {1, 2, 3}},
                                    {Fp(1), 200, {4}},
                                    {Fp(2), 7, {1, 2, 3}},
                                    {Fp(2), 7, {}}})
                  .ok());
  EXPECT_EQ(Shown(index, "ns", "a", Fp(1)), "200,100 / 4");
  EXPECT_EQ(Shown(index, "ns", "a", Fp(2)), "7 / ");

  ASSERT_TRUE(
      index.RecordNextSizes("ns", "b", {{Fp(1), 300, {5, 6}}, {Fp(2), 8, {9}}})
          .ok());
  EXPECT_EQ(Shown(index, "ns", "a", Fp(1)), "200,100 / 4");
  EXPECT_EQ(Shown(index, "ns", "b", Fp(1)), "300 / 5,6");
  EXPECT_EQ(Shown(index, "ns", "a", Fp(2)), "7 / ");
  EXPECT_EQ(Shown(index, "ns", "b", Fp(2)), "8 / 9");

  // In the side map, a record replaces the run as in a slot.
  ASSERT_TRUE(index.RecordNextSizes("ns", "a", {{Fp(1), 100, {7}}}).ok());
  EXPECT_EQ(Shown(index, "ns", "a", Fp(1)), "100,200 / 7");
  ASSERT_TRUE(index.RecordNextSizes("ns", "a", {{Fp(1), 100}}).ok());
  EXPECT_EQ(Shown(index, "ns", "a", Fp(1)), "100,200 / ");
  ASSERT_TRUE(
      index.RecordNextSizes("ns", "a", {{Fp(1), 100, {1, 2, 3, 4}}}).ok());
  EXPECT_EQ(Shown(index, "ns", "a", Fp(1)), "100,200 / 1,2,3");
  EXPECT_EQ(Shown(index, "ns", "b", Fp(1)), "300 / 5,6");

  // Released, the entry's lists go, side map and all.
  ExpectReleaseDropsHints(index, {"a", "b"});
  ASSERT_TRUE(index.RecordNextSizes("ns", "a", {{Fp(1), 100}}).ok());
  EXPECT_EQ(Shown(index, "ns", "a", Fp(1)), "100 / ");
}

// Lists longer than a slot holds live in the side map from the start.
TEST(MemoryIndexHintsTest, RunsWithListsTooLongForASlot) {
  IndexOptions options;
  options.next_sizes_length = 4;
  MemoryIndex index(options);
  ASSERT_TRUE(index.Insert("ns", {{Fp(1), 1}, {Fp(2), 1}}).ok());
  for (uint32_t size = 1; size <= 5; ++size) {
    ASSERT_TRUE(index
                    .RecordNextSizes(
                        "ns", "p", {{Fp(1), size, {10 * size, 10 * size + 1}}})
                    .ok());
  }
  EXPECT_EQ(Shown(index, "ns", "p", Fp(1)), "5,4,3,2 / 50,51");
  ASSERT_TRUE(index.RecordNextSizes("ns", "p", {{Fp(1), 3}}).ok());
  EXPECT_EQ(Shown(index, "ns", "p", Fp(1)), "3,5,4,2 / ");
  ASSERT_TRUE(
      index.RecordNextSizes("ns", "p", {{Fp(1), 3, {1, 2, 3, 4, 5}}}).ok());
  EXPECT_EQ(Shown(index, "ns", "p", Fp(1)), "3,5,4,2 / 1,2,3");
  ASSERT_TRUE(index.RecordNextSizes("ns", "q", {{Fp(1), 9, {8}}}).ok());
  EXPECT_EQ(Shown(index, "ns", "q", Fp(1)), "9 / 8");
  EXPECT_EQ(Shown(index, "ns", "p", Fp(1)), "3,5,4,2 / 1,2,3");
  EXPECT_EQ(Shown(index, "ns", "p", Fp(2)), " / ");
  ExpectReleaseDropsHints(index, {"p", "q"});
}

// Slots holding lists under 4095 parameter keys take every id: hints under
// a key without an id go to the side map, runs included, and move an
// entry's slot there.
TEST(MemoryIndexHintsTest, RunsUnderAParamsKeyWithoutId) {
  constexpr int kIds = 4095;  // MemoryIndex::kMaxParamsIds
  MemoryIndex index;
  std::vector<InsertEntry> entries;
  for (int i = 0; i <= kIds; ++i) entries.push_back({Fp(i), 1});
  ASSERT_TRUE(index.Insert("ns", entries).ok());
  for (int i = 0; i < kIds; ++i) {
    ASSERT_TRUE(index
                    .RecordNextSizes("ns", absl::StrCat("p", i),
                                     {{Fp(i), 100, {static_cast<uint32_t>(i)}}})
                    .ok());
  }
  ASSERT_EQ(index.ParamsKeyCount(), static_cast<size_t>(kIds));
  ASSERT_TRUE(
      index.RecordNextSizes("ns", "extra", {{Fp(kIds), 7, {8, 9}}}).ok());
  EXPECT_EQ(index.ParamsKeyCount(), static_cast<size_t>(kIds))
      << "\"extra\" got an id";
  EXPECT_EQ(Shown(index, "ns", "extra", Fp(kIds)), "7 / 8,9");
  ASSERT_TRUE(index.RecordNextSizes("ns", "extra", {{Fp(7), 5, {6}}}).ok());
  EXPECT_EQ(Shown(index, "ns", "extra", Fp(7)), "5 / 6");
  EXPECT_EQ(Shown(index, "ns", "p7", Fp(7)), "100 / 7");
  EXPECT_EQ(Shown(index, "ns", "p8", Fp(8)), "100 / 8");
  ASSERT_TRUE(index.RecordNextSizes("ns", "extra", {{Fp(7), 5}}).ok());
  EXPECT_EQ(Shown(index, "ns", "extra", Fp(7)), "5 / ");
}

// A namespace is known while it has entries; its id then goes to another
// namespace, which never sees the first one's entries.
TEST(MemoryIndexTablesTest, EmptiedNamespacesAreForgottenAndIdsReused) {
  MemoryIndex index;
  EXPECT_EQ(index.NamespaceCount(), 0u);
  // Reads and releases in unknown namespaces create nothing.
  ASSERT_TRUE(index.Lookup("ghost", {Fp(1)}).ok());
  ASSERT_TRUE(index.Release("ghost", {Fp(1)}).ok());
  const WriteToken token{"s", 0};
  ASSERT_TRUE(index.Release("ghost", {Fp(1)}, &token).ok());
  ASSERT_TRUE(index.RecordNextSizes("ghost", "p", {{Fp(1), 1}}).ok());
  ASSERT_TRUE(index.NextSizes("ghost", "p", {Fp(1)}).ok());
  EXPECT_EQ(index.NamespaceCount(), 0u);

  ASSERT_TRUE(index.Insert("a", {{Fp(1), 1}, {Fp(2), 1}}).ok());
  ASSERT_TRUE(index.Insert("b", {{Fp(3), 1}}).ok());
  EXPECT_EQ(index.NamespaceCount(), 2u);
  ASSERT_TRUE(index.Release("a", {Fp(1)}).ok());
  EXPECT_EQ(index.NamespaceCount(), 2u);
  ASSERT_TRUE(index.Release("a", {Fp(2)}).ok());
  EXPECT_EQ(index.NamespaceCount(), 1u);
  // "c" takes the id "a" had: it sees none of a's old entries, and "a"
  // comes back empty.
  ASSERT_TRUE(index.Insert("c", {{Fp(3), 1}}).ok());
  auto in_c = index.Lookup("c", {Fp(1), Fp(2), Fp(3)});
  EXPECT_EQ(*in_c, (std::vector<bool>{false, false, true}));
  auto in_a = index.Lookup("a", {Fp(1), Fp(2), Fp(3)});
  EXPECT_EQ(*in_a, (std::vector<bool>{false, false, false}));
  auto in_b = index.Insert("b", {{Fp(3), 1}});
  EXPECT_EQ((*in_b)[0].ref_count, 2u);
  EXPECT_EQ(index.NamespaceCount(), 2u);
}

// Streams in namespaces that come and go (their ids freed and taken again
// all the time), some shared: every namespace sees exactly its own entries,
// and counts stay exact. Bounded: 4 threads x 600 rounds of small batches.
TEST(MemoryIndexTablesTest, NamespacesComingAndGoingConcurrently) {
  MemoryIndex index;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Thread t alone writes to its namespaces "t<t>-0" and "t<t>-1",
      // any fingerprint of a pool of 16, and to "shared", those of the
      // pool that are t modulo 4; it empties what it wrote each round.
      for (int round = 0; round < 600; ++round) {
        const bool shared = round % 3 == 2;
        const std::string ns =
            shared ? "shared" : absl::StrCat("t", t, "-", round % 2);
        std::vector<InsertEntry> batch;
        std::vector<std::string> fps;
        for (int i = 0; i < 4; ++i) {
          fps.push_back(Fp(shared ? 4 * i + t : (round + i) % 16));
          batch.push_back({fps.back(), 1});
        }
        auto ins = index.Insert(ns, batch);
        ASSERT_TRUE(ins.ok());
        for (const InsertResult& r : *ins) {
          if (!r.is_new || r.ref_count != 1) ++wrong;
        }
        auto found = index.Lookup(ns, fps);
        for (bool f : *found) wrong += f ? 0 : 1;
        auto left = index.Release(ns, fps);
        ASSERT_TRUE(left.ok());
        for (uint64_t l : *left) wrong += l == 0 ? 0 : 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(index.EntryCount(), 0u);
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.NamespaceCount(), 0u);
}

// The semantics of the index, plainly: what MemoryIndex must agree with.
struct ModelEntry {
  uint64_t refs = 0;
  std::map<std::string, NextHints> hints;  // by params key
};
using Model = std::map<std::pair<std::string, std::string>, ModelEntry>;

// Each call below makes one call of the index and checks it against the
// model, which it updates.
void CheckInsert(MemoryIndex& index, Model& model, const std::string& ns,
                 const std::vector<std::string>& batch) {
  std::vector<InsertEntry> entries;
  for (const std::string& fp : batch) entries.push_back({fp, 1});
  auto r = index.Insert(ns, entries);
  ASSERT_TRUE(r.ok());
  for (size_t i = 0; i < batch.size(); ++i) {
    ModelEntry& e = model[{ns, batch[i]}];
    ASSERT_EQ((*r)[i].is_new, e.refs == 0);
    ASSERT_EQ((*r)[i].ref_count, ++e.refs);
  }
}

void CheckRelease(MemoryIndex& index, Model& model, const std::string& ns,
                  const std::vector<std::string>& batch) {
  auto r = index.Release(ns, batch);
  ASSERT_TRUE(r.ok());
  for (size_t i = 0; i < batch.size(); ++i) {
    auto it = model.find({ns, batch[i]});
    uint64_t left = 0;
    if (it != model.end()) {
      left = --it->second.refs;
      if (left == 0) model.erase(it);
    }
    ASSERT_EQ((*r)[i], left);
  }
}

void CheckRecordNextSizes(MemoryIndex& index, Model& model,
                          const std::string& ns, const std::string& p,
                          const std::vector<NextSize>& hints, size_t length) {
  ASSERT_TRUE(index.RecordNextSizes(ns, p, hints).ok());
  for (const NextSize& h : hints) {
    auto it = model.find({ns, h.fingerprint});
    if (it == model.end()) continue;
    NextHints& hints = it->second.hints[p];
    std::vector<uint32_t>& sizes = hints.sizes;
    sizes.erase(std::remove(sizes.begin(), sizes.end(), h.next_size),
                sizes.end());
    sizes.insert(sizes.begin(), h.next_size);
    if (sizes.size() > length) sizes.pop_back();
    hints.run.assign(h.run.begin(),
                     h.run.begin() + std::min(h.run.size(), kHintRunLength));
  }
}

void CheckNextHints(MemoryIndex& index, const Model& model,
                    const std::string& ns, const std::string& p,
                    const std::vector<std::string>& batch) {
  auto r = index.NextHintsOf(ns, p, batch);
  ASSERT_TRUE(r.ok());
  auto sizes = index.NextSizes(ns, p, batch);
  ASSERT_TRUE(sizes.ok());
  for (size_t i = 0; i < batch.size(); ++i) {
    auto it = model.find({ns, batch[i]});
    NextHints expected;
    if (it != model.end() && it->second.hints.count(p) != 0) {
      expected = it->second.hints.at(p);
    }
    ASSERT_EQ((*r)[i].sizes, expected.sizes) << i;
    ASSERT_EQ((*r)[i].run, expected.run) << i;
    ASSERT_EQ((*sizes)[i], expected.sizes) << i;
  }
}

void CheckLookup(MemoryIndex& index, const Model& model, const std::string& ns,
                 const std::vector<std::string>& batch) {
  auto r = index.Lookup(ns, batch);
  ASSERT_TRUE(r.ok());
  for (size_t i = 0; i < batch.size(); ++i) {
    ASSERT_EQ((*r)[i], model.count({ns, batch[i]}) != 0) << i;
  }
}

// Random inserts, releases, lookups and hints over a few namespaces,
// fingerprints of the three kinds of table and three parameter keys (so
// that hint lists move from slots to the side map) with runs of 0 to
// kHintRunLength + 1 sizes, checked call by call against the model.
// Bounded: 6000 calls per list length.
TEST(MemoryIndexTablesTest, AgreesWithAPlainModel) {
  const std::vector<std::string> namespaces = {"a", "b", "c"};
  const std::vector<std::string> params = {"p1", "p2", "p3"};
  std::vector<std::string> fps;
  for (int i = 0; i < 12; ++i) {
    const size_t length = i % 3 == 0 ? 32 : i % 3 == 1 ? 16 : 7;
    fps.push_back(Fp(i).substr(0, length));
  }
  for (size_t length = 1; length <= 3; ++length) {
    IndexOptions options;
    options.next_sizes_length = static_cast<int>(length);
    MemoryIndex index(options);
    Model model;
    uint64_t x = 12345 + length;
    auto next = [&](uint64_t n) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x % n;
    };
    for (int call = 0; call < 6000; ++call) {
      const std::string& ns = namespaces[next(namespaces.size())];
      std::vector<std::string> batch;
      std::vector<NextSize> hints;
      for (uint64_t n = 1 + next(3); n > 0; --n) {
        batch.push_back(fps[next(fps.size())]);
        std::vector<uint32_t> run(next(kHintRunLength + 2));
        for (uint32_t& size : run) size = static_cast<uint32_t>(1 + next(3));
        hints.push_back(
            {batch.back(), static_cast<uint32_t>(100 + next(4)), run});
      }
      const std::string& p = params[next(params.size())];
      const uint64_t op = next(5);
      SCOPED_TRACE(absl::StrCat("length ", length, " call ", call, " op ", op));
      if (op == 0) CheckInsert(index, model, ns, batch);
      if (op == 1) CheckRelease(index, model, ns, batch);
      if (op == 2) CheckRecordNextSizes(index, model, ns, p, hints, length);
      if (op == 3) CheckNextHints(index, model, ns, p, batch);
      if (op == 4) CheckLookup(index, model, ns, batch);
      ASSERT_FALSE(HasFatalFailure());
      ASSERT_EQ(index.EntryCount(), model.size());
    }
    // Emptied, it forgets every name.
    for (const auto& [key, e] : Model(model)) {
      for (uint64_t n = e.refs; n > 0; --n) {
        ASSERT_TRUE(index.Release(key.first, {key.second}).ok());
      }
    }
    EXPECT_EQ(index.size(), 0u);
    EXPECT_EQ(index.NamespaceCount(), 0u);
    EXPECT_EQ(index.ParamsKeyCount(), 0u);
  }
}

}  // namespace
}  // namespace chunkd::index
