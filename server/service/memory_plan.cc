#include "service/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "chunking/cutter.h"
#include "chunking/limits.h"
#include "service/allocator.h"

namespace chunkd::service {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// The largest final chunk size a client may ask for: what a stream's
// chunker holds before it may cut (repmaxcdc: 2 x min_size + horizon_size).
constexpr uint64_t kLargestFinalSize = std::max<uint64_t>(
    {chunking::kFastCdcMaxSizeUpperBound, chunking::kCrc32MaxSizeUpperBound,
     chunking::kSeqCdcMaxSizeUpperBound, chunking::kRabinMaxSizeUpperBound,
     chunking::kBuzhashMaxSizeUpperBound, chunking::kFixedSizeUpperBound,
     2 * uint64_t{chunking::kRepMaxCdcMinSizeUpperBound} +
         chunking::kRepMaxCdcHorizonUpperBound});

// The arenas malloc may have. REQUIRES: in.arenas != 0.
size_t PlannedArenas(const MemoryInputs& in) {
  return in.limit.has_value() ? std::min(in.arenas, kMaxArenasUnderLimit)
                              : in.arenas;
}

// Request buffers the service keeps for reuse (chunk_service.cc,
// kMaxKeptBufferBytes): max(16 MiB, 4 x --max_message_bytes).
uint64_t KeptBufferBytes(uint64_t max_message_bytes) {
  return std::max<uint64_t>(16 * kMiB, 4 * max_message_bytes);
}

std::string Mib(uint64_t bytes) {
  return absl::StrCat((bytes + kMiB / 2) / kMiB, " MiB");
}

// The hint cache's resident bytes for `mib` of --hint_cache_mib.
uint64_t HintCacheCost(uint64_t mib) {
  return static_cast<uint64_t>(std::ceil(static_cast<double>(mib * kMiB) *
                                         kHintCacheFactor));
}

// The terms that do not depend on the sized flags.
MemoryCosts FixedCosts(const MemoryInputs& in) {
  MemoryCosts costs;
  costs.base = kBaseBytes;
  // glibc's default without chunkd's set-up: 8 arenas per core.
  const size_t arenas =
      in.arenas != 0 ? PlannedArenas(in) : 8 * std::max<size_t>(1, in.cores);
  costs.allocator = arenas * kTrimThreshold;
  costs.kept_buffers = KeptBufferBytes(in.max_message_bytes);
  costs.per_stream =
      PerStreamBytes(in.max_message_bytes, in.max_inflight_bytes, in.threads);
  return costs;
}

// Fills in the terms of `plan`'s values.
void CostPlan(const MemoryInputs& in, MemoryPlan* plan) {
  MemoryCosts& c = plan->costs;
  c.budget = plan->memory_budget;
  c.streams = uint64_t{plan->max_streams} * c.per_stream;
  c.unbounded_index = in.memory_index && plan->index_max_entries == 0;
  c.index = in.memory_index ? plan->index_max_entries * kIndexEntryBytes : 0;
  c.hint_cache = HintCacheCost(plan->hint_cache_mib);
}

absl::Status CheckGiven(const MemoryInputs& in) {
  if (in.max_streams.has_value() && *in.max_streams == 0) {
    return absl::InvalidArgumentError("--max_streams must be at least 1");
  }
  if (in.index_max_entries.has_value() && *in.index_max_entries < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--index_max_entries ", *in.index_max_entries,
                     " must be -1 (sized to --memory_budget or the memory "
                     "limit), 0 (no limit) or a count"));
  }
  return absl::OkStatus();
}

// Every stream can hold a message of the budget, so idle streams never
// block the others.
absl::Status CheckBudget(const MemoryInputs& in, const MemoryPlan& plan) {
  if (plan.max_streams != 0 &&
      plan.memory_budget / plan.max_streams >= in.max_message_bytes) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--memory_budget ", plan.memory_budget,
      " must be at least --max_streams (", plan.max_streams,
      ") x --max_message_bytes (", in.max_message_bytes,
      ") = ", uint64_t{plan.max_streams} * in.max_message_bytes,
      "; raise it, or lower one of the others"));
}

// Without a memory limit: the defaults as they always were.
MemoryPlan PlanUnlimited(const MemoryInputs& in) {
  MemoryPlan plan;
  plan.memory_budget = in.memory_budget.value_or(kDefaultMemoryBudget);
  plan.max_streams = in.max_streams.value_or(kDefaultMaxStreams);
  const int64_t entries = in.index_max_entries.value_or(-1);
  plan.index_max_entries =
      entries == -1 ? plan.memory_budget / 2 / kDefaultIndexBudgetBytesPerEntry
                    : static_cast<uint64_t>(entries);
  plan.hint_cache_mib = in.hint_cache_mib.value_or(kDefaultHintCacheMib);
  return plan;
}

// What is left of `room` after `used`, never below 0.
uint64_t Left(uint64_t room, uint64_t used) {
  return room > used ? room - used : 0;
}

// --max_streams and --memory_budget from the streams' share of the limit,
// each only when not given. REQUIRES: CheckGiven passed.
void SizeStreams(const MemoryInputs& in, uint64_t share, MemoryPlan* plan) {
  const uint64_t per_stream = plan->costs.per_stream;
  const uint64_t message = in.max_message_bytes;
  // Beyond every stream's input limit the budget holds nothing more
  // (and past the default's 1 GiB it is not worth its memory), but two
  // messages per stream always fit.
  auto cap_budget = [&](uint64_t streams) {
    return std::max<uint64_t>(
        2 * streams * message,
        std::min<uint64_t>(kDefaultMemoryBudget,
                           streams * (in.max_inflight_bytes + message)));
  };
  if (in.max_streams.has_value()) {
    plan->max_streams = *in.max_streams;
    const uint64_t streams = plan->max_streams;
    plan->memory_budget =
        in.memory_budget.value_or(std::clamp<uint64_t>(
            Left(share, streams * per_stream) / kMiB * kMiB, streams * message,
            cap_budget(streams)));
    return;
  }
  if (in.memory_budget.has_value()) {
    // As many as fit beside it, each with a message of it; at least one
    // (CheckBudget refuses a budget below a message, the warning says when
    // the one does not fit).
    plan->memory_budget = *in.memory_budget;
    const uint64_t fit = Left(share, plan->memory_budget) / per_stream;
    plan->max_streams = static_cast<uint32_t>(std::max<uint64_t>(
        1, std::min<uint64_t>({fit, plan->memory_budget / message,
                               kDefaultMaxStreams})));
    return;
  }
  // Each stream with room for two messages of budget, so that one is read
  // while the other is cut.
  const uint64_t streams = std::min<uint64_t>(
      kDefaultMaxStreams, share / (per_stream + 2 * message));
  plan->max_streams = static_cast<uint32_t>(streams);
  // In whole MiB, for the log's sake.
  plan->memory_budget = std::max(
      std::min(Left(share, streams * per_stream), cap_budget(streams)) / kMiB *
          kMiB,
      2 * streams * message);
}

// Under a limit: the fixed terms first, then the flags given, then the
// defaults from what is left.
absl::StatusOr<MemoryPlan> PlanLimited(const MemoryInputs& in,
                                       const MemoryCosts& fixed) {
  MemoryPlan plan;
  plan.costs = fixed;
  const uint64_t target =
      static_cast<uint64_t>(static_cast<double>(*in.limit) * kLimitShare);
  const uint64_t room =
      Left(target, fixed.base + fixed.allocator + fixed.kept_buffers);
  plan.hint_cache_mib = in.hint_cache_mib.value_or(
      std::min<uint64_t>(kDefaultHintCacheMib, room / 16 / kMiB));
  const int64_t entries = in.index_max_entries.value_or(-1);
  if (!in.memory_index) {
    plan.index_max_entries = entries == -1 ? 0 : static_cast<uint64_t>(entries);
  } else if (entries == -1) {
    plan.index_max_entries = std::max<uint64_t>(1, room / 4 / kIndexEntryBytes);
  } else {
    plan.index_max_entries = static_cast<uint64_t>(entries);
  }
  CostPlan(in, &plan);
  SizeStreams(in, Left(room, plan.costs.index + plan.costs.hint_cache), &plan);
  if (plan.max_streams == 0 && !in.memory_budget.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the memory limit of ", Mib(*in.limit), " leaves no room for one "
        "stream: at ", kLimitShare * 100, " % of it, ", Mib(target),
        ", minus the server's base, allocator and buffers (",
        Mib(fixed.base + fixed.allocator + fixed.kept_buffers),
        "), the index and the hint cache (",
        Mib(plan.costs.index + plan.costs.hint_cache),
        "), is less than one stream's worst case (", Mib(fixed.per_stream),
        " beyond two messages of --memory_budget); raise the limit, lower "
        "--max_message_bytes or --max_inflight_bytes, or give "
        "--max_streams and --memory_budget explicitly"));
  }
  CostPlan(in, &plan);
  return plan;
}

// "--flag VALUE (given|default|sized)".
std::string Setting(absl::string_view flag, uint64_t value, bool given,
                    bool limited) {
  return absl::StrCat(flag, " ", value,
                      given ? " (given)" : limited ? " (sized)" : "");
}

void Describe(const MemoryInputs& in, MemoryPlan* plan) {
  const bool limited = in.limit.has_value();
  const MemoryCosts& c = plan->costs;
  plan->summary = absl::StrCat(
      Setting("--max_streams", plan->max_streams, in.max_streams.has_value(),
              limited),
      ", ",
      Setting("--memory_budget", plan->memory_budget,
              in.memory_budget.has_value(), limited),
      ", ",
      in.memory_index
          ? Setting("--index_max_entries", plan->index_max_entries,
                    in.index_max_entries.value_or(-1) != -1, limited)
          : "no memory index",
      ", ",
      Setting("--hint_cache_mib", plan->hint_cache_mib,
              in.hint_cache_mib.has_value(), limited),
      "; resident memory at most ",
      c.unbounded_index
          ? std::string("unbounded (the memory index has no entry limit)")
          : absl::StrCat(c.Total(), " bytes = ", Mib(c.Total())),
      " (base ", Mib(c.base), ", allocator ", Mib(c.allocator),
      plan->arenas != 0 ? absl::StrCat(" for ", plan->arenas, " arenas")
                        : std::string(" for glibc's arenas"),
      ", kept buffers ", Mib(c.kept_buffers), ", budget ", Mib(c.budget),
      ", streams ", plan->max_streams, " x ", Mib(c.per_stream), ", index ",
      Mib(c.index), ", hint cache ", Mib(c.hint_cache), ")");
  if (!limited) return;
  const uint64_t target =
      static_cast<uint64_t>(static_cast<double>(*in.limit) * kLimitShare);
  if (c.unbounded_index) {
    plan->warnings.push_back(absl::StrCat(
        "--index_max_entries 0 lets the memory index grow without bound "
        "under a memory limit of ", Mib(*in.limit),
        ": the kernel kills chunkd when the index reaches it"));
  } else if (c.Total() > target) {
    plan->warnings.push_back(absl::StrCat(
        "the flags given put resident memory at up to ", Mib(c.Total()),
        ", above ", kLimitShare * 100, " % of the memory limit of ",
        Mib(*in.limit), " (", Mib(target),
        "): under full load the kernel may kill chunkd; leave --max_streams, "
        "--memory_budget, --index_max_entries and --hint_cache_mib at their "
        "defaults to have them sized to the limit"));
  }
}

}  // namespace

uint64_t MemoryCosts::Total() const {
  return base + allocator + kept_buffers + budget + streams + index +
         hint_cache;
}

uint64_t WindowBytes(size_t threads) {
  return std::clamp<uint64_t>(uint64_t{threads} * kMiB, 2 * kMiB, 8 * kMiB);
}

uint64_t PerStreamBytes(uint64_t max_message_bytes,
                        uint64_t max_inflight_bytes, size_t threads) {
  const uint64_t window = WindowBytes(threads);
  const uint64_t message = max_message_bytes;
  const uint64_t final_size = kLargestFinalSize + chunking::kContext;
  // The chunker's buffer holds the chunk in progress (less than the final
  // size), a window of bytes since its last run and the message that filled
  // it; the vector doubles as it grows, so twice that; plus the candidate
  // bitmaps of the chunk in progress and two windows, a bit per byte.
  const uint64_t large_chunks =
      2 * (final_size + window + message) + (final_size + 2 * window) / 8;
  // The smallest chunks: a small buffer, and the responses of everything the
  // stream holds when its client stops reading (reading stops, the input
  // already in is still cut: up to --max_inflight_bytes and a message, a
  // record of about 46 bytes per 48-byte chunk), with the task's records
  // and what malloc keeps of them; measured at up to 1.65 times that input
  // (64-byte chunks), counted twice.
  const uint64_t small_chunks =
      2 * (window + message) + 2 * (max_inflight_bytes + message);
  return std::max(large_chunks, small_chunks) + kGrpcBytesPerStream;
}

absl::StatusOr<MemoryPlan> PlanMemory(const MemoryInputs& in) {
  if (absl::Status given = CheckGiven(in); !given.ok()) return given;
  const MemoryCosts fixed = FixedCosts(in);
  MemoryPlan plan;
  if (in.limit.has_value()) {
    absl::StatusOr<MemoryPlan> limited = PlanLimited(in, fixed);
    if (!limited.ok()) return limited.status();
    plan = *std::move(limited);
  } else {
    plan = PlanUnlimited(in);
    plan.costs = fixed;
    CostPlan(in, &plan);
  }
  plan.arenas = in.arenas != 0 ? PlannedArenas(in) : 0;
  if (absl::Status budget = CheckBudget(in, plan); !budget.ok()) {
    return budget;
  }
  Describe(in, &plan);
  return plan;
}

}  // namespace chunkd::service
