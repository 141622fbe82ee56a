#include "chunking/repmaxcdc.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "chunking/fastcdc.h"

namespace chunkd::chunking {

namespace repmaxcdc {

namespace {

const uint64_t* Gear() { return FastCdcGearTable().data(); }

// W of chunk byte q - 1, from the 63 bytes before q (q >= 63): rolling on
// from there gives W(q).
uint64_t WarmUp(const uint64_t* gear, const uint8_t* chunk, size_t q) {
  uint64_t h = 0;
  for (size_t i = q - (kWindow - 1); i < q; ++i) h = (h << 1) + gear[chunk[i]];
  return h;
}

}  // namespace

Peak ScanPeak(const uint8_t* chunk, size_t lo, size_t hi) {
  const uint64_t* const gear = Gear();
  uint64_t h = (WarmUp(gear, chunk, lo) << 1) + gear[chunk[lo]];
  uint64_t best = h;
  size_t at = lo;
  for (size_t q = lo + 1; q <= hi; ++q) {
    h = (h << 1) + gear[chunk[q]];
    // Strictly larger: the first occurrence wins, as in go-cdc. Without a
    // branch: over a range this short (at most 64 positions in stage 2) the
    // ln 64 = 4.2 new maxima would each be a mispredicted one.
    const bool larger = h > best;
    best = larger ? h : best;
    at = larger ? q : at;
  }
  return Peak{best, at};
}

size_t CutFromPeaks(const PeakWalk& walk) {
  const size_t lo = walk.min_size - 1;
  const std::vector<Peak>& records = *walk.records;
  // records[0, kept) lie before the group of the current restriction's end;
  // the ends only decrease, so `kept` does too.
  size_t kept = records.size();
  // The first largest W over [lo, hi]: the prefix maximum before hi's group
  // against the part of that group up to hi, hashed again.
  const auto peak_up_to = [&](size_t hi) {
    if (hi < walk.g0) return ScanPeak(walk.chunk, lo, hi);
    const size_t group = walk.g0 + (hi - walk.g0) / 64 * 64;
    while (kept > 0 && records[kept - 1].pos >= group) --kept;
    const Peak part = ScanPeak(walk.chunk, group, hi);
    if (kept > 0) {
      const Peak& r = records[kept - 1];
      if (r.value < part.value) return part;
      // Where the record's W first occurs: its group, hashed again.
      return ScanPeak(walk.chunk, r.pos, r.pos + 63);
    }
    return walk.has_head && walk.head.value >= part.value ? walk.head : part;
  };
  // Lengths [min, n] are positions [min - 1, n - 1]; a chunk of L >= 2 * min
  // would leave the range [min, L - min], i.e. positions up to L - 1 - min.
  Peak p = peak_up_to(walk.n - 1);
  while (p.pos + 1 >= 2 * walk.min_size) p = peak_up_to(p.pos - walk.min_size);
  return p.pos + 1;
}

}  // namespace repmaxcdc

RepMaxCdcCutter::RepMaxCdcCutter(uint32_t min_size, uint32_t horizon_size)
    : min_size_(min_size), horizon_size_(horizon_size) {}

size_t RepMaxCdcCutter::Cut(const uint8_t* chunk_start, size_t avail,
                            size_t /*context*/, uint64_t* hash) const {
  *hash = 0;
  const size_t m = min_size_;
  // go-cdc peeks 2 * min + horizon bytes; fewer than 2 * min are one chunk
  // (the rest of the stream, as the REQUIRES of Cut says).
  const size_t peek = std::min(avail, final_size());
  if (peek < 2 * m) return peek;
  const size_t n = peek - m;  // lengths [m, n]: W of positions [m - 1, n - 1]
  const size_t lo = m - 1;
  // Whole groups [lo + 64 k, lo + 64 k + 64) before the group holding n - 1;
  // the walk hashes that last group itself.
  const size_t groups = (n - 1 - lo) / 64;
  std::vector<repmaxcdc::Peak> records;
  if (groups > 0) {
    const uint64_t* const gear = FastCdcGearTable().data();
    uint64_t h = 0;
    for (size_t i = lo - (repmaxcdc::kWindow - 1); i <= lo; ++i) {
      h = (h << 1) + gear[chunk_start[i]];
    }
    records.push_back({h, lo});
    uint64_t best = h;
    const size_t end = lo + 64 * groups;
    for (size_t q = lo + 1; q < end; ++q) {
      h = (h << 1) + gear[chunk_start[q]];
      if (h > best) {
        best = h;
        // Kept per group: the group's last prefix maximum is its largest W.
        const size_t group = lo + (q - lo) / 64 * 64;
        if (records.back().pos == group) {
          records.back().value = h;
        } else {
          records.push_back({h, group});
        }
      }
    }
  }
  repmaxcdc::PeakWalk walk;
  walk.chunk = chunk_start;
  walk.min_size = m;
  walk.n = n;
  walk.g0 = lo;
  walk.records = &records;
  return repmaxcdc::CutFromPeaks(walk);
}

}  // namespace chunkd::chunking
