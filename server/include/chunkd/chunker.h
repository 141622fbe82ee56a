// chunkd chunking library: content-defined chunking of byte streams.
//
// A chunker cuts a byte stream into chunks [offset, offset + length) that cover
// every byte exactly once. Each algorithm (docs/design.md, "Chunking algorithms") has a scalar,
// sequential reference implementation, `ReferenceChunks`, which *is* the
// specification: every faster path (StreamChunker, any backend, any thread
// count, any way the stream is split into pieces) must return the identical
// list of chunks.
//
// The fast paths, FastChunks (a whole buffer) and StreamChunker (a stream in
// pieces), run the engine of docs/design.md, "The two-stage engine" (chunking/engine.h): stage 1
// computes per-byte candidate bitmaps with a SIMD kernel (scalar, avx2,
// avx512), in segments spread over an Executor's threads; stage 2 picks the
// cut points from them with the reference's exact rules. EngineOptions
// choose the kernel, the executor, the segment and window sizes and the
// strategy; none of them changes the chunks.
//
// The algorithms, each with its paper or upstream library, the parameters
// it reads, their ranges and defaults, are declared once in the table
// proto/chunkd/v1/tables.json, which the build turns into chunkd/tables.h
// (enum Algorithm, with each algorithm's description, and the named bounds).
//
// Thread safety: free functions are thread-safe. A StreamChunker is not: one
// stream, one thread at a time.
#ifndef CHUNKD_CHUNKER_H_
#define CHUNKD_CHUNKER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunkd/tables.h"  // enum Algorithm, generated from the table

namespace chunkd::chunking {

namespace kernels {
struct KernelSet;  // chunking/kernels/kernels.h: one instruction set's stage 1
}  // namespace kernels
class Executor;  // chunking/executor.h: runs stage-1 segments in parallel

// Every algorithm, in the table's order.
const std::vector<Algorithm>& AllAlgorithms();

// The algorithm's name in the table ("fastcdc", ...); "unknown" for a value
// that is not an algorithm.
absl::string_view AlgorithmName(Algorithm algorithm);

// Parses a name as returned by AlgorithmName. INVALID_ARGUMENT names the
// accepted values.
absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name);

enum class SeqMode : int {
  kIncreasing = 1,
  kDecreasing = 2,
};

// Parameters of a chunking function. Sizes in bytes.
struct ChunkerOptions {
  Algorithm algorithm = Algorithm::kFastCdc;
  // Smallest chunk except the last. Default: per algorithm (DefaultOptions).
  // fastcdc: as in the crate, the scan starts at min_size rounded down to
  // even, so with an odd min_size a chunk can be min_size - 1 bytes long.
  // fixed: ignored (every chunk but the last is avg_size bytes).
  uint32_t min_size = 0;
  // Target average chunk size; for fixed, the size of every chunk but the last.
  // A power of two for crc32. fastcdc uses round(log2(avg_size)) mask bits
  // like the crate; seqcdc does not use it for cutting.
  uint32_t avg_size = 0;
  // Largest chunk. fixed: ignored.
  uint32_t max_size = 0;
  // fastcdc: normalization level 0..3. Default 1.
  uint32_t normalization_level = kFastCdcNormalizationLevelDefault;
  // fastcdc: XORed into every Gear table entry. Default 0.
  uint64_t seed = 0;
  // seqcdc: direction of the run that makes a cut. Default increasing.
  SeqMode seq_mode = SeqMode::kIncreasing;
  // seqcdc: monotonic steps that make a cut point. Default 5.
  uint32_t seq_length = kSeqCdcSeqLengthDefault;
  // seqcdc: opposing steps that trigger a jump. Default 50.
  uint32_t skip_trigger = kSeqCdcSkipTriggerDefault;
  // seqcdc: bytes skipped by a jump. Default 512.
  uint32_t skip_size = kSeqCdcSkipSizeDefault;
  // repmaxcdc: how far past min_size the best cut is looked for (REAPI's
  // horizon_size_bytes); 0 gives chunks of min_size. Default 8 * 256 KiB.
  uint32_t horizon_size = kRepMaxCdcHorizonSizeDefault;
  // rabin: the irreducible polynomial of degree 53 over GF(2), bit i the
  // coefficient of x^i (restic's Pol). Default 0x3DA3358B4DC173, the one of
  // restic's own tests: a restic repository's is in its config file.
  uint64_t polynomial = kRabinPolynomialDefault;
};

// The allowed range of one parameter and its default.
struct ParamRange {
  uint64_t min = 0;
  uint64_t max = 0;
  uint64_t default_value = 0;
};

// What an algorithm accepts. Validated in every build: the parameters arrive
// over the network.
struct AlgorithmLimits {
  ParamRange min_size;
  ParamRange avg_size;
  ParamRange max_size;
  bool avg_power_of_two = false;
  ParamRange normalization_level;  // fastcdc only; {0, 0, 0} elsewhere
  ParamRange seq_length;           // seqcdc only
  ParamRange skip_trigger;         // seqcdc only
  ParamRange skip_size;            // seqcdc only
  ParamRange horizon_size;         // repmaxcdc only
  // rabin only: degree 53, i.e. [2^53, 2^54), and irreducible.
  ParamRange polynomial;
};

const AlgorithmLimits& LimitsFor(Algorithm algorithm);

// The parameters `algorithm` reads, by their API names, in the API's order
// (the table's "parameters" of the algorithm). Every other field a caller
// sets would be ignored, so callers refuse it (the server with
// INVALID_ARGUMENT, chunkctl as a usage error).
const std::vector<absl::string_view>& ParametersOf(Algorithm algorithm);
bool TakesParameter(Algorithm algorithm, absl::string_view parameter);
// Every parameter name, in the API's order.
const std::vector<absl::string_view>& AllParameters();

// The algorithm's default parameters (the table's defaults; docs/design.md,
// "Parameters, ranges and defaults"); the fields the algorithm does not read
// keep ChunkerOptions' defaults.
ChunkerOptions DefaultOptions(Algorithm algorithm);

// The named presets of the table ("seqcdc-16k", "fastcdc-reapi", ...): an
// algorithm and its parameters. NOT_FOUND for an unknown name, naming the
// presets.
absl::StatusOr<ChunkerOptions> Preset(absl::string_view name);

// OK when `options` is within LimitsFor(options.algorithm) and consistent
// (min <= avg <= max, ...). Otherwise INVALID_ARGUMENT whose message names the
// field as in the proto (`min_size`, `avg_size`, `max_size`,
// `normalization_level`, ...), its value and the allowed range.
absl::Status ValidateOptions(const ChunkerOptions& options);

// One chunk: bytes [offset, offset + length) of the stream.
struct Chunk {
  uint64_t offset = 0;
  uint32_t length = 0;
  // The algorithm's rolling hash at the cut, or 0 where it has none; what
  // it is for each algorithm: the Algorithm enumerator's comment.
  uint64_t hash = 0;

  friend bool operator==(const Chunk& a, const Chunk& b) {
    return a.offset == b.offset && a.length == b.length && a.hash == b.hash;
  }
  friend bool operator!=(const Chunk& a, const Chunk& b) { return !(a == b); }
};

// The specification: cuts the whole stream `data` sequentially, byte by byte.
// REQUIRES: ValidateOptions(options).ok(); invalid options yield no chunks.
std::vector<Chunk> ReferenceChunks(const ChunkerOptions& options,
                                   absl::Span<const uint8_t> data);

// How the engine finds cut points (docs/design.md, "Strategies"). Every strategy returns
// exactly ReferenceChunks(); they differ only in speed.
enum class Strategy : int {
  // The fastest of the others for the algorithm, the kernel and the
  // executor's parallelism (the rule and the measurements behind it:
  // chunking/engine.h).
  kAuto = 0,
  // SS-CDC: stage 1 computes the algorithm's candidate bitmaps for a whole
  // window of input, in segments fanned across the executor; stage 2 selects
  // the cut points sequentially from the bitmaps.
  kTwoStage = 1,
  // For each chunk, stage 1 runs on short blocks starting at the chunk's
  // minimum size until stage 2 finds the cut, so the bytes that FastCDC and
  // SeqCDC skip are never read. With several threads, segments of the input
  // are cut speculatively in parallel (engine.h: "speculative segments").
  kSequentialScan = 2,
  // The reference cutter itself (no stage-1 kernel), with several threads in
  // speculative segments like kSequentialScan.
  kReference = 3,
};

// "auto", "two-stage", "sequential", "reference".
absl::string_view StrategyName(Strategy strategy);

// Parses a name as returned by StrategyName. INVALID_ARGUMENT names the
// accepted values.
absl::StatusOr<Strategy> ParseStrategy(absl::string_view name);

// Bounds of EngineOptions::segment_size and window_size (when not 0).
inline constexpr size_t kMinSegmentSize = 64;
inline constexpr size_t kMaxSegmentSize = size_t{64} << 20;
inline constexpr size_t kMaxWindowSize = size_t{1} << 30;

// How the fast paths (FastChunks, StreamChunker) run. None of these settings
// changes the chunks.
struct EngineOptions {
  // The stage-1 kernel (kernels::AllKernelSets(), kernels::FindKernelSet()); must
  // be supported by this CPU. Default nullptr: CHUNKD_BACKEND's when set
  // (kernels::ForcedKernelSet()), else the automatic kernel of the algorithm on
  // the executor's thread count, the fastest on this CPU as calibrated once
  // per process (chunking/auto_kernel.h; AutoKernel).
  const kernels::KernelSet* kernel = nullptr;
  // Runs stage-1 segments in parallel; must outlive every chunker created
  // with it. Default nullptr: the calling thread does everything.
  Executor* executor = nullptr;
  // Bytes of input per task, in [kMinSegmentSize, kMaxSegmentSize]: a
  // stage-1 segment of the two-stage strategy (rounded up to a multiple of
  // 64, at most the window), a speculative segment of the others. Default 0:
  // automatic — two-stage: the window divided by the thread count, at least
  // 64 KiB, shortened near the input's end so that the threads finish
  // together; speculative: the input split evenly, at most 4 MiB each.
  size_t segment_size = 0;
  // How many bytes StreamChunker gathers before it runs the engine (1 makes
  // it cut on every Append), and how far the two-stage strategy computes
  // stage 1 ahead of the chunk in progress (at least 64 KiB when the input
  // has them). In [1, kMaxWindowSize].
  // Default 0: automatic, 1 MiB per thread of the executor, at least 2 MiB
  // and at most 8 MiB.
  size_t window_size = 0;
  // Default kAuto.
  Strategy strategy = Strategy::kAuto;
};

// What an engine built from EngineOptions does, defaults resolved.
struct EnginePlan {
  std::string kernel;                   // "scalar", "avx2", "avx512"
  Strategy strategy = Strategy::kAuto;  // never kAuto
  size_t parallelism = 1;
  // The segment size (automatic: the window divided by the thread count, at
  // least 64 KiB; see EngineOptions::segment_size).
  size_t segment_size = 0;
  bool segment_auto = false;  // segment_size was 0
  size_t window_size = 0;
};

// The plan for `options` and `engine`. INVALID_ARGUMENT as ValidateOptions or
// for engine settings out of range; the error of kernels::ForcedKernelSet()
// (CHUNKD_BACKEND) when no kernel is given; FAILED_PRECONDITION for a kernel
// this CPU cannot run.
absl::StatusOr<EnginePlan> PlanEngine(
    const ChunkerOptions& options,
    const EngineOptions& engine = EngineOptions());

// The whole buffer at once, with the fast engine: exactly
// ReferenceChunks(options, data). Errors as PlanEngine.
absl::StatusOr<std::vector<Chunk>> FastChunks(
    const ChunkerOptions& options, absl::Span<const uint8_t> data,
    const EngineOptions& engine = EngineOptions());

// Cuts a stream that arrives in pieces of any size with the fast engine,
// emitting chunks once they are final. Produces exactly ReferenceChunks() of
// the concatenated pieces, for any split into pieces and any EngineOptions.
//
// When chunks come out: a chunk is final once max_size bytes from its start
// have arrived (no algorithm looks further, except repmaxcdc: 2 * min_size +
// horizon_size) or at Finish(). The chunker runs
// the engine when at least window_size bytes have arrived since its last run,
// for every piece of at least 4 * (256 + max_size) bytes, and at Finish();
// each run emits every final chunk. So a final chunk is
// emitted at the latest window_size bytes after it became final, and with
// window_size 1 at once.
//
// Copies: a piece of at least 4 * (256 + max_size) bytes that the engine runs
// on is cut where it lies; only its first and last 256 + max_size bytes (at
// most) are copied. Smaller pieces are copied into the buffer.
//
// Memory: the buffer holds a left context of 256 bytes, the chunk in progress
// (< max_size bytes), the bytes that arrived since the engine last ran
// (< window_size, plus the piece being appended). Bytes already cut are
// dropped lazily — only once they are at least as many as the bytes kept — so
// that every byte is moved O(1) times however small the pieces. The chunker's
// own byte buffers (the buffer, and the one kept for ChunkData over a piece
// cut in place) total at most
//   2 * (256 + max_size + window_size) + 4 * (256 + max_size) + window_size
// bytes whatever the size of the pieces (fixed: avg_size for max_size). The
// two-stage strategy keeps its bitmaps in a ring of words that holds the
// chunk in progress, the bits computed ahead of it (max(window_size, 64 KiB))
// and a segment being written (at most that much again), rounded up to a
// power of two: less than (2 * max(window_size, 64 KiB) + max_size + 512) / 2
// bytes (crc32: half of it). The sequential-scan strategy needs 16 KiB of bitmaps
// per thread instead, the reference strategy none; with an executor, both
// keep the chunks found in one round of speculative segments (at most 4 MiB
// per thread, one Chunk per min_size bytes).
//
// Thread safety: not thread-safe; copy and move disabled. Several chunkers may
// share one Executor.
class StreamChunker {
 public:
  // With EngineOptions(): the default kernel, one thread. INVALID_ARGUMENT
  // as ValidateOptions; the error of kernels::ForcedKernelSet() when
  // CHUNKD_BACKEND names an unknown or unsupported kernel.
  static absl::StatusOr<std::unique_ptr<StreamChunker>> Create(
      const ChunkerOptions& options);
  // Errors as PlanEngine.
  static absl::StatusOr<std::unique_ptr<StreamChunker>> Create(
      const ChunkerOptions& options, const EngineOptions& engine);

  StreamChunker(const StreamChunker&) = delete;
  StreamChunker& operator=(const StreamChunker&) = delete;
  ~StreamChunker();

  // Feeds the next piece of the stream and appends the chunks that became
  // final to *out. Their bytes are readable through ChunkData() until the next
  // call of Append() or Finish(); ChunkData() may point into `piece` itself,
  // so the caller keeps the piece's bytes unchanged until then.
  // REQUIRES: Finish() not yet called.
  void Append(absl::string_view piece, std::vector<Chunk>* out);

  // Ends the stream: appends the remaining chunks to *out.
  // REQUIRES: Finish() not yet called (later calls of Append() and Finish()
  // are ignored).
  void Finish(std::vector<Chunk>* out);

  // The bytes of a chunk emitted by the last Append() or Finish().
  absl::string_view ChunkData(const Chunk& chunk) const;

  // The bytes fed but not yet part of an emitted chunk: from the end of the
  // last emitted chunk to the end of the input. Valid until the next call of
  // Append() or Finish(). (RapidCDC takes them over when it stops cutting.)
  absl::string_view Pending() const;

  // Total bytes fed so far.
  uint64_t bytes_in() const;

  const ChunkerOptions& options() const;

  // The engine's settings, defaults resolved.
  const EnginePlan& plan() const;

 private:
  class Impl;
  explicit StreamChunker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKER_H_
