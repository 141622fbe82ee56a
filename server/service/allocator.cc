#include "service/allocator.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace chunkd::service {

bool TunablesSetMalloc(const char* glibc_tunables) {
  if (glibc_tunables == nullptr) return false;
  for (absl::string_view item : absl::StrSplit(glibc_tunables, ':')) {
    if (absl::StartsWith(item, "glibc.malloc.")) return true;
  }
  return false;
}

MallocSetup ConfigureMalloc(const char* glibc_tunables) {
  MallocSetup setup;
#if defined(__GLIBC__)
  if (TunablesSetMalloc(glibc_tunables)) {
    setup.description = absl::StrCat(
        "malloc: GLIBC_TUNABLES=", glibc_tunables,
        " sets glibc.malloc tunables; leaving glibc's malloc settings to it "
        "(malloc_trim when streams have stopped stays on)");
    return setup;
  }
  const size_t arenas = std::max(1u, std::thread::hardware_concurrency());
  // mallopt takes an int; every value fits.
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold)) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrimThreshold)) != 1 ||
      mallopt(M_ARENA_MAX, static_cast<int>(arenas)) != 1) {
    setup.description =
        "malloc: glibc refused the thresholds; running with its defaults";
    return setup;
  }
  setup.configured = true;
  setup.mmap_threshold = kMmapThreshold;
  setup.trim_threshold = kTrimThreshold;
  setup.arena_max = arenas;
  setup.description = absl::StrCat(
      "malloc: mmap_threshold ", kMmapThreshold >> 20, " MiB, trim_threshold ",
      kTrimThreshold >> 20, " MiB, arena_max ", arenas,
      " (freed request buffers are reused, not faulted in again); "
      "malloc_trim when streams have stopped");
#else
  (void)glibc_tunables;
  setup.description = "malloc: not glibc; allocator settings left alone";
#endif
  return setup;
}

bool TrimMalloc() {
#if defined(__GLIBC__)
  return malloc_trim(0) == 1;
#else
  return false;
#endif
}

IdleTrimPolicy::IdleTrimPolicy(absl::Duration idle_delay)
    : idle_delay_(idle_delay) {}

bool IdleTrimPolicy::Observe(absl::Time now, const StreamActivity& activity) {
  const bool busy = activity.active > 0 || activity.started != last_started_;
  last_started_ = activity.started;
  if (busy) {
    pending_ = true;
    last_busy_ = now;
    return false;
  }
  if (!pending_ || now - last_busy_ < idle_delay_) return false;
  pending_ = false;
  return true;
}

IdleTrimmer::IdleTrimmer(Options options, ActivitySource activity,
                         TrimFunction trim)
    : policy_(options.idle_delay),
      activity_(std::move(activity)),
      trim_(std::move(trim)),
      // The activity source takes the service's lock, and a trim walks every
      // arena: both run on the thread, never on a caller's.
      thread_(options.poll, [this] {
        if (policy_.Observe(absl::Now(), activity_())) trim_();
      }) {}

IdleTrimmer::~IdleTrimmer() { Stop(); }

void IdleTrimmer::Start() { thread_.Start(); }

void IdleTrimmer::Stop() { thread_.Stop(); }

}  // namespace chunkd::service
