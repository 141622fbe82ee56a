// What the chunking benchmarks (chunking_bench) and `chunkctl bench` share,
// so that both measure the same thing: the datasets, the parameters of issue
// 3's targets, the check of a fast path's chunks against the reference, and
// the memory-read ceiling.
//
// Speed claims are ratios measured side by side in one run (docs/benchmarks.md,
// Benchmarks); nothing here times anything.
//
// Thread safety: pure functions; the parallel ones run on the given Executor.
#ifndef CHUNKD_WORKLOAD_HARNESS_H_
#define CHUNKD_WORKLOAD_HARNESS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"

namespace chunkd::workload {

// The seed of every benchmark dataset.
inline constexpr uint64_t kBenchSeed = 42;

// The default benchmark input: 64 MiB.
inline constexpr size_t kDefaultBenchSize = size_t{64} << 20;

enum class Dataset : int {
  // RandomBytes(size, kBenchSeed).
  kRandom = 0,
  // GenerateVersioned concatenated: a base of size / 8 bytes and 7 versions,
  // 100 modifications of ~100 bytes each, seed kBenchSeed; about `size`
  // bytes in all.
  kVersioned = 1,
};

// "random", "versioned".
absl::string_view DatasetName(Dataset dataset);

// Writes `text` to `path` (for --markdown tables); false if it cannot.
bool WriteTextFile(const std::string& path, const std::string& text);

// INVALID_ARGUMENT names the accepted values.
absl::StatusOr<Dataset> ParseDataset(absl::string_view name);

// The bytes of `dataset` at about `size` bytes (exactly, for kRandom).
std::vector<uint8_t> MakeDataset(Dataset dataset, size_t size);

// The parameters the chunking targets are measured with: each algorithm's
// defaults (chunking::DefaultOptions), fastcdc at normalization level 2
// (min 4 KiB, avg 16 KiB, max 64 KiB).
chunking::ChunkerOptions BenchOptions(chunking::Algorithm algorithm);

// OK when `got` equals `want` chunk for chunk (offset, length and hash).
// Otherwise INTERNAL naming the first difference, e.g.
//   "chunk 17 of 4101: got {offset 278528, length 12288, hash 0x...}, want
//    {...}"
// or the counts when one list is a prefix of the other.
absl::Status CompareChunks(absl::Span<const chunking::Chunk> want,
                           absl::Span<const chunking::Chunk> got);

// The memory-read loop: the sum of the buffer's 64-bit little-endian words,
// a last partial word zero-padded. It reads every byte once and does almost
// nothing else, so its speed is the ceiling for any chunker reading the same
// buffer on the same number of threads.
uint64_t SumWords(const uint8_t* data, size_t size);

// SumWords of the whole buffer, in pieces run on `executor` (null: on the
// calling thread). Equals SumWords(data, size).
uint64_t SumWordsParallel(chunking::Executor* executor, const uint8_t* data,
                          size_t size);

// memcpy of `size` bytes, in pieces run on `executor` (null: on the calling
// thread): reads and writes every byte once, another ceiling.
void CopyParallel(chunking::Executor* executor, uint8_t* dst,
                  const uint8_t* src, size_t size);

// The pieces the parallel loops above use: 1 MiB.
inline constexpr size_t kCeilingPiece = size_t{1} << 20;

}  // namespace chunkd::workload

#endif  // CHUNKD_WORKLOAD_HARNESS_H_
