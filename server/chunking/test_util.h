// Helpers shared by the chunking tests: deterministic inputs and the chunk
// list invariants of docs/design.md, "Chunking algorithms". Test-only; not part of the library.
#ifndef CHUNKD_CHUNKING_TEST_UTIL_H_
#define CHUNKD_CHUNKING_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chunkd/chunker.h"
#include "chunking/kernels/kernels.h"
#include "gtest/gtest.h"

namespace chunkd::chunking::testing {

using Bytes = std::vector<uint8_t>;

// mt19937_64's output sequence is fixed by the C++ standard, so these bytes
// are the same on every platform (distributions are not, hence unused).
inline Bytes RandomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes out(size);
  for (size_t i = 0; i < size; i += 8) {
    uint64_t word = rng();
    for (size_t j = i; j < i + 8 && j < size; ++j) {
      out[j] = static_cast<uint8_t>(word);
      word >>= 8;
    }
  }
  return out;
}

inline Bytes ConstantBytes(size_t size, uint8_t value) {
  return Bytes(size, value);
}

inline Bytes RepeatingBytes(size_t size, const std::string& pattern) {
  Bytes out(size);
  for (size_t i = 0; i < size; ++i) out[i] = pattern[i % pattern.size()];
  return out;
}

// English-like text: words from a small vocabulary, spaces and newlines.
inline Bytes TextBytes(size_t size, uint64_t seed) {
  static const char* const kWords[] = {
      "the",   "chunk", "of",     "data",  "stream", "and",     "a",
      "dedup", "index", "server", "byte",  "window", "hash",    "is",
      "cut",   "at",    "every",  "point", "where",  "content", "defines"};
  std::mt19937_64 rng(seed);
  std::string text;
  while (text.size() < size) {
    const uint64_t r = rng();
    text += kWords[r % (sizeof(kWords) / sizeof(kWords[0]))];
    text += (r >> 32) % 13 == 0 ? '\n' : ' ';
  }
  return Bytes(text.begin(), text.begin() + size);
}

inline Bytes ReadTestFile(const std::string& name) {
  std::ifstream in(std::string(CHUNKD_TEST_DATA_DIR) + "/" + name,
                   std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
}

// The bounds a chunk list must respect for `options`.
struct SizeBounds {
  uint64_t min = 0;
  uint64_t max = 0;
};

inline SizeBounds BoundsFor(const ChunkerOptions& options) {
  switch (options.algorithm) {
    case Algorithm::kFixed:
      return {options.avg_size, options.avg_size};
    case Algorithm::kFastCdc:
      // The crate scans from min rounded down to even.
      return {options.min_size & ~uint64_t{1}, options.max_size};
    case Algorithm::kRepMaxCdc:
      return {options.min_size, 2 * uint64_t{options.min_size} - 1};
    default:
      return {options.min_size, options.max_size};
  }
}

// Chunks are contiguous from 0, non-empty, cover all `size` bytes exactly
// once, and min <= length <= max except the last (which is <= max).
inline ::testing::AssertionResult CoversStream(const std::vector<Chunk>& chunks,
                                               uint64_t size,
                                               const ChunkerOptions& options) {
  const SizeBounds bounds = BoundsFor(options);
  uint64_t pos = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    if (c.offset != pos) {
      return ::testing::AssertionFailure() << "chunk " << i << " starts at "
                                           << c.offset << ", expected " << pos;
    }
    if (c.length == 0) {
      return ::testing::AssertionFailure() << "chunk " << i << " is empty";
    }
    if (c.length > bounds.max) {
      return ::testing::AssertionFailure()
             << "chunk " << i << " has length " << c.length << " > max "
             << bounds.max;
    }
    const bool last = i + 1 == chunks.size();
    if (!last && c.length < bounds.min) {
      return ::testing::AssertionFailure()
             << "chunk " << i << " has length " << c.length << " < min "
             << bounds.min;
    }
    pos += c.length;
  }
  if (pos != size) {
    return ::testing::AssertionFailure()
           << "chunks cover " << pos << " bytes of " << size;
  }
  return ::testing::AssertionSuccess();
}

// Every kernel built into this binary, by name, for tests instantiated per
// kernel (those the CPU lacks skip themselves).
inline std::vector<std::string> KernelNames() {
  std::vector<std::string> names;
  for (const kernels::KernelSet* kernel : kernels::AllKernelSets()) {
    names.push_back(kernel->name);
  }
  return names;
}

// fastcdc options with these sizes, level and seed.
inline ChunkerOptions FastCdcOptions(uint32_t min, uint32_t avg, uint32_t max,
                                     uint32_t level, uint64_t seed = 0) {
  ChunkerOptions o = DefaultOptions(Algorithm::kFastCdc);
  o.min_size = min;
  o.avg_size = avg;
  o.max_size = max;
  o.normalization_level = level;
  o.seed = seed;
  return o;
}

// Small parameters for every algorithm, so that tests see many chunks.
inline ChunkerOptions SmallOptions(Algorithm algorithm) {
  ChunkerOptions options = DefaultOptions(algorithm);
  options.min_size = 64;
  options.avg_size = 256;
  options.max_size = 1024;
  options.skip_size = 64;
  options.skip_trigger = 20;
  // repmaxcdc: chunks in [64, 128), looking 8 * 64 bytes past min.
  options.horizon_size = 512;
  return options;
}

// Option sets covering every algorithm and mode: small, default and preset
// parameters.
inline std::vector<std::pair<std::string, ChunkerOptions>> AllOptionSets() {
  std::vector<std::pair<std::string, ChunkerOptions>> sets;
  for (Algorithm algorithm : AllAlgorithms()) {
    const std::string name(AlgorithmName(algorithm));
    sets.emplace_back(name + "_small", SmallOptions(algorithm));
    sets.emplace_back(name + "_default", DefaultOptions(algorithm));
  }
  ChunkerOptions fastcdc = SmallOptions(Algorithm::kFastCdc);
  for (uint32_t level = 0; level <= 3; ++level) {
    fastcdc.normalization_level = level;
    fastcdc.seed = level == 3 ? 666 : 0;
    sets.emplace_back(absl::StrCat("fastcdc_small_level", level), fastcdc);
  }
  ChunkerOptions odd = SmallOptions(Algorithm::kFastCdc);
  odd.min_size = 65;
  odd.avg_size = 300;
  odd.max_size = 1025;
  sets.emplace_back("fastcdc_odd_sizes", odd);
  ChunkerOptions seq = SmallOptions(Algorithm::kSeqCdc);
  seq.seq_mode = SeqMode::kDecreasing;
  sets.emplace_back("seqcdc_small_decreasing", seq);
  ChunkerOptions fixed = SmallOptions(Algorithm::kFixed);
  fixed.avg_size = 1000;
  sets.emplace_back("fixed_1000", fixed);
  ChunkerOptions uniform = SmallOptions(Algorithm::kRepMaxCdc);
  uniform.min_size = 100;
  uniform.horizon_size = 0;
  sets.emplace_back("repmaxcdc_horizon0", uniform);
  ChunkerOptions rabin = SmallOptions(Algorithm::kRabin);
  rabin.min_size = 300;
  rabin.avg_size = 128;
  rabin.max_size = 1000;
  sets.emplace_back("rabin_avg_below_min", rabin);
  ChunkerOptions buzhash = SmallOptions(Algorithm::kBuzhash);
  buzhash.min_size = 48;
  buzhash.avg_size = 100;
  buzhash.max_size = 101;
  sets.emplace_back("buzhash_window_min", buzhash);
  for (const char* preset : {"fastcdc-reapi", "seqcdc-8k", "seqcdc-16k"}) {
    sets.emplace_back(preset, Preset(preset).value());
  }
  return sets;
}

}  // namespace chunkd::chunking::testing

#endif  // CHUNKD_CHUNKING_TEST_UTIL_H_
