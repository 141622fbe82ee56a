#include "estimate/file_cutter.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/fastcdc_group.h"

namespace chunkd::estimate {
namespace {

using chunking::Chunk;
using chunking::ChunkerOptions;

// The left context StreamChunker keeps (chunker.h, "Memory").
constexpr size_t kLeftContext = 256;
constexpr size_t kMinLookAhead = size_t{64} << 10;
constexpr size_t kScanBitmapsPerThread = size_t{16} << 10;

// How far past a chunk's start the algorithm may look.
size_t Span(const ChunkerOptions& options) {
  switch (options.algorithm) {
    case chunking::Algorithm::kFixed:
      return options.avg_size;
    case chunking::Algorithm::kRepMaxCdc:
      return size_t{2} * options.min_size + options.horizon_size;
    default:
      return options.max_size;
  }
}

// One set, one StreamChunker.
class StreamCutter final : public FileCutter {
 public:
  StreamCutter(std::unique_ptr<chunking::StreamChunker> chunker, size_t memory)
      : chunker_(std::move(chunker)), memory_(memory) {}

  void Append(absl::string_view piece,
              std::vector<std::vector<Chunk>>* out) override {
    out->resize(1);
    (*out)[0].clear();
    chunker_->Append(piece, &(*out)[0]);
  }
  void Finish(std::vector<std::vector<Chunk>>* out) override {
    out->resize(1);
    (*out)[0].clear();
    chunker_->Finish(&(*out)[0]);
  }
  absl::string_view ChunkData(size_t /*k*/, const Chunk& chunk) const override {
    return chunker_->ChunkData(chunk);
  }
  size_t memory_bytes() const override { return memory_; }

 private:
  std::unique_ptr<chunking::StreamChunker> chunker_;
  size_t memory_;
};

// Several FastCDC sets with one seed, one FastCdcGroup.
class GroupCutter final : public FileCutter {
 public:
  explicit GroupCutter(std::unique_ptr<chunking::FastCdcGroup> group)
      : group_(std::move(group)) {}

  void Append(absl::string_view piece,
              std::vector<std::vector<Chunk>>* out) override {
    for (std::vector<Chunk>& chunks : *out) chunks.clear();
    group_->Append(piece, out);
  }
  void Finish(std::vector<std::vector<Chunk>>* out) override {
    for (std::vector<Chunk>& chunks : *out) chunks.clear();
    group_->Finish(out);
  }
  absl::string_view ChunkData(size_t /*k*/, const Chunk& chunk) const override {
    return group_->ChunkData(chunk);
  }
  size_t memory_bytes() const override { return group_->memory_bytes(); }

 private:
  std::unique_ptr<chunking::FastCdcGroup> group_;
};

}  // namespace

std::vector<CutterGroup> GroupSets(const std::vector<ChunkerOptions>& sets,
                                   bool share_gear) {
  std::vector<CutterGroup> groups;
  std::vector<bool> placed(sets.size(), false);
  for (size_t i = 0; i < sets.size(); ++i) {
    if (placed[i]) continue;
    CutterGroup group;
    group.sets.push_back(i);
    placed[i] = true;
    if (share_gear && sets[i].algorithm == chunking::Algorithm::kFastCdc) {
      for (size_t j = i + 1; j < sets.size(); ++j) {
        if (!placed[j] && sets[j].algorithm == chunking::Algorithm::kFastCdc &&
            sets[j].seed == sets[i].seed) {
          group.sets.push_back(j);
          placed[j] = true;
        }
      }
      group.fastcdc_group = group.sets.size() >= 2;
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

size_t InPlacePieceBytes(const std::vector<ChunkerOptions>& sets) {
  size_t bytes = 0;
  for (const ChunkerOptions& options : sets) {
    bytes = std::max(bytes, 4 * (kLeftContext + Span(options)));
  }
  return bytes;
}

size_t StreamChunkerMemoryBound(const ChunkerOptions& options,
                                const chunking::EnginePlan& plan) {
  const size_t span = Span(options);
  const size_t window = plan.window_size;
  size_t bytes = 2 * (kLeftContext + span + window) +
                 4 * (kLeftContext + span) + window;
  switch (plan.strategy) {
    case chunking::Strategy::kTwoStage:
      bytes += (2 * std::max(window, kMinLookAhead) + span + 512) / 2;
      break;
    case chunking::Strategy::kSequentialScan:
      bytes += kScanBitmapsPerThread * plan.parallelism;
      break;
    default:
      break;
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<FileCutter>> NewFileCutter(
    const CutterGroup& group, const std::vector<ChunkerOptions>& sets,
    const chunking::EngineOptions& engine) {
  if (group.fastcdc_group) {
    std::vector<ChunkerOptions> members;
    for (size_t i : group.sets) members.push_back(sets[i]);
    absl::StatusOr<std::unique_ptr<chunking::FastCdcGroup>> cutter =
        chunking::FastCdcGroup::Create(members, engine);
    if (!cutter.ok()) return cutter.status();
    return std::unique_ptr<FileCutter>(new GroupCutter(*std::move(cutter)));
  }
  const ChunkerOptions& options = sets[group.sets.front()];
  absl::StatusOr<std::unique_ptr<chunking::StreamChunker>> chunker =
      chunking::StreamChunker::Create(options, engine);
  if (!chunker.ok()) return chunker.status();
  const size_t memory =
      StreamChunkerMemoryBound(options, (*chunker)->plan());
  return std::unique_ptr<FileCutter>(
      new StreamCutter(*std::move(chunker), memory));
}

}  // namespace chunkd::estimate
