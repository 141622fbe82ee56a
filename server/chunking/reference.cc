// MakeCutter and ReferenceChunks: the specification loop (docs/design.md, "Chunking algorithms").

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/buzhash.h"
#include "chunking/crc32.h"
#include "chunking/cutter.h"
#include "chunking/fastcdc.h"
#include "chunking/fixed.h"
#include "chunking/rabin.h"
#include "chunking/repmaxcdc.h"
#include "chunking/seqcdc.h"

namespace chunkd::chunking {

absl::StatusOr<std::unique_ptr<Cutter>> MakeCutter(
    const ChunkerOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  switch (options.algorithm) {
    case Algorithm::kFastCdc:
      return std::make_unique<FastCdcCutter>(
          options.min_size, options.avg_size, options.max_size,
          options.normalization_level, options.seed);
    case Algorithm::kCrc32:
      return std::make_unique<Crc32Cutter>(options.min_size, options.avg_size,
                                           options.max_size);
    case Algorithm::kSeqCdc:
      return std::make_unique<SeqCdcCutter>(
          options.seq_mode, options.min_size, options.max_size,
          options.seq_length, options.skip_trigger, options.skip_size);
    case Algorithm::kFixed:
      return std::make_unique<FixedCutter>(options.avg_size);
    case Algorithm::kRepMaxCdc:
      return std::make_unique<RepMaxCdcCutter>(options.min_size,
                                               options.horizon_size);
    case Algorithm::kRabin:
      return std::make_unique<RabinCutter>(options.min_size, options.avg_size,
                                           options.max_size,
                                           options.polynomial);
    case Algorithm::kBuzhash:
      return std::make_unique<BuzhashCutter>(options.min_size, options.avg_size,
                                             options.max_size);
  }
  // Unreachable: ValidateOptions rejects unknown algorithms.
  return absl::InvalidArgumentError("unknown algorithm");
}

std::vector<Chunk> ReferenceChunks(const ChunkerOptions& options,
                                   absl::Span<const uint8_t> data) {
  std::vector<Chunk> chunks;
  absl::StatusOr<std::unique_ptr<Cutter>> cutter = MakeCutter(options);
  // Invalid options break the REQUIRES; without aborting, the answer is "no
  // chunks", which no valid call can return for non-empty data.
  if (!cutter.ok()) return chunks;
  // Every byte before a chunk is its context: the whole stream is in memory.
  size_t pos = 0;
  while (pos < data.size()) {
    uint64_t hash = 0;
    const size_t length =
        (*cutter)->Cut(data.data() + pos, data.size() - pos, pos, &hash);
    chunks.push_back(Chunk{pos, static_cast<uint32_t>(length), hash});
    pos += length;
  }
  return chunks;
}

}  // namespace chunkd::chunking
