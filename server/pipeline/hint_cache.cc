#include "pipeline/hint_cache.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace chunkd::pipeline {

HintCache::HintCache(size_t capacity,
                     std::unique_ptr<fingerprint::ContentKeyer> keyer)
    : keyer_(keyer != nullptr ? std::move(keyer)
                              : fingerprint::ContentKeyer::Random()),
      capacity_(capacity),
      per_shard_((capacity + kShards - 1) / kShards) {}

HintCache::Scope HintCache::ScopeOf(absl::string_view ns,
                                    absl::string_view params_key) const {
  // The namespace's length first, so that no two pairs give one string.
  return keyer_->Of(absl::StrCat(ns.size(), ":", ns, params_key));
}

std::optional<HintCache::Entry> HintCache::Get(const Key& key) const {
  if (per_shard_ == 0) return std::nullopt;
  const Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(key);
  if (it == shard.map.end()) return std::nullopt;
  return it->second;
}

void HintCache::Put(const Key& key, absl::string_view sha256) {
  if (per_shard_ == 0 || sha256.size() != sizeof(Sha256)) return;
  Entry value;
  std::memcpy(value.sha256.data(), sha256.data(), value.sha256.size());
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [it, inserted] = shard.map.try_emplace(key, value);
  if (!inserted) {
    if (it->second.sha256 != value.sha256) it->second = value;
    return;
  }
  if (shard.fifo.size() < per_shard_) {
    shard.fifo.push_back(key);
    return;
  }
  // Full: the oldest key of the shard makes room.
  shard.map.erase(shard.fifo[shard.next]);
  shard.fifo[shard.next] = key;
  shard.next = (shard.next + 1) % per_shard_;
}

template <typename Fn>
void HintCache::UpdateEntry(const Key& key, Fn fn) {
  if (per_shard_ == 0) return;
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(key);
  if (it != shard.map.end()) fn(it->second);
}

void HintCache::SetSizes(const Key& key, absl::Span<const uint32_t> sizes) {
  UpdateEntry(key, [&](Entry& e) {
    e.num_sizes = static_cast<uint8_t>(std::min(sizes.size(), kMaxSizes));
    std::copy_n(sizes.begin(), e.num_sizes, e.sizes.begin());
  });
}

void HintCache::Learn(const Key& key, uint32_t size) {
  UpdateEntry(key, [&](Entry& e) {
    auto end = e.sizes.begin() + e.num_sizes;
    auto at = std::find(e.sizes.begin(), end, size);
    if (at == end) {
      if (e.num_sizes < kMaxSizes) ++e.num_sizes;
      at = e.sizes.begin() + e.num_sizes - 1;
    }
    std::copy_backward(e.sizes.begin(), at, at + 1);
    e.sizes[0] = size;
  });
}

size_t HintCache::size() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    n += shard.map.size();
  }
  return n;
}

}  // namespace chunkd::pipeline
