#include "estimate/set_tally.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::estimate {
namespace {

// Chunks fingerprinted in one call (several SHA-256 messages at once).
constexpr size_t kDigestBatch = 64;

uint64_t BigEndian64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

template <size_t N>
struct Key {
  std::array<unsigned char, N> bytes;
  friend bool operator==(const Key& a, const Key& b) {
    return a.bytes == b.bytes;
  }
};

// The fingerprint is already uniform, but sampling fixes the top bits of its
// first 8 bytes, so the table hashes the next 8.
template <size_t N>
struct KeyHash {
  size_t operator()(const Key<N>& key) const {
    uint64_t v;
    std::memcpy(&v, key.bytes.data() + 8, sizeof(v));
    return static_cast<size_t>(v);
  }
};

struct Entry {
  uint64_t copies = 0;
  uint32_t length = 0;
};

template <size_t N>
class FixedKeptTable final : public KeptTable {
 public:
  bool Add(const unsigned char* fingerprint, uint32_t length,
           EntryBudget* budget) override {
    Key<N> key;
    std::memcpy(key.bytes.data(), fingerprint, N);
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++it->second.copies;
      return true;
    }
    if (!budget->Take()) return false;
    map_.emplace(key, Entry{1, length});
    return true;
  }
  uint64_t size() const override { return map_.size(); }
  void ForEach(
      const std::function<void(const KeptChunk&)>& fn) const override {
    for (const auto& [key, entry] : map_) {
      fn(KeptChunk{absl::string_view(
                       reinterpret_cast<const char*>(key.bytes.data()), N),
                   entry.length, entry.copies});
    }
  }
  size_t memory_bytes() const override {
    using Slot = std::pair<const Key<N>, Entry>;
    return map_.bucket_count() * (sizeof(Slot) + 1);
  }

 private:
  absl::flat_hash_map<Key<N>, Entry, KeyHash<N>> map_;
};

// The smallest size whose count brings the running total to `rank`.
uint32_t AtRank(const std::vector<std::pair<uint32_t, uint64_t>>& sorted,
                uint64_t rank) {
  uint64_t seen = 0;
  for (const auto& [size, count] : sorted) {
    seen += count;
    if (seen >= rank) return size;
  }
  return sorted.empty() ? 0 : sorted.back().first;
}

// Nearest rank: the ceil(p / 100 * n)-th smallest, at least the first.
uint64_t Rank(uint64_t percent, uint64_t n) {
  return std::max<uint64_t>(1, (percent * n + 99) / 100);
}

// The power of two at most `length`. REQUIRES: length >= 1.
uint32_t BucketOf(uint32_t length) {
  return uint32_t{1} << (31 - __builtin_clz(length));
}

}  // namespace

bool EntryBudget::Take() {
  if (limit_ == 0) {
    used_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (used_.fetch_add(1, std::memory_order_relaxed) < limit_) return true;
  used_.fetch_sub(1, std::memory_order_relaxed);
  exhausted_.store(true, std::memory_order_relaxed);
  return false;
}

std::unique_ptr<KeptTable> KeptTable::New(size_t fingerprint_bytes) {
  if (fingerprint_bytes == 32) return std::make_unique<FixedKeptTable<32>>();
  return std::make_unique<FixedKeptTable<16>>();
}

void SizeCounts::Fill(SetResult* result) const {
  std::vector<std::pair<uint32_t, uint64_t>> sorted(counts_.begin(),
                                                     counts_.end());
  std::sort(sorted.begin(), sorted.end());
  result->histogram.clear();
  for (const auto& [size, count] : sorted) {
    const uint32_t lower = BucketOf(size);
    if (result->histogram.empty() ||
        result->histogram.back().lower_bound != lower) {
      result->histogram.push_back(SizeBucket{lower, 0, 0});
    }
    result->histogram.back().chunks += count;
    result->histogram.back().bytes += uint64_t{size} * count;
  }
  result->chunks = chunks_;
  result->mean_chunk_size =
      chunks_ == 0 ? 0
                   : static_cast<double>(bytes_) / static_cast<double>(chunks_);
  result->min_chunk_size = sorted.empty() ? 0 : sorted.front().first;
  result->p50_chunk_size = AtRank(sorted, Rank(50, chunks_));
  result->p90_chunk_size = AtRank(sorted, Rank(90, chunks_));
  result->p99_chunk_size = AtRank(sorted, Rank(99, chunks_));
  result->max_chunk_size = sorted.empty() ? 0 : sorted.back().first;
}

size_t SizeCounts::memory_bytes() const {
  return counts_.bucket_count() * (sizeof(std::pair<uint32_t, uint64_t>) + 1);
}

namespace {

// The granule of a set's sketch of bytes: the largest power of two at most
// an eighth of its smallest regular chunk (fixed: avg_size), so that
// rounding a chunk up to granules adds at most an eighth to it; at least 64
// bytes (fewer sketch updates per byte) unless the chunk is smaller.
int GranuleShift(const chunking::ChunkerOptions& options) {
  const uint64_t smallest = options.algorithm == chunking::Algorithm::kFixed
                                ? options.avg_size
                                : options.min_size;
  int shift = 0;
  while (shift < 20 && (uint64_t{8} << (shift + 1)) <= smallest) ++shift;
  while (shift < 6 && (uint64_t{1} << (shift + 1)) <= smallest) ++shift;
  return shift;
}

// A 64-bit mix (splitmix64's finalizer): the granules of one chunk get
// unrelated values from its fingerprint and their positions.
uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EB;
  return x ^ (x >> 31);
}

}  // namespace

SetTally::SetTally(FingerprintKind kind, uint32_t sample_rate,
                   const chunking::ChunkerOptions& options)
    : kind_(kind),
      digest_bytes_(kind == FingerprintKind::kSha256 ? 32 : 16),
      keep_below_(std::numeric_limits<uint64_t>::max() /
                  std::max<uint32_t>(sample_rate, 1)),
      kept_(KeptTable::New(digest_bytes_)),
      sketch_(sample_rate > 1 ? std::make_unique<DistinctSketch>() : nullptr),
      granule_sketch_(sample_rate > 1 ? std::make_unique<DistinctSketch>()
                                      : nullptr),
      granule_shift_(GranuleShift(options)) {}

bool SetTally::Keep(const unsigned char* fingerprint) const {
  return BigEndian64(fingerprint) <= keep_below_;
}

bool SetTally::Add(
    const std::vector<chunking::Chunk>& chunks,
    const std::function<absl::string_view(const chunking::Chunk&)>& data,
    EntryBudget* budget) {
  const fingerprint::Kind kind = kind_ == FingerprintKind::kSha256
                                     ? fingerprint::Kind::kSha256
                                     : fingerprint::Kind::kXxh128;
  digests_.resize(kDigestBatch * digest_bytes_);
  for (size_t begin = 0; begin < chunks.size(); begin += kDigestBatch) {
    const size_t end = std::min(chunks.size(), begin + kDigestBatch);
    views_.clear();
    for (size_t i = begin; i < end; ++i) views_.push_back(data(chunks[i]));
    fingerprint::DigestManyTo(kind, absl::MakeConstSpan(views_),
                              digests_.data());
    for (size_t i = begin; i < end; ++i) {
      const uint32_t length = chunks[i].length;
      const unsigned char* fp = digests_.data() + (i - begin) * digest_bytes_;
      if (Keep(fp) && !kept_->Add(fp, length, budget)) return false;
      // Bytes 8..15: the sampling test fixes the top bits of the first 8.
      if (sketch_ != nullptr) AddToSketches(BigEndian64(fp + 8), length);
      if (!sizes_.Add(length, budget)) return false;
    }
  }
  return true;
}

void SetTally::AddToSketches(uint64_t name, uint32_t length) {
  sketch_->Add(name);
  const uint64_t granules =
      (uint64_t{length} + granule_bytes() - 1) >> granule_shift_;
  for (uint64_t i = 0; i < granules; ++i) {
    granule_sketch_->Add(Mix64(name + i * 0x9E3779B97F4A7C15));
  }
}

size_t SetTally::memory_bytes() const {
  return sizes_.memory_bytes() + kept_->memory_bytes() +
         (sketch_ != nullptr ? 2 * sketch_->memory_bytes() : 0) +
         digests_.capacity() + views_.capacity() * sizeof(absl::string_view);
}

}  // namespace chunkd::estimate
