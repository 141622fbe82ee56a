// FastCdcGroup: several FastCDC parameter sets cut from one stream in one
// pass (the Estimator's; docs/design.md, "Estimate: one pass over several
// FastCDC sets").
//
// Why one pass is enough: the windowed Gear hash W(p) of every position
// (kernels/functions.h) is the same for every set with the same seed; only
// the masks differ, and stage 2 (stage2.h, SelectFastCdc) needs nothing but
// "the first position in [lo, hi) whose W(p) passes mask_s (or mask_l)".
// So W(p) is computed once per position, by the fastcdc stage-1 kernel of
// the chosen kernel set run as a filter: instead of a set's two masks it
// tests the bits that the masks of several sets share, which every
// position passing any of their masks passes too. The masks of averages of
// 1 KiB and up share at least 10 bits (kFastCdcMasks), so the filter keeps
// about one position in a thousand, and the kernel runs its sparse path.
// For each position the filter keeps, W(p) is recomputed from its last 48
// bytes (no mask has a bit at 48 or above; or rolled on from the previous
// candidate when it is closer) and stored with the position in a candidate
// list. Each set then runs the fastcdc stage-2
// selector with a source that walks the list with the set's own cursor and
// tests the set's own masks: exactly the bitmaps' first set bit, so exactly
// ReferenceChunks' cuts and hashes.
//
// Sets whose two masks share fewer than kFilterMinBits bits (averages below
// 1 KiB at high levels) contribute both masks as filters; filters are
// merged while the merged filter keeps kFilterMinBits bits, and the kernel
// tests two filters per run over the data.
//
// The stream is scanned in blocks of kScanBlock bytes, and after each block
// every set cuts the chunks whose cut is decided, while their bytes are in
// cache: a chunk is decided once max_size bytes from its start are scanned,
// or the stream ends — or earlier, when the selector finds a cut before the
// scanned end (fastcdc_group.cc says why that cut is final). A piece of at least 2 * (max(max_size) + 64) bytes is
// cut where it lies: only its first bytes, until the chunks that started
// before it are cut (kJunctionMin, doubling, at most max(max_size) + 64),
// and its tail from the slowest set's chunk in progress on are copied.
// Smaller pieces are gathered in a buffer.
//
// Memory (memory_bytes()): the buffer — the slowest set's chunk in progress
// (< max(max_size)), up to kScanMin bytes not yet scanned, 63 bytes of
// window and the pieces appended since the last compaction (at most as many
// bytes again) — a copy of the last large piece's first bytes, the
// candidates of the positions between the slowest set's chunk start and
// the end of the scan (16 bytes each; one in ~1000 positions on varied
// data, on constant data possibly every position), and three bitmaps of
// kScanBlock bits. Independent of the stream's length.
//
// Cost: the filter is most of it (the kernel scans every byte; the
// selectors and candidates add about a fifth); fastcdc_group_bench compares
// it with separate StreamChunker passes.
//
// Thread safety: not thread-safe (one stream, one thread at a time); copy
// and move disabled. One thread always: EngineOptions::executor, strategy,
// segment_size and window_size are ignored.
#ifndef CHUNKD_CHUNKING_FASTCDC_GROUP_H_
#define CHUNKD_CHUNKING_FASTCDC_GROUP_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {

class FastCdcGroup {
 public:
  // At most this many sets.
  static constexpr size_t kMaxSets = 16;
  // A filter keeps this many mask bits at least when it can (about one
  // position in 2^kFilterMinBits passes it on varied data).
  static constexpr int kFilterMinBits = 10;
  // Positions scanned per kernel run, and the fewest pending positions a run
  // waits for before the stream's end.
  static constexpr size_t kScanBlock = size_t{64} << 10;
  static constexpr size_t kScanMin = size_t{16} << 10;
  // The first bytes of a large piece copied to cut the chunks that started
  // before it (doubled until they are cut).
  static constexpr size_t kJunctionMin = size_t{16} << 10;

  // sets: 1 to kMaxSets fastcdc options, all with the same seed, each valid
  // (ValidateOptions); INVALID_ARGUMENT otherwise, naming the set ("set 2:
  // ..."). engine.kernel: the kernel set of the filter (FAILED_PRECONDITION
  // when this CPU cannot run it); nullptr: CHUNKD_BACKEND's when set (its
  // error when unknown or unsupported), else the best this CPU supports.
  // The rest of EngineOptions is ignored (one thread).
  static absl::StatusOr<std::unique_ptr<FastCdcGroup>> Create(
      const std::vector<ChunkerOptions>& sets, const EngineOptions& engine);

  FastCdcGroup(const FastCdcGroup&) = delete;
  FastCdcGroup& operator=(const FastCdcGroup&) = delete;
  ~FastCdcGroup();

  // Feeds the next piece of the stream; appends to (*out)[i] the chunks of
  // set i that became final (out is resized to the number of sets). For
  // every set, the chunks of all calls together are ReferenceChunks(set,
  // stream), whatever the split into pieces. ChunkData() may point into
  // `piece`: the caller keeps its bytes unchanged until the next call.
  // REQUIRES: Finish() not yet called (later calls are ignored).
  void Append(absl::string_view piece, std::vector<std::vector<Chunk>>* out);

  // Ends the stream: appends every set's remaining chunks.
  void Finish(std::vector<std::vector<Chunk>>* out);

  // The bytes of a chunk (of any set) emitted by the last Append() or
  // Finish(); valid until the next call.
  absl::string_view ChunkData(const Chunk& chunk) const;

  // Bytes fed so far.
  uint64_t bytes_in() const { return bytes_in_; }

  // The bytes this group holds now (buffers, candidates, bitmaps).
  size_t memory_bytes() const;

  // The kernel set the filter runs on ("scalar", "avx2", "avx512").
  const char* kernel_name() const { return kernel_->name; }

  // The filters' kernel runs per scanned block: 1 when the sets' masks
  // share kFilterMinBits bits (all averages of 1 KiB and up).
  size_t kernel_runs_per_block() const { return runs_.size(); }

 private:
  // A position the filter kept and its W(p).
  struct Candidate {
    uint64_t pos;
    uint64_t hash;
  };
  // One set: its selector's parameters, where its next chunk starts and
  // its cursor in the candidate list (an absolute candidate number).
  struct Set {
    stage2::FastCdcParams params;
    uint64_t start = 0;
    uint64_t cursor = 0;
  };
  // Bytes of stream positions [base, base + size) at data.
  struct View {
    const uint8_t* data = nullptr;
    size_t size = 0;
    uint64_t base = 0;
  };
  class ListSource;

  FastCdcGroup(const std::vector<ChunkerOptions>& sets,
               const kernels::KernelSet* kernel);

  // Scans and cuts `view` (the bytes from the keep point on): blocks of
  // kScanBlock while at least kScanMin bytes are unscanned (all of them when
  // `drain` or `at_end`), each followed by every set's final chunks.
  void Process(const View& view, bool drain, bool at_end,
               std::vector<std::vector<Chunk>>* out);
  // Runs the filter over positions [begin, end) and lists its candidates.
  void Scan(const View& view, uint64_t begin, uint64_t end);
  // W(p) of a candidate at p (functions.h), from `view`.
  uint64_t HashAt(const View& view, uint64_t p);
  // Cuts the final chunks of every set whose bits are scanned.
  void SelectAll(const View& view, bool at_end,
                 std::vector<std::vector<Chunk>>* out);
  // The first stream position still needed: the slowest set's chunk start
  // or the window before the scan's end.
  uint64_t KeepFrom() const;
  // Drops buffered bytes before KeepFrom() when they are at least as many as
  // the bytes kept (`force`: always), and the candidates no cursor needs.
  void Compact(bool force);
  void AppendInPlace(const uint8_t* bytes, size_t size,
                     std::vector<std::vector<Chunk>>* out);

  const kernels::KernelSet* const kernel_;
  std::array<uint64_t, 256> gear_;
  std::vector<Set> sets_;
  // The filters' kernel runs: the masks of each (GearParams' mask_s, mask_l).
  std::vector<std::array<uint64_t, 2>> runs_;
  size_t max_size_ = 0;      // the largest max_size of the sets
  size_t in_place_min_ = 0;  // pieces this long are cut where they lie

  // Gathered bytes: stream positions [base_, base_ + buffer_.size()).
  std::vector<uint8_t> buffer_;
  uint64_t base_ = 0;
  // The last large piece, cut in place, and the copy of its first bytes
  // (stream positions [junction_base_, ...)) that the chunks before it were
  // cut from; both only for ChunkData until the next call.
  View piece_;
  std::vector<uint8_t> junction_;
  uint64_t junction_base_ = 0;

  // Positions [0, scanned_) are scanned; candidates_[k] is candidate number
  // dropped_ + k.
  uint64_t scanned_ = 0;
  std::vector<Candidate> candidates_;
  uint64_t dropped_ = 0;
  bool have_last_ = false;  // the last candidate found, to roll W(p) on
  Candidate last_{0, 0};
  std::vector<uint64_t> bits_[2];

  uint64_t bytes_in_ = 0;
  bool finished_ = false;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_FASTCDC_GROUP_H_
