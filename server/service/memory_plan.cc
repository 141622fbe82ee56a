#include "service/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "chunking/cutter.h"
#include "chunking/limits.h"
#include "estimate/estimator.h"
#include "service/allocator.h"

namespace chunkd::service {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The engine's two bitmaps (chunking/engine.cc, Engine::GrowRing): a ring
// of words covering the chunk in progress, the bits computed ahead of it
// (the window, at least 64 KiB) and a segment being written (at most as
// much), a bit per byte, rounded up to a power of two.
uint64_t BitmapBytes(uint64_t final_size, uint64_t window) {
  const uint64_t ahead = std::max<uint64_t>(window, 64 << 10);
  const uint64_t words = (final_size + 2 * ahead) / 64 + 8;
  uint64_t ring = 64;
  while (ring < words) ring *= 2;
  return 2 * ring * sizeof(uint64_t);
}

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

uint64_t RoundDownToMib(uint64_t bytes) { return bytes / kMiB * kMiB; }

// The hint cache's resident bytes for `mib` of --hint_cache_mib.
uint64_t HintCacheCost(uint64_t mib) {
  return static_cast<uint64_t>(std::ceil(static_cast<double>(mib * kMiB) *
                                         kHintCacheFactor));
}

StreamSettings SettingsOf(const MemoryInputs& in) {
  StreamSettings settings;
  settings.window = WindowBytes(in.threads);
  settings.max_message_bytes = in.max_message_bytes;
  settings.max_inflight_bytes = in.max_inflight_bytes;
  return settings;
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
  costs.typical_stream = TypicalStreamMemoryBytes(SettingsOf(in));
  costs.largest_stream = LargestStreamMemoryBytes(SettingsOf(in));
  return costs;
}

uint64_t IndexCacheCost(uint64_t mib) {
  return static_cast<uint64_t>(static_cast<double>(mib * kMiB) *
                               kIndexCacheFactor) +
         kIndexCacheBaseBytes;
}

// Fills in the terms of `plan`'s values.
void CostPlan(const MemoryInputs& in, MemoryPlan* plan) {
  MemoryCosts& c = plan->costs;
  c.budget = plan->memory_budget;
  c.stream_memory = plan->stream_memory;
  c.streams = uint64_t{plan->max_streams} * kGrpcBytesPerStream;
  c.unbounded_index = in.memory_index && plan->index_max_entries == 0;
  c.index = in.memory_index ? plan->index_max_entries * kIndexEntryBytes : 0;
  if (in.rocksdb_index) c.index = IndexCacheCost(plan->index_cache_mib);
  c.hint_cache = HintCacheCost(plan->hint_cache_mib);
}

absl::Status CheckGiven(const MemoryInputs& in) {
  if (in.max_streams.has_value() && *in.max_streams == 0) {
    return absl::InvalidArgumentError("--max_streams must be at least 1");
  }
  if (in.estimate_max_entries.has_value() && *in.estimate_max_entries < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--estimate_max_entries ", *in.estimate_max_entries,
                     " must be -1 (sized to the largest stream's memory), 0 "
                     "(no limit) or a count"));
  }
  if (in.index_max_entries.has_value() && *in.index_max_entries < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--index_max_entries ", *in.index_max_entries,
                     " must be -1 (sized to --memory_budget or the memory "
                     "limit), 0 (no limit) or a count"));
  }
  return absl::OkStatus();
}

// Every stream, admitted or waiting for its stream memory, can hold a
// message of the budget, so idle or waiting streams never block the
// others' reads.
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

// Without a memory limit: the defaults as they always were, and stream
// memory for every stream at its largest.
MemoryPlan PlanUnlimited(const MemoryInputs& in, const MemoryCosts& fixed) {
  MemoryPlan plan;
  plan.memory_budget = in.memory_budget.value_or(kDefaultMemoryBudget);
  plan.max_streams = in.max_streams.value_or(kDefaultMaxStreams);
  const int64_t entries = in.index_max_entries.value_or(-1);
  if (entries != -1) {
    plan.index_max_entries = static_cast<uint64_t>(entries);
  } else if (in.memory_index) {
    plan.index_max_entries =
        plan.memory_budget / 2 / kDefaultIndexBudgetBytesPerEntry;
  }
  plan.hint_cache_mib = in.hint_cache_mib.value_or(kDefaultHintCacheMib);
  if (in.rocksdb_index) {
    plan.index_cache_mib = in.index_cache_mib.value_or(kDefaultIndexCacheMib);
  }
  plan.stream_memory = in.stream_memory.value_or(
      uint64_t{plan.max_streams} * fixed.largest_stream);
  return plan;
}

// What is left of `room` after `used`, never below 0.
uint64_t Left(uint64_t room, uint64_t used) {
  return room > used ? room - used : 0;
}

// What `n` streams need at least beside the fixed terms: gRPC's buffers,
// the budget (as given, or two messages each, so that one is read while
// the other is cut) and the stream memory (as given, or the largest stream
// unless `hold_largest` is false, and a typical stream each unless
// --max_streams is given: then the others wait their turn).
struct StreamNeeds {
  const MemoryInputs& in;
  const MemoryCosts& costs;
  bool hold_largest = true;

  uint64_t Budget(uint64_t n) const {
    return in.memory_budget.value_or(2 * n * in.max_message_bytes);
  }
  uint64_t StreamMemory(uint64_t n) const {
    return in.stream_memory.value_or(std::max(
        in.max_streams.has_value() ? 0 : n * costs.typical_stream,
        hold_largest ? costs.largest_stream : 0));
  }
  uint64_t Total(uint64_t n) const {
    return n * kGrpcBytesPerStream + Budget(n) + StreamMemory(n);
  }
};

// As many streams as fit `needs` in `share`, at most the default and,
// with a budget or a stream memory given, a message of it each or a
// typical stream's memory.
uint64_t StreamsThatFit(const StreamNeeds& needs, uint64_t share) {
  uint64_t most = kDefaultMaxStreams;
  if (needs.in.memory_budget.has_value()) {
    most = std::min<uint64_t>(
        most, *needs.in.memory_budget / needs.in.max_message_bytes);
  }
  if (needs.in.stream_memory.has_value()) {
    most = std::min<uint64_t>(
        most, *needs.in.stream_memory / needs.costs.typical_stream);
  }
  uint64_t n = 0;
  while (n < most && needs.Total(n + 1) <= share) ++n;
  return n;
}

// --max_streams, --memory_budget and --stream_memory_budget from the
// streams' share of the limit, each only when not given: as many streams
// as fit their needs (at most the default), then what is left shared by
// the budget (up to what the streams can hold) and the stream memory (up to
// every stream at its largest). Where no stream fits beside the largest
// one's memory, typical ones still may (the largest are then refused). 0
// streams when not even one fits.
// REQUIRES: CheckGiven passed.
void SizeStreams(const MemoryInputs& in, uint64_t share, MemoryPlan* plan) {
  StreamNeeds needs{in, plan->costs};
  const uint64_t message = in.max_message_bytes;
  uint64_t n = in.max_streams.value_or(0);
  if (!in.max_streams.has_value()) {
    n = StreamsThatFit(needs, share);
    if (n == 0) {
      needs.hold_largest = false;
      n = StreamsThatFit(needs, share);
    }
    // At least one beside a given budget or stream memory (CheckBudget
    // refuses a budget below a message, the warnings say when the one does
    // not fit).
    if (n == 0 && (in.memory_budget.has_value() ||
                   in.stream_memory.has_value())) {
      n = 1;
    }
  }
  plan->max_streams = static_cast<uint32_t>(n);
  const uint64_t left = Left(share, needs.Total(n));
  plan->memory_budget = needs.Budget(n);
  if (!in.memory_budget.has_value()) {
    // Beyond every stream's input limit the budget holds nothing more (and
    // past the default's 1 GiB it is not worth its memory).
    const uint64_t most = std::max<uint64_t>(
        plan->memory_budget,
        std::min<uint64_t>(kDefaultMemoryBudget,
                           n * (in.max_inflight_bytes + message)));
    const uint64_t extra = in.stream_memory.has_value() ? left : left / 2;
    plan->memory_budget =
        std::max(plan->memory_budget,
                 RoundDownToMib(std::min(plan->memory_budget + extra, most)));
  }
  plan->stream_memory = needs.StreamMemory(n);
  if (!in.stream_memory.has_value()) {
    plan->stream_memory = std::max(
        plan->stream_memory,
        RoundDownToMib(std::min(
            n * plan->costs.largest_stream,
            Left(share, n * kGrpcBytesPerStream + plan->memory_budget))));
  }
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
  if (in.rocksdb_index) {
    // A quarter of the room, as a memory index would have, what the cache
    // holds beyond its capacity included.
    const uint64_t quarter = Left(room / 4, kIndexCacheBaseBytes);
    plan.index_cache_mib = in.index_cache_mib.value_or(std::max<uint64_t>(
        kMinIndexCacheMib,
        static_cast<uint64_t>(static_cast<double>(quarter) /
                              kIndexCacheFactor) /
            kMiB));
  }
  CostPlan(in, &plan);
  SizeStreams(in, Left(room, plan.costs.index + plan.costs.hint_cache), &plan);
  if (plan.max_streams == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the memory limit of ", Mib(*in.limit), " leaves no room for one "
        "stream: at ", kLimitShare * 100, " % of it, ", Mib(target),
        ", minus the server's base, allocator and buffers (",
        Mib(fixed.base + fixed.allocator + fixed.kept_buffers),
        "), the index and the hint cache (",
        Mib(plan.costs.index + plan.costs.hint_cache),
        "), is less than one stream needs (gRPC's ",
        Mib(kGrpcBytesPerStream), ", two messages of --memory_budget and "
        "the stream memory of a Dedup stream with fastcdc's default sizes, ",
        Mib(fixed.typical_stream), "); raise the limit, lower "
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
      : in.rocksdb_index
          ? Setting("--index_cache_mib", plan->index_cache_mib,
                    in.index_cache_mib.has_value(), limited)
          : "no memory index",
      ", ",
      Setting("--hint_cache_mib", plan->hint_cache_mib,
              in.hint_cache_mib.has_value(), limited),
      ", ",
      Setting("--stream_memory_budget", plan->stream_memory,
              in.stream_memory.has_value(), limited),
      "; resident memory at most ",
      c.unbounded_index
          ? std::string("unbounded (the memory index has no entry limit)")
          : absl::StrCat(c.Total(), " bytes = ", Mib(c.Total())),
      " (base ", Mib(c.base), ", allocator ", Mib(c.allocator),
      plan->arenas != 0 ? absl::StrCat(" for ", plan->arenas, " arenas")
                        : std::string(" for glibc's arenas"),
      ", kept buffers ", Mib(c.kept_buffers), ", budget ", Mib(c.budget),
      ", stream memory ", Mib(c.stream_memory), " (a typical stream ",
      Mib(c.typical_stream), ", the largest ", Mib(c.largest_stream),
      "), gRPC ", plan->max_streams, " x ", Mib(kGrpcBytesPerStream),
      ", index ", Mib(c.index), ", hint cache ", Mib(c.hint_cache), ")");
  if (plan->stream_memory < c.largest_stream) {
    plan->warnings.push_back(absl::StrCat(
        "--stream_memory_budget ", plan->stream_memory,
        " is below the largest stream's memory (", c.largest_stream,
        "; a Dedup stream with fastcdc's default sizes needs ",
        c.typical_stream, "): streams whose parameters need more than it "
        "are refused"));
  }
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
        "--memory_budget, --stream_memory_budget, --index_max_entries, "
        "--index_cache_mib and --hint_cache_mib at their defaults to have "
        "them sized to the limit"));
  }
}

}  // namespace

uint64_t MemoryCosts::Total() const {
  return base + allocator + kept_buffers + budget + stream_memory + streams +
         index + hint_cache;
}

uint64_t WindowBytes(size_t threads) {
  return std::clamp<uint64_t>(uint64_t{threads} * kMiB, 2 * kMiB, 8 * kMiB);
}

StreamShape ShapeOf(const chunking::ChunkerOptions& o, bool hints) {
  StreamShape shape;
  shape.hints = hints;
  switch (o.algorithm) {
    case chunking::Algorithm::kFixed:
      shape.final_size = shape.max_size = shape.smallest_chunk = o.avg_size;
      break;
    case chunking::Algorithm::kRepMaxCdc:
      shape.final_size = 2 * uint64_t{o.min_size} + o.horizon_size;
      shape.max_size = 2 * uint64_t{o.min_size} - 1;
      shape.smallest_chunk = o.min_size;
      break;
    case chunking::Algorithm::kFastCdc:
      // The crate's scan starts at min_size rounded down to even.
      shape.final_size = shape.max_size = o.max_size;
      shape.smallest_chunk = o.min_size & ~uint32_t{1};
      break;
    default:
      shape.final_size = shape.max_size = o.max_size;
      shape.smallest_chunk = o.min_size;
      break;
  }
  shape.smallest_chunk = std::max<uint64_t>(1, shape.smallest_chunk);
  return shape;
}

uint64_t ChunkerMemoryBytes(const StreamShape& shape,
                            const StreamSettings& settings) {
  const uint64_t window = settings.window;
  const uint64_t message = settings.max_message_bytes;
  const uint64_t c = std::max<uint64_t>(1, shape.smallest_chunk);
  // The chunker (chunkd/chunker.h, StreamChunker): its buffer holds the
  // left context and the chunk in progress (a bridge), the bytes gathered
  // since the engine last ran (a window) and the piece that completed them;
  // a message of at least four bridges is cut where it lies and only a
  // bridge of it copied. Twice that, as the buffer keeps cut bytes until
  // they are as many as the live ones and grows by doubling.
  const uint64_t bridge = shape.final_size + chunking::kContext;
  const uint64_t piece = std::min(message, 4 * bridge);
  const uint64_t buffer = 2 * (bridge + window + piece);
  // One engine run's chunks, the window and a message of them.
  const uint64_t chunks =
      2 * CeilDiv(window + message, c) * sizeof(chunking::Chunk);
  return buffer + BitmapBytes(shape.final_size, window) + chunks;
}

uint64_t StreamMemoryBytes(const StreamShape& shape,
                           const StreamSettings& settings) {
  const uint64_t message = settings.max_message_bytes;
  const uint64_t c = std::max<uint64_t>(1, shape.smallest_chunk);
  const uint64_t bridge = shape.final_size + chunking::kContext;
  // The hint follower (pipeline/retained_input.h): a copy of what the chunker
  // had not cut with the bridged start of a piece (twice, as it grows), and
  // the copy it hands back to a new chunker, up to a message more.
  uint64_t hints = 0;
  if (shape.hints) {
    const uint64_t bridged = std::min(message, 2 * (shape.max_size + 64));
    hints = 2 * (bridge + bridged) + bridge + message;
  }
  // Responses of a client that stops reading: reading stops at
  // kMaxQueuedResponses, and the input already in (up to
  // --max_inflight_bytes and a message) is still cut; the records of one
  // task are made at once.
  const uint64_t task_records = CeilDiv(kMaxBytesPerTask + message, c);
  const uint64_t queued =
      kMaxQueuedResponses *
          std::min<uint64_t>(kMaxRecordsPerResponse, task_records) +
      CeilDiv(settings.max_inflight_bytes + message, c);
  const uint64_t records =
      queued * kQueuedRecordBytes + task_records * kTaskRecordBytes;
  return ChunkerMemoryBytes(shape, settings) + hints + records;
}

uint64_t EstimateMemoryBytes(const std::vector<StreamShape>& sets,
                             uint64_t entry_bytes, uint64_t max_entries,
                             const StreamSettings& settings) {
  uint64_t bytes = max_entries * entry_bytes;
  for (const StreamShape& shape : sets) {
    bytes += ChunkerMemoryBytes(shape, settings) +
             std::min<uint64_t>(shape.max_size, estimate::kSizesPerSet) *
                 kEstimateSizeCountBytes;
  }
  return bytes;
}

uint64_t DefaultEstimateMaxEntries(const StreamSettings& settings) {
  return LargestStreamMemoryBytes(settings) / 2 / kEstimateEntryBytesSha256;
}

uint64_t TypicalStreamMemoryBytes(const StreamSettings& settings) {
  return StreamMemoryBytes(
      ShapeOf(chunking::DefaultOptions(chunking::Algorithm::kFastCdc),
              /*hints=*/true),
      settings);
}

uint64_t LargestStreamMemoryBytes(const StreamSettings& settings) {
  // A stream's memory grows with its final and largest sizes and shrinks as
  // its smallest chunk grows; where one parameter sets both (repmaxcdc's
  // min_size, fixed's avg_size), every power of two of its range and its
  // ends are tried.
  uint64_t largest = 0;
  auto consider = [&](const StreamShape& shape) {
    largest = std::max(largest, StreamMemoryBytes(shape, settings));
  };
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const chunking::AlgorithmLimits& limits = chunking::LimitsFor(algorithm);
    const bool one_size = algorithm == chunking::Algorithm::kFixed ||
                          algorithm == chunking::Algorithm::kRepMaxCdc;
    const chunking::ParamRange& size =
        algorithm == chunking::Algorithm::kFixed ? limits.avg_size
                                                 : limits.min_size;
    std::vector<uint64_t> sizes = {size.min, size.max};
    for (uint64_t p = 1; one_size && p < size.max; p *= 2) {
      if (p > size.min) sizes.push_back(p);
    }
    for (uint64_t s : sizes) {
      chunking::ChunkerOptions o = chunking::DefaultOptions(algorithm);
      o.min_size = static_cast<uint32_t>(s);
      o.avg_size = static_cast<uint32_t>(s);
      o.max_size = static_cast<uint32_t>(limits.max_size.max);
      o.horizon_size = static_cast<uint32_t>(limits.horizon_size.max);
      consider(ShapeOf(o, algorithm == chunking::Algorithm::kFastCdc));
    }
  }
  return largest;
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
    plan = PlanUnlimited(in, fixed);
    plan.costs = fixed;
    CostPlan(in, &plan);
  }
  plan.arenas = in.arenas != 0 ? PlannedArenas(in) : 0;
  const int64_t estimate_entries = in.estimate_max_entries.value_or(-1);
  // Sized: half of the largest stream's memory, or of the stream memory
  // budget when that is smaller, so that an estimate can always start.
  plan.estimate_max_entries =
      estimate_entries == -1
          ? std::min(DefaultEstimateMaxEntries(SettingsOf(in)),
                     plan.stream_memory / 2 / kEstimateEntryBytesSha256)
          : static_cast<uint64_t>(estimate_entries);
  if (absl::Status budget = CheckBudget(in, plan); !budget.ok()) {
    return budget;
  }
  Describe(in, &plan);
  return plan;
}

}  // namespace chunkd::service
