#include "service/index_health.h"

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "index/memory_index.h"

namespace chunkd::service {
namespace {

// A memory index whose Health() answers what the test says.
class SwitchableIndex final : public index::FingerprintIndex {
 public:
  void set_up(bool up) { up_ = up; }
  void set_full(bool full) { full_ = full; }
  int probes() const { return probes_; }

  absl::Status Health() override {
    ++probes_;
    if (full_) {
      return absl::ResourceExhaustedError(
          "index full (" + std::to_string(probes_) + " probes)");
    }
    if (up_) return absl::OkStatus();
    return absl::UnavailableError("redis at 127.0.0.1:1 is unreachable");
  }
  absl::string_view backend() const override { return "test"; }
  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns, absl::Span<const std::string> fps) override {
    return inner_.Lookup(ns, fps);
  }
  using FingerprintIndex::Insert;
  using FingerprintIndex::Release;
  absl::StatusOr<std::vector<index::InsertResult>> Insert(
      absl::string_view ns, absl::Span<const index::InsertEntry> entries,
      const index::WriteToken* token) override {
    return inner_.Insert(ns, entries, token);
  }
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fps,
      const index::WriteToken* token) override {
    return inner_.Release(ns, fps, token);
  }
  absl::Status RecordNextSizes(absl::string_view ns, absl::string_view key,
                               absl::Span<const index::NextSize> h) override {
    return inner_.RecordNextSizes(ns, key, h);
  }
  absl::StatusOr<std::vector<index::NextHints>> NextHintsOf(
      absl::string_view ns, absl::string_view key,
      absl::Span<const std::string> fps) override {
    return inner_.NextHintsOf(ns, key, fps);
  }

 private:
  index::MemoryIndex inner_;
  std::atomic<bool> up_{false};
  std::atomic<bool> full_{false};
  std::atomic<int> probes_{0};
};

// Waits (bounded) until the monitor has probed `idx` `n` more times.
bool WaitForProbes(const SwitchableIndex& idx, int n) {
  const int target = idx.probes() + n;
  for (int i = 0; i < 5000; ++i) {
    if (idx.probes() >= target) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return false;
}

class Recorder {
 public:
  void Add(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(s.ok());
    codes_.push_back(s.code());
  }
  std::vector<absl::StatusCode> codes() {
    std::lock_guard<std::mutex> lock(mu_);
    return codes_;
  }
  std::vector<bool> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  // Waits (bounded) until `n` changes were reported.
  bool WaitFor(size_t n) {
    for (int i = 0; i < 2000; ++i) {
      if (seen().size() >= n) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<bool> seen_;
  std::vector<absl::StatusCode> codes_;
};

TEST(IndexHealthMonitorTest, ReportsTheFirstStateAndEveryChangeOnly) {
  SwitchableIndex idx;
  Recorder recorder;
  IndexHealthMonitor monitor(&idx, absl::Milliseconds(2),
                             [&](const absl::Status& s) { recorder.Add(s); });
  monitor.Start();
  ASSERT_TRUE(recorder.WaitFor(1));
  // Many probes while down: still one report.
  ASSERT_TRUE(WaitForProbes(idx, 5));
  EXPECT_EQ(recorder.seen(), std::vector<bool>({false}));

  idx.set_up(true);
  ASSERT_TRUE(recorder.WaitFor(2));
  idx.set_up(false);
  ASSERT_TRUE(recorder.WaitFor(3));
  monitor.Stop();
  EXPECT_EQ(recorder.seen(), std::vector<bool>({false, true, false}));

  // Nothing is reported after Stop().
  idx.set_up(true);
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(recorder.seen().size(), 3u);
}

TEST(IndexHealthMonitorTest, ReportsAChangeOfReasonButNotOfMessage) {
  SwitchableIndex idx;
  Recorder recorder;
  IndexHealthMonitor monitor(&idx, absl::Milliseconds(2),
                             [&](const absl::Status& s) { recorder.Add(s); });
  monitor.Start();
  ASSERT_TRUE(recorder.WaitFor(1));  // unreachable
  idx.set_full(true);                // reachable but full
  ASSERT_TRUE(recorder.WaitFor(2));
  // The message changes with every probe; the report does not repeat.
  ASSERT_TRUE(WaitForProbes(idx, 5));
  // Up before no longer full: a probe between the two sees full (no
  // change), never down.
  idx.set_up(true);
  idx.set_full(false);
  ASSERT_TRUE(recorder.WaitFor(3));
  monitor.Stop();
  EXPECT_EQ(recorder.codes(),
            std::vector<absl::StatusCode>({absl::StatusCode::kUnavailable,
                                           absl::StatusCode::kResourceExhausted,
                                           absl::StatusCode::kOk}));
}

TEST(IndexHealthMonitorTest, AStateReportedBeforeStartIsNotReportedAgain) {
  SwitchableIndex idx;
  idx.set_up(true);
  Recorder recorder;
  IndexHealthMonitor monitor(&idx, absl::Milliseconds(2),
                             [&](const absl::Status& s) { recorder.Add(s); });
  monitor.SetReported(absl::OkStatus());
  monitor.Start();
  ASSERT_TRUE(WaitForProbes(idx, 5));
  EXPECT_EQ(recorder.seen(), std::vector<bool>());
  // A change from it is.
  idx.set_up(false);
  ASSERT_TRUE(recorder.WaitFor(1));
  monitor.Stop();
  EXPECT_EQ(recorder.seen(), std::vector<bool>({false}));
}

TEST(IndexHealthMonitorTest, StopEndsAWaitAtOnce) {
  SwitchableIndex idx;
  idx.set_up(true);
  Recorder recorder;
  IndexHealthMonitor monitor(&idx, absl::Hours(1),
                             [&](const absl::Status& s) { recorder.Add(s); });
  monitor.Start();
  ASSERT_TRUE(recorder.WaitFor(1));
  monitor.Stop();  // would hang for an hour if the wait ignored it
  monitor.Stop();  // idempotent
  EXPECT_EQ(recorder.seen(), std::vector<bool>({true}));
}

}  // namespace
}  // namespace chunkd::service
