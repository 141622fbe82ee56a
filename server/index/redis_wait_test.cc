#include "index/redis_wait.h"

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::index {
namespace {

// A FailoverWait on a clock the test moves, recording what it reports.
struct Recorder {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<std::string> lines;
  std::vector<bool> on_wait;
  FailoverWait wait{absl::Seconds(10),
                    [this](bool w) { on_wait.push_back(w); },
                    [this](const std::string& l) { lines.push_back(l); },
                    [this] { return now; }};
};

TEST(FailoverWaitTest, TheDeadlineCountsFromTheStartOfTheOutage) {
  Recorder r;
  // No outage: a call that fails now may try for the bound.
  EXPECT_EQ(r.wait.Deadline(), r.now + absl::Seconds(10));
  r.wait.Failed();
  const absl::Time start = r.now;
  r.now += absl::Seconds(4);
  r.wait.Failed();  // the outage runs on: its start stays
  EXPECT_EQ(r.wait.Deadline(), start + absl::Seconds(10));
  // Longer than the bound: calls do not wait at all.
  r.now += absl::Seconds(30);
  EXPECT_LT(r.wait.Deadline(), r.now);
  // An answer ends the outage; the next one counts afresh.
  r.wait.Answered();
  EXPECT_EQ(r.wait.Deadline(), r.now + absl::Seconds(10));
  r.wait.Failed();
  r.now += absl::Seconds(1);
  EXPECT_EQ(r.wait.Deadline(), r.now + absl::Seconds(9));
}

TEST(FailoverWaitTest, CountsTellsTheHookAndLogsAPairOfLines) {
  Recorder r;
  r.wait.Begin(absl::UnavailableError("redis at h:1 is unreachable: x"));
  r.wait.Begin(absl::UnavailableError("redis at h:2 is unreachable: y"));
  EXPECT_EQ(r.wait.counts().waiting, 2u);
  ASSERT_EQ(r.lines.size(), 1u) << "one line for both";
  EXPECT_EQ(r.lines[0],
            "redis: index calls wait for redis to come back, each for at most "
            "10s (--redis_failover_wait): redis at h:1 is unreachable: x");
  r.now += absl::Milliseconds(3250);
  r.wait.End(/*recovered=*/true, absl::Milliseconds(3250));
  EXPECT_EQ(r.lines.size(), 1u) << "one call still waits";
  r.wait.End(/*recovered=*/false, absl::Milliseconds(900));
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.lines[1],
            "redis: no index call waits for redis any more: 1 went on, 1 gave "
            "up; the longest wait 3.25s");
  EXPECT_EQ(r.on_wait, (std::vector<bool>{true, true, false, false}));
  const FailoverWait::Counts counts = r.wait.counts();
  EXPECT_EQ(counts.waiting, 0u);
  EXPECT_EQ(counts.recovered, 1u);
  EXPECT_EQ(counts.expired, 1u);

  // Within kLogInterval of the last "wait" line: waits are counted, not
  // logged; after it, logged again.
  r.now += absl::Seconds(1);
  r.wait.Begin(absl::UnavailableError("again"));
  r.wait.End(true, absl::Milliseconds(10));
  EXPECT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.wait.counts().recovered, 2u);
  r.now += FailoverWait::kLogInterval;
  r.wait.Begin(absl::UnavailableError("later"));
  r.wait.End(true, absl::Milliseconds(10));
  ASSERT_EQ(r.lines.size(), 4u);
  EXPECT_NE(r.lines[2].find("later"), std::string::npos) << r.lines[2];
}

TEST(FailoverWaitTest, StopWakesSleepersAndEndsEveryWait) {
  FailoverWait wait(absl::Seconds(10), nullptr, nullptr);
  EXPECT_TRUE(wait.Sleep(absl::Milliseconds(1)));
  // A sleeper that only Stop() can wake within the test's bound.
  std::future<bool> slept = std::async(std::launch::async, [&] {
    return wait.Sleep(absl::Hours(1));
  });
  wait.Stop();
  ASSERT_EQ(slept.wait_for(std::chrono::seconds(60)),
            std::future_status::ready);
  EXPECT_FALSE(slept.get());
  EXPECT_FALSE(wait.Sleep(absl::Hours(1)));
  EXPECT_TRUE(wait.stopped());
  EXPECT_EQ(wait.Deadline(), absl::InfinitePast());
}

}  // namespace
}  // namespace chunkd::index
