// FastCdcGroup (fastcdc_group.h): the filter plan, the scan into the
// candidate list, and the stream's buffers.

#include "chunking/fastcdc_group.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/fastcdc.h"
#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {
namespace {

// Half of the 48 bytes whose Gear hash decides bits 0..47 of W(p).
constexpr uint64_t kHashHalf = 24;
static_assert(kFastCdcMasks.back() >> 48 == 0, "masks lie below bit 48");

// Every set's filter, merged: a set whose masks share kFilterMinBits bits
// gives that intersection, another its two masks. A filter joins a merged
// one when what both keep has kFilterMinBits bits, or no fewer than the
// weaker of the two. Two merged filters per kernel run.
std::vector<std::array<uint64_t, 2>> PlanRuns(
    const std::vector<std::pair<uint64_t, uint64_t>>& masks) {
  std::vector<uint64_t> wanted;
  for (const auto& [s, l] : masks) {
    if (stage2::PopCount(s & l) >= FastCdcGroup::kFilterMinBits) {
      wanted.push_back(s & l);
    } else {
      wanted.push_back(s);
      wanted.push_back(l);
    }
  }
  std::vector<uint64_t> merged;
  for (uint64_t f : wanted) {
    bool joined = false;
    for (uint64_t& m : merged) {
      const int need = std::min({FastCdcGroup::kFilterMinBits,
                                 stage2::PopCount(m), stage2::PopCount(f)});
      if (stage2::PopCount(m & f) >= need) {
        m &= f;
        joined = true;
        break;
      }
    }
    if (!joined) merged.push_back(f);
  }
  std::vector<std::array<uint64_t, 2>> runs;
  for (size_t i = 0; i < merged.size(); i += 2) {
    runs.push_back({merged[i], merged[i + 1 < merged.size() ? i + 1 : i]});
  }
  return runs;
}

absl::Status CheckSets(const std::vector<ChunkerOptions>& sets) {
  if (sets.empty() || sets.size() > FastCdcGroup::kMaxSets) {
    return absl::InvalidArgumentError(
        absl::StrCat("a FastCDC group takes 1 to ", FastCdcGroup::kMaxSets,
                     " parameter sets, not ", sets.size()));
  }
  for (size_t i = 0; i < sets.size(); ++i) {
    if (sets[i].algorithm != Algorithm::kFastCdc) {
      return absl::InvalidArgumentError(absl::StrCat(
          "set ", i, ": algorithm ", AlgorithmName(sets[i].algorithm),
          "; a FastCDC group takes fastcdc sets only"));
    }
    if (absl::Status s = ValidateOptions(sets[i]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("set ", i, ": ", s.message()));
    }
    if (sets[i].seed != sets[0].seed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "set ", i, ": seed ", sets[i].seed, " differs from set 0's seed ",
          sets[0].seed, "; the sets of a FastCDC group share the Gear table"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const kernels::KernelSet*> KernelFor(
    const EngineOptions& engine) {
  if (engine.kernel != nullptr) {
    if (!engine.kernel->supported()) {
      return absl::FailedPreconditionError(
          absl::StrCat("kernel set \"", engine.kernel->name,
                       "\" is not supported by this CPU or OS"));
    }
    return engine.kernel;
  }
  absl::StatusOr<const kernels::KernelSet*> forced = kernels::ForcedKernelSet();
  if (!forced.ok() || *forced != nullptr) return forced;
  return &kernels::BestKernelSet();
}

}  // namespace

// The selector's bit source for one set: the first candidate in [lo, hi)
// whose hash passes the set's mask_s (kFirst) or mask_l (kSecond). Queries
// of one set come with non-decreasing lo, so its cursor only moves forward.
class FastCdcGroup::ListSource {
 public:
  ListSource(const FastCdcGroup& group, Set& set)
      : list_(group.candidates_.data()),
        first_(group.dropped_),
        end_(group.dropped_ + group.candidates_.size()),
        set_(set) {}

  uint64_t FindFirst(int which, uint64_t lo, uint64_t hi) {
    const uint64_t mask =
        which == stage2::kFirst ? set_.params.mask_s : set_.params.mask_l;
    uint64_t k = set_.cursor;
    while (k < end_ && list_[k - first_].pos < lo) ++k;
    set_.cursor = k;
    for (; k < end_ && list_[k - first_].pos < hi; ++k) {
      if ((list_[k - first_].hash & mask) == 0) return list_[k - first_].pos;
    }
    return hi;
  }

 private:
  const Candidate* const list_;
  const uint64_t first_;
  const uint64_t end_;
  Set& set_;
};

absl::StatusOr<std::unique_ptr<FastCdcGroup>> FastCdcGroup::Create(
    const std::vector<ChunkerOptions>& sets, const EngineOptions& engine) {
  if (absl::Status s = CheckSets(sets); !s.ok()) return s;
  absl::StatusOr<const kernels::KernelSet*> kernel = KernelFor(engine);
  if (!kernel.ok()) return kernel.status();
  return std::unique_ptr<FastCdcGroup>(new FastCdcGroup(sets, *kernel));
}

FastCdcGroup::FastCdcGroup(const std::vector<ChunkerOptions>& sets,
                           const kernels::KernelSet* kernel)
    : kernel_(kernel) {
  std::vector<std::pair<uint64_t, uint64_t>> masks;
  for (const ChunkerOptions& o : sets) {
    const FastCdcCutter cutter(o.min_size, o.avg_size, o.max_size,
                               o.normalization_level, o.seed);
    gear_ = cutter.gear();  // the same for every set: one seed
    Set set;
    set.params.min_size = o.min_size;
    set.params.avg_size = o.avg_size;
    set.params.max_size = o.max_size;
    set.params.mask_s = cutter.mask_s();
    set.params.mask_l = cutter.mask_l();
    sets_.push_back(set);
    masks.emplace_back(cutter.mask_s(), cutter.mask_l());
    max_size_ = std::max<size_t>(max_size_, o.max_size);
  }
  for (Set& set : sets_) set.params.gear = gear_.data();
  runs_ = PlanRuns(masks);
  in_place_min_ = 2 * (max_size_ + 64);
  bits_[0].resize(kernels::BitmapWords(kScanBlock));
  bits_[1].resize(2 * kernels::BitmapWords(kScanBlock));
}

FastCdcGroup::~FastCdcGroup() = default;

void FastCdcGroup::Append(absl::string_view piece,
                          std::vector<std::vector<Chunk>>* out) {
  if (finished_) return;  // REQUIRES violated; ignore rather than abort.
  out->resize(sets_.size());
  piece_ = View();
  const auto* bytes = reinterpret_cast<const uint8_t*>(piece.data());
  bytes_in_ += piece.size();
  if (piece.size() >= in_place_min_) {
    AppendInPlace(bytes, piece.size(), out);
    return;
  }
  Compact(/*force=*/false);
  buffer_.insert(buffer_.end(), bytes, bytes + piece.size());
  Process(View{buffer_.data(), buffer_.size(), base_}, /*drain=*/false,
          /*at_end=*/false, out);
}

void FastCdcGroup::Finish(std::vector<std::vector<Chunk>>* out) {
  if (finished_) return;
  finished_ = true;
  out->resize(sets_.size());
  piece_ = View();
  Compact(/*force=*/false);
  Process(View{buffer_.data(), buffer_.size(), base_}, /*drain=*/true,
          /*at_end=*/true, out);
}

// The buffered bytes and the piece's first bytes (the junction), scanned to
// their end, the junction doubling until every set's chunks that start
// before the piece are cut (at max_size + 64 bytes they all are). Then the
// piece where it lies, from a scan at least 64 bytes into it, so that
// nothing reads before it; its tail becomes the buffer.
void FastCdcGroup::AppendInPlace(const uint8_t* bytes, size_t size,
                                 std::vector<std::vector<Chunk>>* out) {
  Compact(/*force=*/true);
  const uint64_t piece_base = base_ + buffer_.size();
  size_t copied = 0;
  for (;;) {
    const size_t next = std::min(size, std::max(kJunctionMin, 2 * copied));
    buffer_.insert(buffer_.end(), bytes + copied, bytes + next);
    copied = next;
    Process(View{buffer_.data(), buffer_.size(), base_}, /*drain=*/true,
            /*at_end=*/false, out);
    if (KeepFrom() >= piece_base || copied == size) break;
  }
  piece_ = View{bytes, size, piece_base};
  Process(piece_, /*drain=*/false, /*at_end=*/false, out);
  // The junction stays readable for ChunkData until the next call.
  std::swap(junction_, buffer_);
  junction_base_ = base_;
  base_ = KeepFrom();
  buffer_.assign(bytes + (base_ - piece_base), bytes + size);
}

void FastCdcGroup::Process(const View& view, bool drain, bool at_end,
                           std::vector<std::vector<Chunk>>* out) {
  const uint64_t end = view.base + view.size;
  for (;;) {
    const bool scan =
        scanned_ < end && (drain || at_end || end - scanned_ >= kScanMin);
    if (scan) {
      const uint64_t stop = std::min<uint64_t>(end, scanned_ + kScanBlock);
      Scan(view, scanned_, stop);
      scanned_ = stop;
    }
    SelectAll(view, at_end, out);
    if (!scan) break;
  }
}

void FastCdcGroup::Scan(const View& view, uint64_t begin, uint64_t end) {
  const size_t b = static_cast<size_t>(begin - view.base);
  const size_t e = static_cast<size_t>(end - view.base);
  const size_t words = kernels::BitmapWords(e - b);
  uint64_t* const acc = bits_[0].data();
  uint64_t* const scratch = bits_[1].data();  // two bitmaps' room
  // The union of every filter's bits: the first run writes acc, later runs
  // scratch, ORed in.
  for (size_t r = 0; r < runs_.size(); ++r) {
    const kernels::GearParams params{gear_.data(), runs_[r][0], runs_[r][1]};
    const bool same = runs_[r][0] == runs_[r][1];
    if (r == 0) {
      kernel_->fastcdc(view.data, b, e, params, acc, scratch);
      if (!same) {
        for (size_t w = 0; w < words; ++w) acc[w] |= scratch[w];
      }
      continue;
    }
    kernel_->fastcdc(view.data, b, e, params, scratch, scratch + words);
    for (size_t w = 0; w < words; ++w) {
      acc[w] |= scratch[w] | (same ? 0 : scratch[words + w]);
    }
  }
  for (size_t w = 0; w < words; ++w) {
    uint64_t x = acc[w];
    while (x != 0) {
      const uint64_t p = begin + 64 * w + stage2::CountTrailingZeros(x);
      x &= x - 1;
      candidates_.push_back(Candidate{p, HashAt(view, p)});
    }
  }
}

// Only bits 0..47 of W(p) are ever tested (every kFastCdcMasks entry lies
// below bit 48), and bit k depends on the last k + 1 bytes only: so the 48
// bytes ending at p suffice, rolled in two independent halves joined by a
// shift, or rolled on from the last candidate when it is close.
uint64_t FastCdcGroup::HashAt(const View& view, uint64_t p) {
  const uint8_t* const d = view.data - view.base;  // indexed by position
  uint64_t h;
  if (have_last_ && last_.pos < p && p - last_.pos <= kHashHalf) {
    h = last_.hash;
    for (uint64_t q = last_.pos + 1; q <= p; ++q) h = (h << 1) + gear_[d[q]];
  } else {
    const uint64_t from = p >= 2 * kHashHalf - 1 ? p - (2 * kHashHalf - 1) : 0;
    const uint64_t mid = p + 1 > kHashHalf ? p + 1 - kHashHalf : 0;
    uint64_t hi = 0, lo = 0;
    for (uint64_t q = from; q < mid; ++q) hi = (hi << 1) + gear_[d[q]];
    for (uint64_t q = mid; q <= p; ++q) lo = (lo << 1) + gear_[d[q]];
    h = (hi << (p + 1 - mid)) + lo;
  }
  have_last_ = true;
  last_ = Candidate{p, h};
  return h;
}

// A chunk is cut as soon as its cut is decided: from max_size scanned
// bytes on, or at the stream's end, whatever the selector answers; before,
// when the selector, given the avail scanned bytes, finds a cut before the
// last pair it examines. That cut is the final one: with more bytes the
// restart is the same, the strict region [m + 64, c) ends at avg_size or
// later (with fewer than avg_size, at the end of what was examined), and
// the loose region only grows at its end; the first hit in a prefix is the
// first hit in all of it.
void FastCdcGroup::SelectAll(const View& view, bool at_end,
                             std::vector<std::vector<Chunk>>* out) {
  const uint64_t end = view.base + view.size;
  const bool whole = at_end && scanned_ == end;  // the stream ends there
  for (size_t i = 0; i < sets_.size(); ++i) {
    Set& set = sets_[i];
    while (set.start < scanned_) {
      const size_t avail = static_cast<size_t>(scanned_ - set.start);
      const bool decided = whole || avail >= set.params.max_size;
      if (!decided && avail <= set.params.min_size) break;
      ListSource source(*this, set);
      const stage2::Cut cut =
          stage2::SelectFastCdc(set.params, view.data + (set.start - view.base),
                                set.start, avail, source);
      if (!decided && cut.length >= (avail & ~size_t{1})) break;
      (*out)[i].push_back(
          Chunk{set.start, static_cast<uint32_t>(cut.length), cut.hash});
      set.start += cut.length;
    }
  }
}

uint64_t FastCdcGroup::KeepFrom() const {
  uint64_t keep = scanned_ >= 63 ? scanned_ - 63 : 0;
  for (const Set& set : sets_) keep = std::min(keep, set.start);
  return keep;
}

void FastCdcGroup::Compact(bool force) {
  const uint64_t keep = KeepFrom();
  const size_t drop = static_cast<size_t>(keep - base_);
  if (force || drop >= buffer_.size() - drop) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + drop);
    base_ = keep;
  }
  uint64_t cursor = dropped_ + candidates_.size();
  for (const Set& set : sets_) cursor = std::min(cursor, set.cursor);
  const size_t unused = static_cast<size_t>(cursor - dropped_);
  if (force || unused >= candidates_.size() - unused) {
    candidates_.erase(candidates_.begin(), candidates_.begin() + unused);
    dropped_ = cursor;
  }
}

absl::string_view FastCdcGroup::ChunkData(const Chunk& chunk) const {
  for (const View& v :
       {piece_, View{buffer_.data(), buffer_.size(), base_},
        View{junction_.data(), junction_.size(), junction_base_}}) {
    if (v.data != nullptr && chunk.offset >= v.base &&
        chunk.offset + chunk.length <= v.base + v.size) {
      return absl::string_view(
          reinterpret_cast<const char*>(v.data) + (chunk.offset - v.base),
          chunk.length);
    }
  }
  return absl::string_view();
}

size_t FastCdcGroup::memory_bytes() const {
  return buffer_.capacity() + junction_.capacity() +
         candidates_.capacity() * sizeof(Candidate) +
         (bits_[0].capacity() + bits_[1].capacity()) * sizeof(uint64_t) +
         sets_.capacity() * sizeof(Set);
}

}  // namespace chunkd::chunking
