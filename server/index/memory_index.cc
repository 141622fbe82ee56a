#include "index/memory_index.h"

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace chunkd::index {

std::string MemoryIndex::Key(absl::string_view ns,
                             absl::string_view fingerprint) {
  return absl::StrCat(ns, ":", fingerprint);
}

MemoryIndex::Shard& MemoryIndex::ShardFor(const std::string& key) {
  return shards_[absl::Hash<std::string>{}(key) % kShards];
}

absl::StatusOr<std::vector<bool>> MemoryIndex::Lookup(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  std::vector<bool> found;
  found.reserve(fingerprints.size());
  for (const std::string& fp : fingerprints) {
    const std::string key = Key(ns, fp);
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    found.push_back(shard.map.contains(key));
  }
  return found;
}

absl::StatusOr<std::vector<InsertResult>> MemoryIndex::Insert(
    absl::string_view ns, absl::Span<const InsertEntry> entries) {
  std::vector<InsertResult> results;
  results.reserve(entries.size());
  for (const InsertEntry& e : entries) {
    const std::string key = Key(ns, e.fingerprint);
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    auto [it, inserted] = shard.map.try_emplace(key, Entry{e.size, 0});
    ++it->second.ref_count;
    results.push_back({inserted, it->second.ref_count});
  }
  return results;
}

absl::StatusOr<std::vector<uint64_t>> MemoryIndex::Release(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  std::vector<uint64_t> left;
  left.reserve(fingerprints.size());
  for (const std::string& fp : fingerprints) {
    const std::string key = Key(ns, fp);
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) {
      left.push_back(0);
      continue;
    }
    if (--it->second.ref_count == 0) {
      shard.map.erase(it);
      left.push_back(0);
    } else {
      left.push_back(it->second.ref_count);
    }
  }
  return left;
}

size_t MemoryIndex::size() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    n += shard.map.size();
  }
  return n;
}

}  // namespace chunkd::index
