#include "chunking/engine.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/auto_kernel.h"
#include "chunking/cutter.h"
#include "chunking/drivers/driver.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {

namespace {

// Automatic window: 1 MiB per thread, so that the two-stage pipeline can
// run a segment per thread ahead of the chunk in progress (and StreamChunker
// runs hand every thread work); at least 2 MiB; at most 8 MiB, because
// StreamChunker buffers a window per stream.
constexpr size_t kAutoWindowFloor = size_t{2} << 20;
constexpr size_t kAutoWindowPerThread = size_t{1} << 20;
constexpr size_t kAutoWindowCeiling = size_t{8} << 20;
// Automatic segments are at least this long.
constexpr size_t kAutoSegmentFloor = size_t{64} << 10;
// The two-stage pipeline computes at least this far ahead of the chunk in
// progress (when the input has it), also with a smaller window: kernel calls
// have a fixed cost (crc32's warm-up is 256 steps of all lanes), so segments
// of a few bytes would be mostly warm-up.
constexpr size_t kMinRoundBytes = size_t{64} << 10;
// Speculative segments (engine.h) are at most this long: a round of them
// is short enough for the guessed chunks of each segment to stay small, long
// enough that the chunks re-cut where a guess meets the true chunks (one or
// two per segment) cost little.
constexpr size_t kSpeculativeSegmentCap = size_t{4} << 20;

size_t RoundUp64(size_t n) { return (n + 63) / 64 * 64; }

// The automatic segment for a window of `len` bytes and `parallelism`
// threads: the window per thread (one thread: the whole window). The
// two-stage pipeline has no round barriers, so segments need not be small
// for balance, and long ones amortize a kernel call's warm-up (crc32: 256
// steps of all 64 lanes, 1.6 % of a 1 MiB segment, 6 % of 256 KiB); near the
// input's end the pipeline shortens them (GuidedSegment).
size_t AutoSegment(size_t len, size_t parallelism) {
  const size_t parts = std::max<size_t>(1, parallelism);
  return std::max(kAutoSegmentFloor, RoundUp64((len + parts - 1) / parts));
}

// Guided self-scheduling of automatic segments: with `left` bytes to go,
// a segment of left / (2 * parallelism), between kAutoSegmentFloor and the
// full segment, so that the threads run out of work at nearly the same time
// instead of one finishing a full segment while the others wait.
size_t GuidedSegment(size_t left, size_t segment, size_t parallelism) {
  return std::min(segment, std::max(kAutoSegmentFloor,
                                    RoundUp64(left / (2 * parallelism))));
}

absl::Status CheckEngineOptions(const EngineOptions& engine) {
  if (engine.segment_size != 0 && (engine.segment_size < kMinSegmentSize ||
                                   engine.segment_size > kMaxSegmentSize)) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment_size ", engine.segment_size, " is out of range [",
                     kMinSegmentSize, ", ", kMaxSegmentSize, "]"));
  }
  if (engine.window_size > kMaxWindowSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("window_size ", engine.window_size,
                     " is out of range [1, ", kMaxWindowSize, "]"));
  }
  switch (engine.strategy) {
    case Strategy::kAuto:
    case Strategy::kTwoStage:
    case Strategy::kSequentialScan:
    case Strategy::kReference:
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "strategy ", static_cast<int>(engine.strategy),
      " is not one of 0 (auto), 1 (two-stage), 2 (sequential), 3 (reference)"));
}

// The given kernel, else CHUNKD_BACKEND's, else the automatic one of the
// algorithm on this thread count (auto_kernel.h).
absl::StatusOr<const kernels::KernelSet*> ResolveKernel(
    const ChunkerOptions& options, const EngineOptions& engine) {
  if (engine.kernel == nullptr) {
    absl::StatusOr<const kernels::KernelSet*> forced =
        kernels::ForcedKernelSet();
    if (!forced.ok() || *forced != nullptr) return forced;
    return &AutoKernel(options.algorithm, engine.executor);
  }
  if (!engine.kernel->supported()) {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel set ", engine.kernel->name,
                     " is not supported by this CPU or OS"));
  }
  return engine.kernel;
}

}  // namespace

absl::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kAuto:
      return "auto";
    case Strategy::kTwoStage:
      return "two-stage";
    case Strategy::kSequentialScan:
      return "sequential";
    case Strategy::kReference:
      return "reference";
  }
  return "unknown";
}

absl::StatusOr<Strategy> ParseStrategy(absl::string_view name) {
  for (Strategy s : {Strategy::kAuto, Strategy::kTwoStage,
                     Strategy::kSequentialScan, Strategy::kReference}) {
    if (StrategyName(s) == name) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown strategy \"", name,
                   "\"; expected one of auto, two-stage, "
                   "sequential, reference"));
}

namespace {

// What PlanEngine and Engine::Create resolve: the options' driver, the
// kernel set and the plan.
struct Resolved {
  std::shared_ptr<const AlgorithmDriver> driver;
  const kernels::KernelSet* kernel = nullptr;
  EnginePlan plan;
};

absl::StatusOr<Resolved> Resolve(const ChunkerOptions& options,
                                 const EngineOptions& engine) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (absl::Status s = CheckEngineOptions(engine); !s.ok()) return s;
  absl::StatusOr<const kernels::KernelSet*> kernel =
      ResolveKernel(options, engine);
  if (!kernel.ok()) return kernel.status();
  Resolved r;
  r.driver = NewDriver(options);
  r.kernel = *kernel;
  EnginePlan& plan = r.plan;
  plan.kernel = (*kernel)->name;
  plan.parallelism = engine.executor == nullptr
                         ? 1
                         : std::max<size_t>(1, engine.executor->parallelism());
  plan.window_size = engine.window_size != 0
                         ? engine.window_size
                         : std::clamp(kAutoWindowPerThread * plan.parallelism,
                                      kAutoWindowFloor, kAutoWindowCeiling);
  plan.segment_auto = engine.segment_size == 0;
  plan.segment_size = plan.segment_auto
                          ? AutoSegment(plan.window_size, plan.parallelism)
                          : engine.segment_size;
  plan.strategy = engine.strategy != Strategy::kAuto
                      ? engine.strategy
                      : r.driver->AutoStrategy(**kernel);
  return r;
}

}  // namespace

absl::StatusOr<EnginePlan> PlanEngine(const ChunkerOptions& options,
                                      const EngineOptions& engine) {
  absl::StatusOr<Resolved> resolved = Resolve(options, engine);
  if (!resolved.ok()) return resolved.status();
  return std::move(resolved->plan);
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const ChunkerOptions& options, const EngineOptions& engine) {
  absl::StatusOr<Resolved> r = Resolve(options, engine);
  if (!r.ok()) return r.status();
  return std::unique_ptr<Engine>(new Engine(
      std::move(r->driver), std::move(r->plan), r->kernel, engine.executor));
}

Engine::Engine(std::shared_ptr<const AlgorithmDriver> driver, EnginePlan plan,
               const kernels::KernelSet* kernel, Executor* executor)
    : driver_(std::move(driver)),
      stages_(driver_->two_stage()),
      bitmaps_(stages_ == nullptr ? 0 : stages_->bitmaps()),
      final_size_(driver_->final_size()),
      plan_(std::move(plan)),
      kernel_(kernel),
      executor_(plan_.parallelism > 1 ? executor : nullptr) {
  if (plan_.strategy == Strategy::kSequentialScan && bitmaps_ > 0) {
    const size_t words = kernels::BitmapWords(kMaxBlock) + 1;
    for (int k = 0; k < bitmaps_; ++k) block_.bits[k].assign(words, 0);
  }
}

Engine::~Engine() = default;

void Engine::Stage1(const uint8_t* data, size_t begin, size_t end,
                    uint64_t* out0, uint64_t* out1) const {
  stages_->Stage1(*kernel_, data, begin, end, out0, out1);
}

// Stage 1 of stream positions [begin, end) into the ring: begin lies on a
// word boundary relative to origin_ (or the words before it are written
// separately, see CutFinalTwoStage), so the call writes whole words of its
// own — in at most two pieces where they wrap around the ring (any split of a
// range gives the same bits) — and no other segment writes them.
void Engine::Stage1IntoRing(const Input& input, uint64_t begin, uint64_t end) {
  const auto at = [&](uint64_t pos) {
    return static_cast<size_t>(pos - input.offset);
  };
  for (uint64_t p = begin; p < end;) {
    const uint64_t slot = ((p - origin_) / 64) & ring_mask_;
    const uint64_t piece_end = std::min(end, p + 64 * (ring_mask_ + 1 - slot));
    Stage1(input.data, at(p), at(piece_end), ring_[0].data() + slot,
           bitmaps_ > 1 ? ring_[1].data() + slot : nullptr);
    p = piece_end;
  }
}

// The ring grows to the next power of two of `words`, keeping the words of
// [lo_, covered_end_).
void Engine::GrowRing(size_t words) {
  size_t capacity = 64;
  while (capacity < words) capacity *= 2;
  const uint64_t old_mask = ring_mask_;
  for (int k = 0; k < bitmaps_; ++k) {
    std::vector<uint64_t> grown(capacity, 0);
    if (window_valid_ && covered_end_ > lo_) {
      for (uint64_t g = (lo_ - origin_) / 64;
           g <= (covered_end_ - 1 - origin_) / 64; ++g) {
        grown[g & (capacity - 1)] = ring_[k][g & old_mask];
      }
    }
    ring_[k] = std::move(grown);
  }
  ring_mask_ = capacity - 1;
}

stage2::Cut Engine::Select(const Input& input, size_t start, size_t avail,
                           uint64_t hard_end) {
  ChunkView chunk;
  chunk.data = input.data + start;
  chunk.pos = input.offset + start;
  chunk.avail = avail;
  // The caller keeps kContext bytes before every chunk start unless the
  // input starts with the stream.
  chunk.context = std::min(start, kContext);
  if (stages_ == nullptr || plan_.strategy == Strategy::kReference) {
    return driver_->Cut(chunk);
  }
  if (plan_.strategy == Strategy::kTwoStage) {
    WindowSource source(origin_, ring_mask_,
                        {ring_[0].data(), ring_[1].data()});
    return stages_->Select(chunk, source);
  }
  BlockSource source(*stages_, *kernel_, &block_, input.data, input.offset,
                     input.size, hard_end);
  return stages_->Select(chunk, source);
}

size_t Engine::SelectUpTo(const Input& input, size_t start, uint64_t limit,
                          std::vector<Chunk>* out) {
  while (start < input.size) {
    const size_t avail = input.size - start;
    if (!input.at_end && avail < final_size_) break;
    const uint64_t pos = input.offset + start;
    const uint64_t hard_end = pos + std::min(avail, final_size_);
    if (hard_end > limit) break;
    const stage2::Cut cut = Select(input, start, avail, hard_end);
    out->push_back(Chunk{pos, static_cast<uint32_t>(cut.length), cut.hash});
    start += cut.length;
  }
  return start;
}

bool Engine::HasFinalChunk(const Input& input, size_t start) const {
  return start < input.size &&
         (input.at_end || input.size - start >= final_size_);
}

// The shared state of one pipelined two-stage run (engine.h): segments
// [base + k * segment, ...) up to `end`, claimed in order, and stage 2's
// progress, which bounds how far ahead segments may be claimed.
struct Engine::Pipeline {
  const Input* input = nullptr;
  uint64_t base = 0;
  uint64_t end = 0;
  // Segment k is [bounds[k], bounds[k + 1]); every bound but `end` lies on a
  // word boundary relative to origin_.
  std::vector<uint64_t> bounds;
  size_t count = 0;
  std::atomic<size_t> next{0};  // the next segment to claim
  std::unique_ptr<std::atomic<bool>[]> done;
  // The global word number of the chunk in progress: stage 2 reads no word
  // before it any more, so its ring slot may be rewritten (released by
  // stage 2, acquired by a claim).
  std::atomic<uint64_t> floor_word{0};
  // Stage 2 runs on whichever thread holds this; the fields after it are
  // guarded by it.
  std::atomic<bool> selecting{false};
  size_t ready = 0;  // segments [0, ready) are done
  size_t start = 0;  // data index of the chunk in progress
  std::vector<Chunk>* out = nullptr;

  uint64_t SegmentEnd(size_t k) const { return bounds[k + 1]; }
};

// Claims the next segment unless its words would overwrite slots that stage
// 2 may still read (then false with *exhausted unset; stage 2 must move on
// first) or every segment is claimed (false, *exhausted set).
bool Engine::Claim(Pipeline& p, size_t* k, bool* exhausted) const {
  size_t i = p.next.load(std::memory_order_relaxed);
  for (;;) {
    if (i >= p.count) {
      *exhausted = true;
      return false;
    }
    // The segment's last word and the one after it (read, masked, by an
    // unaligned Get) must not be slots of words stage 2 still needs.
    const uint64_t last_word = (p.SegmentEnd(i) - 1 - origin_) / 64;
    if (last_word + 2 - p.floor_word.load(std::memory_order_acquire) >
        ring_mask_ + 1) {
      return false;
    }
    if (p.next.compare_exchange_weak(i, i + 1, std::memory_order_relaxed)) {
      *k = i;
      return true;
    }
  }
}

// Stage 2 as far as the finished segments allow, if no other thread is
// running it. Returns whether it cut any chunk.
bool Engine::TrySelect(Pipeline& p) {
  if (p.selecting.exchange(true, std::memory_order_acquire)) return false;
  while (p.ready < p.count && p.done[p.ready].load(std::memory_order_acquire)) {
    ++p.ready;
  }
  // The bits before base were complete before the run.
  const uint64_t ready_end = p.ready == 0 ? p.base : p.SegmentEnd(p.ready - 1);
  // Short of the last finished segment by a word, so that an unaligned Get
  // never reads a word another thread is writing.
  const uint64_t limit = ready_end == p.end
                             ? ready_end
                             : ready_end - std::min<uint64_t>(ready_end, 64);
  const size_t before = p.start;
  p.start = SelectUpTo(*p.input, p.start, limit, p.out);
  const bool progress = p.start != before;
  if (progress) {
    const uint64_t pos = p.input->offset + p.start;
    p.floor_word.store((pos - origin_) / 64, std::memory_order_release);
  }
  p.selecting.store(false, std::memory_order_release);
  return progress;
}

// One worker of the pipeline: every thread of the run, the caller included,
// runs this. It cuts chunks when the segments before them are done (whoever
// gets there first), else computes the next segment, else waits for a
// segment another thread is computing. It returns once every segment is
// claimed and it has finished its own, so a worker that never starts (a busy
// shared pool) or starts late costs nothing: the others do its share.
void Engine::PipelineWorker(Pipeline& p) {
  int idle = 0;
  for (;;) {
    if (TrySelect(p)) {
      idle = 0;
      continue;
    }
    size_t k = 0;
    bool exhausted = false;
    if (Claim(p, &k, &exhausted)) {
      Stage1IntoRing(*p.input, p.bounds[k], p.bounds[k + 1]);
      p.done[k].store(true, std::memory_order_release);
      idle = 0;
      continue;
    }
    if (exhausted) return;
    // The ring is full: stage 2 waits for a segment in progress elsewhere,
    // or another thread is running it.
    if (++idle < 64) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

size_t Engine::CutFinalTwoStage(const Input& input, size_t start,
                                std::vector<Chunk>* out) {
  if (!HasFinalChunk(input, start)) return start;
  const uint64_t input_end = input.offset + input.size;
  const uint64_t pos = input.offset + start;
  if (!window_valid_ || pos < lo_ || pos > covered_end_) {
    window_valid_ = true;
    origin_ = pos;
    lo_ = pos;
    covered_end_ = pos;
  } else {
    // Forget the words before the chunk in progress: no data moves, the ring
    // just lets the next segments reuse their slots.
    lo_ = origin_ + (pos - origin_) / 64 * 64;
  }
  const size_t lookahead = std::max(plan_.window_size, kMinRoundBytes);
  // Segments on the word grid, at most the window (which bounds the ring).
  const uint64_t segment =
      std::min(RoundUp64(plan_.segment_size), RoundUp64(lookahead));
  // The ring holds the chunk in progress (up to final_size_), the bits
  // computed ahead of it and a segment being written, plus the words an
  // unaligned Get reads past them. Claim() keeps the segments within it.
  const size_t words =
      static_cast<size_t>((final_size_ + lookahead + segment) / 64) + 8;
  if (words > ring_mask_ + 1) GrowRing(words);

  // A previous input ended inside a word: its remaining positions first,
  // ORed into the bits already there (a kernel zeroes the positions past
  // its range) — or, for words that are not bitmaps, the whole word again.
  if (covered_end_ < input_end && (covered_end_ - origin_) % 64 != 0) {
    const uint64_t to =
        std::min(input_end, origin_ + RoundUp64(covered_end_ - origin_));
    uint64_t bits[2] = {0, 0};
    const unsigned shift = static_cast<unsigned>((covered_end_ - origin_) % 64);
    const uint64_t slot = ((covered_end_ - origin_) / 64) & ring_mask_;
    const bool by_or = stages_->WordsCombineByOr();
    const uint64_t from = by_or ? covered_end_ : covered_end_ - shift;
    Stage1(input.data, static_cast<size_t>(from - input.offset),
           static_cast<size_t>(to - input.offset), &bits[0], &bits[1]);
    for (int k = 0; k < bitmaps_; ++k) {
      ring_[k][slot] = by_or ? ring_[k][slot] | bits[k] << shift : bits[k];
    }
    covered_end_ = to;
  }

  if (covered_end_ < input_end) {
    Pipeline p;
    p.input = &input;
    p.base = covered_end_;
    p.end = input_end;
    const bool guided = plan_.segment_auto && plan_.parallelism > 1;
    p.bounds.push_back(covered_end_);
    for (uint64_t at = covered_end_; at < input_end;) {
      const size_t left = static_cast<size_t>(input_end - at);
      uint64_t len =
          guided ? GuidedSegment(left, segment, plan_.parallelism) : segment;
      // No guided segment shorter than the floor after it: a run over a
      // few more bytes than one segment (a StreamChunker piece's bridge)
      // stays one task on the calling thread.
      if (guided && left - std::min<uint64_t>(left, len) < kAutoSegmentFloor) {
        len = left;
      }
      at = std::min(input_end, at + len);
      p.bounds.push_back(at);
    }
    p.count = p.bounds.size() - 1;
    p.done.reset(new std::atomic<bool>[p.count]);
    for (size_t k = 0; k < p.count; ++k) {
      p.done[k].store(false, std::memory_order_relaxed);
    }
    p.floor_word.store((lo_ - origin_) / 64, std::memory_order_relaxed);
    p.start = start;
    p.out = out;
    const size_t workers =
        executor_ == nullptr ? 1 : std::min(plan_.parallelism, p.count);
    RunParallel(executor_, workers, [&](size_t) { PipelineWorker(p); });
    start = p.start;
    covered_end_ = input_end;
  }
  // Every segment is done: the chunks left, up to the input's end.
  start = SelectUpTo(input, start, covered_end_, out);
  const uint64_t now = input.offset + start;
  if (now <= covered_end_) lo_ = origin_ + (now - origin_) / 64 * 64;
  return start;
}

size_t Engine::CutRange(const Input& input, size_t start, size_t stop,
                        std::vector<Chunk>* out) {
  while (start < stop) {
    const size_t avail = input.size - start;
    const uint64_t pos = input.offset + start;
    const stage2::Cut cut =
        Select(input, start, avail, pos + std::min(avail, final_size_));
    out->push_back(Chunk{pos, static_cast<uint32_t>(cut.length), cut.hash});
    start += cut.length;
  }
  return start;
}

size_t Engine::CutFinalSpeculative(const Input& input, size_t start,
                                   std::vector<Chunk>* out) {
  const size_t parallelism = plan_.parallelism;
  // Chunks starting before `stop` are final.
  size_t stop = input.size;
  if (!input.at_end) {
    stop = input.size >= final_size_ ? input.size - final_size_ + 1 : 0;
  }
  while (helpers_.size() < parallelism) {
    EnginePlan plan = plan_;
    plan.parallelism = 1;
    helpers_.push_back(std::unique_ptr<Engine>(
        new Engine(driver_, std::move(plan), kernel_, nullptr)));
  }
  speculated_.resize(parallelism);
  while (start < stop) {
    // One round: up to `parallelism` segments of `segment` bytes.
    const size_t left = stop - start;
    const size_t segment =
        plan_.segment_auto
            ? std::max(kAutoSegmentFloor,
                       RoundUp64((std::min(left, parallelism *
                                                     kSpeculativeSegmentCap) +
                                  parallelism - 1) /
                                 parallelism))
            : plan_.segment_size;
    const size_t segments =
        std::min(parallelism, (left + segment - 1) / segment);
    if (segments <= 1) return CutRange(input, start, stop, out);
    const auto seg_begin = [&](size_t i) { return start + i * segment; };
    const auto seg_end = [&](size_t i) {
      return std::min(stop, start + (i + 1) * segment);
    };
    RunParallel(executor_, segments, [&](size_t i) {
      speculated_[i].clear();
      helpers_[i]->CutRange(input, seg_begin(i), seg_end(i), &speculated_[i]);
    });
    // Segment 0 started at a true boundary; segment i > 0 at a guess. Follow
    // the true chunks into segment i until one starts where one of its
    // guessed chunks starts: from there on they are the same chunks, since a
    // chunk is a function of its start (and the stream's bytes).
    size_t at = start;
    for (size_t i = 0; i < segments; ++i) {
      const std::vector<Chunk>& guess = speculated_[i];
      size_t j = 0;
      while (at < seg_end(i)) {
        const uint64_t pos = input.offset + at;
        while (j < guess.size() && guess[j].offset < pos) ++j;
        if (j < guess.size() && guess[j].offset == pos) {
          out->insert(out->end(), guess.begin() + static_cast<ptrdiff_t>(j),
                      guess.end());
          at = static_cast<size_t>(guess.back().offset + guess.back().length -
                                   input.offset);
          break;
        }
        at = CutRange(input, at, at + 1, out);
      }
    }
    start = at;
  }
  return start;
}

size_t Engine::CutFinal(const Input& input, size_t start,
                        std::vector<Chunk>* out) {
  if (plan_.strategy == Strategy::kTwoStage && stages_ != nullptr) {
    return CutFinalTwoStage(input, start, out);
  }
  if (executor_ != nullptr && stages_ != nullptr) {
    return CutFinalSpeculative(input, start, out);
  }
  return SelectUpTo(input, start, ~uint64_t{0}, out);
}

absl::StatusOr<std::vector<Chunk>> FastChunks(const ChunkerOptions& options,
                                              absl::Span<const uint8_t> data,
                                              const EngineOptions& engine) {
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(options, engine);
  if (!e.ok()) return e.status();
  std::vector<Chunk> chunks;
  Engine::Input input;
  input.data = data.data();
  input.size = data.size();
  input.offset = 0;
  input.at_end = true;
  (*e)->CutFinal(input, 0, &chunks);
  return chunks;
}

}  // namespace chunkd::chunking
