#include "workload/harness.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "workload/datagen.h"

namespace chunkd::workload {

using chunking::Algorithm;
using chunking::Chunk;
using chunking::ChunkerOptions;

bool WriteTextFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const bool written = std::fputs(text.c_str(), f) >= 0;
  return std::fclose(f) == 0 && written;
}

absl::string_view DatasetName(Dataset dataset) {
  switch (dataset) {
    case Dataset::kRandom:
      return "random";
    case Dataset::kVersioned:
      return "versioned";
  }
  return "unknown";
}

absl::StatusOr<Dataset> ParseDataset(absl::string_view name) {
  for (Dataset d : {Dataset::kRandom, Dataset::kVersioned}) {
    if (DatasetName(d) == name) return d;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dataset \"", name, "\"; expected random or versioned"));
}

std::vector<uint8_t> MakeDataset(Dataset dataset, size_t size) {
  if (dataset == Dataset::kRandom) return RandomBytes(size, kBenchSeed);
  VersionedOptions options;
  options.base_size = size / (options.versions + 1);
  options.seed = kBenchSeed;
  return GenerateVersioned(options).Concatenated();
}

ChunkerOptions BenchOptions(Algorithm algorithm) {
  ChunkerOptions options = chunking::DefaultOptions(algorithm);
  // FastCDC is measured at level 2, the level of the published FastCDC 2020
  // vectors and of REAPI; every other algorithm at its defaults.
  if (algorithm == Algorithm::kFastCdc) options.normalization_level = 2;
  return options;
}

namespace {

std::string Describe(const Chunk& c) {
  return absl::StrFormat("{offset %d, length %d, hash 0x%x}", c.offset,
                         c.length, c.hash);
}

}  // namespace

absl::Status CompareChunks(absl::Span<const Chunk> want,
                           absl::Span<const Chunk> got) {
  const size_t common = std::min(want.size(), got.size());
  for (size_t i = 0; i < common; ++i) {
    if (want[i] != got[i]) {
      return absl::InternalError(absl::StrCat("chunk ", i, " of ", want.size(),
                                              ": got ", Describe(got[i]),
                                              ", want ", Describe(want[i])));
    }
  }
  if (want.size() != got.size()) {
    return absl::InternalError(
        absl::StrCat("got ", got.size(), " chunks, want ", want.size()));
  }
  return absl::OkStatus();
}

uint64_t SumWords(const uint8_t* data, size_t size) {
  // Four independent sums so that the loop is bound by loads, not by the
  // latency of one chain of additions. memcpy is a plain 8-byte load.
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    uint64_t w[4];
    std::memcpy(w, data + i, sizeof(w));
    s0 += w[0];
    s1 += w[1];
    s2 += w[2];
    s3 += w[3];
  }
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, sizeof(w));
    s0 += w;
  }
  uint64_t tail = 0;
  for (size_t j = 0; i + j < size; ++j) {
    tail |= uint64_t{data[i + j]} << (8 * j);
  }
  return s0 + s1 + s2 + s3 + tail;
}

uint64_t SumWordsParallel(chunking::Executor* executor, const uint8_t* data,
                          size_t size) {
  const size_t pieces = (size + kCeilingPiece - 1) / kCeilingPiece;
  std::vector<uint64_t> sums(pieces);
  // Pieces are multiples of 8 bytes, so their sums add up to the whole's.
  chunking::RunParallel(executor, pieces, [&](size_t i) {
    const size_t begin = i * kCeilingPiece;
    sums[i] = SumWords(data + begin, std::min(kCeilingPiece, size - begin));
  });
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  return total;
}

void CopyParallel(chunking::Executor* executor, uint8_t* dst,
                  const uint8_t* src, size_t size) {
  const size_t pieces = (size + kCeilingPiece - 1) / kCeilingPiece;
  chunking::RunParallel(executor, pieces, [&](size_t i) {
    const size_t begin = i * kCeilingPiece;
    std::memcpy(dst + begin, src + begin,
                std::min(kCeilingPiece, size - begin));
  });
}

}  // namespace chunkd::workload
