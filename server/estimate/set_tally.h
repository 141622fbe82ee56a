// What the Estimator counts for one set (estimate/estimator.h): the sizes of
// every chunk, a table of the distinct chunks the sample keeps, keyed by
// fingerprint, with each one's length and copies, and, when sampled,
// sketches of every chunk that count the distinct chunks and their bytes.
//
// Thread safety: a SetTally is not thread-safe; different tallies may be used
// from different threads at once (they share only an EntryBudget, which is).
#ifndef CHUNKD_ESTIMATE_SET_TALLY_H_
#define CHUNKD_ESTIMATE_SET_TALLY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "estimate/distinct_sketch.h"
#include "estimate/estimator.h"

namespace chunkd::estimate {

// The distinct chunks all sets may still add (EstimatorOptions::max_entries).
class EntryBudget {
 public:
  // limit 0: no limit.
  explicit EntryBudget(uint64_t limit) : limit_(limit) {}

  // Takes one entry; false (and exhausted() from then on) when none is left.
  bool Take();
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  bool exhausted() const { return exhausted_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  std::atomic<bool> exhausted_{false};
};

// The kept distinct chunks, keyed by their fingerprint.
class KeptTable {
 public:
  KeptTable() = default;
  KeptTable(const KeptTable&) = delete;
  KeptTable& operator=(const KeptTable&) = delete;
  virtual ~KeptTable() = default;

  // A table for fingerprints of `fingerprint_bytes` bytes (16 or 32).
  static std::unique_ptr<KeptTable> New(size_t fingerprint_bytes);

  // Counts one copy of the chunk with this fingerprint; a chunk not yet in
  // the table takes an entry from `budget`: false when there is none left
  // (then the chunk is not counted).
  virtual bool Add(const unsigned char* fingerprint, uint32_t length,
                   EntryBudget* budget) = 0;
  virtual uint64_t size() const = 0;
  virtual void ForEach(
      const std::function<void(const KeptChunk&)>& fn) const = 0;
  // The table's slots and control bytes.
  virtual size_t memory_bytes() const = 0;
};

// Chunk counts by size: the exact statistics of every chunk.
class SizeCounts {
 public:
  // Counts a chunk of `length`; a size beyond the first kSizesPerSet takes
  // an entry from `budget`: false when there is none left (the chunk is not
  // counted).
  bool Add(uint32_t length, EntryBudget* budget) {
    auto it = counts_.find(length);
    if (it == counts_.end()) {
      if (counts_.size() >= kSizesPerSet && !budget->Take()) return false;
      it = counts_.emplace(length, 0).first;
    }
    ++it->second;
    ++chunks_;
    bytes_ += length;
    return true;
  }
  uint64_t chunks() const { return chunks_; }
  uint64_t bytes() const { return bytes_; }
  // Fills the histogram, mean, min, percentiles and max of `result`.
  void Fill(SetResult* result) const;
  size_t memory_bytes() const;

 private:
  absl::flat_hash_map<uint32_t, uint64_t> counts_;
  uint64_t chunks_ = 0;
  uint64_t bytes_ = 0;
};

// One set's counts, fed chunk lists with their bytes.
class SetTally {
 public:
  // `options`: the set's chunking, for the granule of its sketch of bytes.
  SetTally(FingerprintKind kind, uint32_t sample_rate,
           const chunking::ChunkerOptions& options);

  // Counts `chunks`, whose bytes `data` returns. false when the budget ran
  // out (the chunks after it are not counted).
  bool Add(const std::vector<chunking::Chunk>& chunks,
           const std::function<absl::string_view(const chunking::Chunk&)>& data,
           EntryBudget* budget);

  const SizeCounts& sizes() const { return sizes_; }
  const KeptTable& kept() const { return *kept_; }
  // When sampled, sketches of every chunk: of its fingerprint (the number of
  // distinct chunks), and of its granules, the granule_bytes() pieces that
  // cover it, each named by the fingerprint and its position (the bytes of
  // the distinct chunks, rounded up to granules); null when exact.
  const DistinctSketch* sketch() const { return sketch_.get(); }
  const DistinctSketch* granule_sketch() const {
    return granule_sketch_.get();
  }
  // A power of two: at most an eighth of the set's smallest regular chunk,
  // and at least 64 bytes unless that chunk is smaller.
  uint32_t granule_bytes() const { return uint32_t{1} << granule_shift_; }
  size_t memory_bytes() const;

 private:
  bool Keep(const unsigned char* fingerprint) const;
  void AddToSketches(uint64_t name, uint32_t length);

  FingerprintKind kind_;
  size_t digest_bytes_;
  uint64_t keep_below_;  // keep when the first 8 bytes are at most this
  SizeCounts sizes_;
  std::unique_ptr<KeptTable> kept_;
  std::unique_ptr<DistinctSketch> sketch_;
  std::unique_ptr<DistinctSketch> granule_sketch_;
  int granule_shift_ = 0;
  // Scratch: one batch of chunks' bytes and digests.
  std::vector<absl::string_view> views_;
  std::vector<unsigned char> digests_;
};

}  // namespace chunkd::estimate

#endif  // CHUNKD_ESTIMATE_SET_TALLY_H_
