#include "workload/datagen.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace chunkd::workload {

Xoshiro256::Xoshiro256(uint64_t seed) {
  SplitMix64 expand(seed);
  for (uint64_t& word : s_) word = expand.Next();
}

void Xoshiro256::Fill(uint8_t* data, size_t size) {
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const uint64_t word = Next();
    for (int j = 0; j < 8; ++j)
      data[i + j] = static_cast<uint8_t>(word >> (8 * j));
  }
  if (i < size) {
    const uint64_t word = Next();
    for (int j = 0; i < size; ++i, ++j) {
      data[i] = static_cast<uint8_t>(word >> (8 * j));
    }
  }
}

std::vector<uint8_t> RandomBytes(size_t size, uint64_t seed) {
  std::vector<uint8_t> out(size);
  Xoshiro256(seed).Fill(out.data(), out.size());
  return out;
}

std::vector<uint8_t> VersionedDataset::Concatenated() const {
  std::vector<uint8_t> out;
  out.reserve(total_size());
  for (const std::vector<uint8_t>& v : versions) {
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

size_t VersionedDataset::total_size() const {
  size_t total = 0;
  for (const std::vector<uint8_t>& v : versions) total += v.size();
  return total;
}

namespace {

struct Edit {
  size_t offset = 0;
  EditKind kind = EditKind::kInsert;
  size_t length = 0;
};

// The next version: `prev` with `edits` (in drawing order) applied in one
// pass, by offset; the stable sort keeps drawing order among equal offsets.
std::vector<uint8_t> ApplyEdits(const std::vector<uint8_t>& prev,
                                std::vector<Edit> edits, size_t max_length,
                                Xoshiro256& rng) {
  std::stable_sort(
      edits.begin(), edits.end(),
      [](const Edit& a, const Edit& b) { return a.offset < b.offset; });
  std::vector<uint8_t> next;
  next.reserve(prev.size() + edits.size() * max_length);
  size_t cursor = 0;  // bytes of prev before it are settled
  for (const Edit& edit : edits) {
    const size_t at = std::max(edit.offset, cursor);
    next.insert(next.end(), prev.begin() + cursor, prev.begin() + at);
    cursor = at;
    switch (edit.kind) {
      case EditKind::kInsert: {
        const size_t old = next.size();
        next.resize(old + edit.length);
        rng.Fill(next.data() + old, edit.length);
        break;
      }
      case EditKind::kDelete:
        cursor = std::min(at + edit.length, prev.size());
        break;
      case EditKind::kOverwrite: {
        const size_t n = std::min(edit.length, prev.size() - at);
        const size_t old = next.size();
        next.resize(old + n);
        rng.Fill(next.data() + old, n);
        cursor = at + n;
        break;
      }
    }
  }
  next.insert(next.end(), prev.begin() + cursor, prev.end());
  return next;
}

}  // namespace

VersionedDataset GenerateVersioned(const VersionedOptions& options) {
  const size_t mean = std::max<size_t>(options.modification_size, 1);
  const size_t low = (mean + 1) / 2;
  const size_t high = mean + mean / 2;
  Xoshiro256 rng(options.seed);
  VersionedDataset dataset;
  dataset.versions.reserve(options.versions + 1);
  dataset.versions.emplace_back(options.base_size);
  rng.Fill(dataset.versions[0].data(), options.base_size);
  for (size_t v = 1; v <= options.versions; ++v) {
    const std::vector<uint8_t>& prev = dataset.versions.back();
    std::vector<Edit> edits(options.modifications);
    for (Edit& edit : edits) {
      edit.offset = static_cast<size_t>(rng.Below(prev.size() + 1));
      edit.kind = static_cast<EditKind>(rng.Below(3));
      edit.length = low + static_cast<size_t>(rng.Below(high - low + 1));
    }
    // Built before it is added: `prev` refers into dataset.versions.
    std::vector<uint8_t> next = ApplyEdits(prev, std::move(edits), high, rng);
    dataset.versions.push_back(std::move(next));
  }
  return dataset;
}

}  // namespace chunkd::workload
