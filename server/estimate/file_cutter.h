// How the Estimator cuts one file for its sets (estimate/estimator.h).
//
// The sets are split into groups once, at Create: a group is cut by one
// FileCutter per file (chunking restarts at every file). A group is either
// one set cut by its own StreamChunker, or several FastCDC sets with the same
// seed, whose Gear hash is the same, cut together by one FastCdcGroup. Both
// produce, for every set, exactly StreamChunker's chunks.
//
// Thread safety: a FileCutter is not thread-safe; the chunk lists it returns
// and the bytes ChunkData points at may be read from several threads until
// its next Append or Finish.
#ifndef CHUNKD_ESTIMATE_FILE_CUTTER_H_
#define CHUNKD_ESTIMATE_FILE_CUTTER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"

namespace chunkd::estimate {

// Sets cut together: indices into the estimator's sets.
struct CutterGroup {
  std::vector<size_t> sets;
  bool fastcdc_group = false;  // several FastCDC sets, one Gear hash
};

// Splits `sets` into groups; with `share_gear`, FastCDC sets with the same
// seed go into one group (when at least two), the others alone. Every set
// is in exactly one group; the groups come in the order of their first set.
std::vector<CutterGroup> GroupSets(
    const std::vector<chunking::ChunkerOptions>& sets, bool share_gear);

// Cuts one file for the sets of one group.
class FileCutter {
 public:
  FileCutter() = default;
  FileCutter(const FileCutter&) = delete;
  FileCutter& operator=(const FileCutter&) = delete;
  virtual ~FileCutter() = default;

  // Feeds the next piece of the file; (*out)[k] receives the chunks of the
  // group's k-th set that became final (out is resized to the group's sets;
  // its lists are cleared first).
  virtual void Append(absl::string_view piece,
                      std::vector<std::vector<chunking::Chunk>>* out) = 0;
  // Ends the file: the remaining chunks, as Append.
  virtual void Finish(std::vector<std::vector<chunking::Chunk>>* out) = 0;
  // The bytes of chunk `chunk` of the group's k-th set, emitted by the last
  // Append or Finish.
  virtual absl::string_view ChunkData(size_t k,
                                      const chunking::Chunk& chunk) const = 0;
  // The most bytes the cutter's buffers hold (the bounds of chunker.h).
  virtual size_t memory_bytes() const = 0;
};

// A cutter for one file of `group`. Errors as StreamChunker::Create.
absl::StatusOr<std::unique_ptr<FileCutter>> NewFileCutter(
    const CutterGroup& group,
    const std::vector<chunking::ChunkerOptions>& sets,
    const chunking::EngineOptions& engine);

// The shortest piece that every set's chunker cuts where it lies (smaller
// ones are copied into its buffer): 4 * (256 + max_size) for the set of the
// largest max_size (chunker.h, "Copies").
size_t InPlacePieceBytes(const std::vector<chunking::ChunkerOptions>& sets);

// The bound of chunker.h on a StreamChunker's buffers and bitmaps for
// `options` run as `plan`.
size_t StreamChunkerMemoryBound(const chunking::ChunkerOptions& options,
                                const chunking::EnginePlan& plan);

}  // namespace chunkd::estimate

#endif  // CHUNKD_ESTIMATE_FILE_CUTTER_H_
