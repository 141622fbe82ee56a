// DistinctSketch: how many distinct values a stream of uniform 64-bit hashes
// holds, in 64 KiB whatever their number (HyperLogLog: Flajolet, Fusy,
// Gandouet and Meunier, 2007; with linear counting for small counts). A
// sampled estimate feeds one every chunk's fingerprint, sampled or not, and
// another the granules that cover every chunk, so that it knows the number
// of distinct chunks and their bytes within a fraction of a percent and
// takes only the rounding to granules from the sample (docs/estimate.md,
// "The interval").
//
// Promises: Estimate() depends only on the set of values added, not on their
// order or repetitions; its relative standard error is 0.3-0.6 %, which
// Estimate() returns with it.
//
// Thread safety: not thread-safe; one set's tally owns one.
#ifndef CHUNKD_ESTIMATE_DISTINCT_SKETCH_H_
#define CHUNKD_ESTIMATE_DISTINCT_SKETCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chunkd::estimate {

class DistinctSketch {
 public:
  // 2^kIndexBits one-byte registers: kMemoryBytes.
  static constexpr int kIndexBits = 16;
  static constexpr size_t kMemoryBytes = size_t{1} << kIndexBits;

  DistinctSketch();

  // Adds one value. REQUIRES: `hash` is uniformly distributed (a slice of a
  // fingerprint).
  void Add(uint64_t hash) {
    const size_t index = static_cast<size_t>(hash >> (64 - kIndexBits));
    // The rank of the first set bit of the remaining bits (a sentinel bounds
    // it when they are all zero).
    const uint64_t rest = (hash << kIndexBits) | (uint64_t{1} << (kIndexBits - 1));
    const uint8_t rank = static_cast<uint8_t>(__builtin_clzll(rest) + 1);
    if (rank > registers_[index]) registers_[index] = rank;
  }

  struct Count {
    double distinct = 0;
    double relative_se = 0;  // the estimate's relative standard error
  };
  Count Estimate() const;

  size_t memory_bytes() const { return registers_.size(); }

 private:
  std::vector<uint8_t> registers_;
};

}  // namespace chunkd::estimate

#endif  // CHUNKD_ESTIMATE_DISTINCT_SKETCH_H_
