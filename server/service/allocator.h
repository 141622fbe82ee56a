// How chunkd sets up glibc's malloc, and gives memory back when idle.
//
// Why: each 1 MiB request travels as fresh heap memory twice (gRPC's receive
// slices, filled by recvmsg, and the protobuf string of the `data` field).
// With glibc's defaults such blocks come from mmap, or from an arena top that
// is trimmed as soon as it is freed, so every message faults in new pages the
// kernel must zero first: under load chunkd spent about 40 % of its CPU in
// the kernel's clear_page. Raising the mmap threshold above the largest
// message and the trim threshold above what a burst frees keeps those pages
// in the process and reuses them (docs/design.md, "The allocator").
//
// Arenas: at most one per core (M_ARENA_MAX), not glibc's eight. gRPC
// receives on threads that come and go; each new thread may get a fresh
// arena, whose heap the receive buffers then fault in page by page, and an
// arena heap that empties is unmapped whatever the trim threshold. With
// fewer arenas the receive buffers land in memory that was used before: in
// service_bench the server's page faults per MiB received fell from about 50
// to 0-15 and its CPU per GB for Chunk and Dedup by 4-9 % (docs/benchmarks.md,
// "The service end to end").
//
// The price is memory kept after a burst; IdleTrimmer returns it to the OS
// with malloc_trim(0) once streams have stopped for a while. malloc_trim
// releases the free pages inside every arena and the top of the main heap,
// but never the top of a thread arena's heap; kTrimThreshold bounds that.
//
// Thread safety: ConfigureMalloc must run before any other thread starts
// (mallopt is not meant to race with allocations). IdleTrimPolicy is not
// thread-safe; IdleTrimmer's Start and Stop are called from one owner thread.
#ifndef CHUNKD_SERVICE_ALLOCATOR_H_
#define CHUNKD_SERVICE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "service/periodic.h"

namespace chunkd::service {

// Blocks at least this large come from mmap (and are unmapped when freed).
// Above the default --max_message_bytes (4 MiB) with its receive buffers,
// with room: a 1 GiB stream then faults in about 19 k pages, not 220 k.
inline constexpr size_t kMmapThreshold = size_t{32} << 20;
// Free memory at the top of a heap beyond this is given back at free().
// Below glibc's thread-arena heap size (64 MiB), as malloc_trim never
// releases those tops: each arena keeps at most this much when idle. 16 MiB
// faulted as rarely as 32 or 256 MiB in the measurements (docs/design.md, "Measured design choices").
inline constexpr size_t kTrimThreshold = size_t{16} << 20;

// What ConfigureMalloc did, for the start-up log.
struct MallocSetup {
  // True when mallopt was called with the values below.
  bool configured = false;
  size_t mmap_threshold = 0;
  size_t trim_threshold = 0;
  size_t arena_max = 0;
  // One line saying what was set, or why nothing was.
  std::string description;
};

// `glibc_tunables` is $GLIBC_TUNABLES (null when unset). When it sets any
// glibc.malloc.* tunable the user's choice stands and glibc is left alone;
// otherwise sets M_MMAP_THRESHOLD and M_TRIM_THRESHOLD to the constants
// above and M_ARENA_MAX to the number of cores. Without glibc it does nothing and says so.
// REQUIRES: no other thread runs yet.
MallocSetup ConfigureMalloc(const char* glibc_tunables);

// True when `glibc_tunables` (a colon-separated list of name=value) names a
// tunable of glibc's malloc.
bool TunablesSetMalloc(const char* glibc_tunables);

// Returns free heap memory to the OS (malloc_trim(0)); false when there was
// nothing to return, or without glibc.
bool TrimMalloc();

// What the trimmer watches: the streams running now, and how many ever
// started (so a stream that starts and ends between two looks counts too).
struct StreamActivity {
  size_t active = 0;
  uint64_t started = 0;
};

// When to trim: once, after streams ran and then none was seen for
// `idle_delay`. Never while a stream runs, and not again until the next
// activity. Pure logic, fed observations with their time.
class IdleTrimPolicy {
 public:
  explicit IdleTrimPolicy(absl::Duration idle_delay);
  IdleTrimPolicy(const IdleTrimPolicy&) = default;
  IdleTrimPolicy& operator=(const IdleTrimPolicy&) = default;

  // Records what was seen at `now` (times do not decrease); true when the
  // caller should trim now.
  bool Observe(absl::Time now, const StreamActivity& activity);

 private:
  absl::Duration idle_delay_;
  uint64_t last_started_ = 0;
  bool pending_ = false;  // activity seen since the last trim
  absl::Time last_busy_;  // when activity was last seen
};

// A thread that looks at the activity every `poll` and trims when
// IdleTrimPolicy says so.
class IdleTrimmer {
 public:
  using ActivitySource = std::function<StreamActivity()>;
  using TrimFunction = std::function<void()>;

  struct Options {
    // How often activity is looked at. Default 250 ms.
    absl::Duration poll = absl::Milliseconds(250);
    // Quiet time after the last stream before trimming. Default 1 s.
    absl::Duration idle_delay = absl::Seconds(1);
  };

  // REQUIRES: poll > 0; `activity` and `trim` stay callable until Stop().
  IdleTrimmer(Options options, ActivitySource activity, TrimFunction trim);
  IdleTrimmer(const IdleTrimmer&) = delete;
  IdleTrimmer& operator=(const IdleTrimmer&) = delete;
  // Stops the thread.
  ~IdleTrimmer();

  // Starts the thread; the first look is one `poll` later. Idempotent.
  void Start();
  // Ends the wait at once (a trim under way finishes first) and joins the
  // thread; neither function is called after it returns. Idempotent.
  void Stop();

 private:
  IdleTrimPolicy policy_;  // used on the thread only
  const ActivitySource activity_;
  const TrimFunction trim_;
  PeriodicThread thread_;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_ALLOCATOR_H_
