#include "index/memory_index.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace chunkd::index {

MemoryIndex::MemoryIndex(const IndexOptions& options)
    : next_sizes_length_(static_cast<size_t>(
          std::clamp(options.next_sizes_length, 1, kMaxNextSizesLength))),
      token_ttl_(options.token_ttl) {}

std::string MemoryIndex::Key(absl::string_view ns,
                             absl::string_view fingerprint) {
  return absl::StrCat(ns, ":", fingerprint);
}

MemoryIndex::Shard& MemoryIndex::ShardFor(const std::string& key) {
  return shards_[absl::Hash<std::string>{}(key) % kShards];
}

absl::StatusOr<std::vector<bool>> MemoryIndex::Lookup(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
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

InsertResult MemoryIndex::InsertOne(const std::string& key, uint32_t size) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [it, inserted] = shard.map.try_emplace(key);
  if (inserted) it->second.size = size;
  ++it->second.ref_count;
  return {inserted, it->second.ref_count};
}

uint64_t MemoryIndex::ReleaseOne(const std::string& key) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(key);
  if (it == shard.map.end()) return 0;
  if (--it->second.ref_count == 0) {
    shard.map.erase(it);
    return 0;
  }
  return it->second.ref_count;
}

std::shared_ptr<MemoryIndex::TokenRecord> MemoryIndex::Record(
    absl::string_view ns, char op, const WriteToken& token) {
  const absl::Time now = absl::Now();
  std::lock_guard<std::mutex> lock(tokens_mu_);
  if (now - last_token_sweep_ > token_ttl_ / 10) {
    last_token_sweep_ = now;
    for (auto it = tokens_.begin(); it != tokens_.end();) {
      bool expired = false;
      {
        std::lock_guard<std::mutex> record_lock(it->second->mu);
        expired = now - it->second->touched > token_ttl_;
      }
      if (expired) {
        tokens_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  std::shared_ptr<TokenRecord>& record =
      tokens_[absl::StrCat(ns, ":", std::string(1, op), ":", token.stream_id)];
  if (record == nullptr) record = std::make_shared<TokenRecord>();
  return record;
}

absl::StatusOr<std::vector<InsertResult>> MemoryIndex::Insert(
    absl::string_view ns, absl::Span<const InsertEntry> entries,
    const WriteToken* token) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  std::vector<InsertResult> results;
  results.reserve(entries.size());
  if (token == nullptr) {
    for (const InsertEntry& e : entries) {
      results.push_back(InsertOne(Key(ns, e.fingerprint), e.size));
    }
    return results;
  }
  if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  std::shared_ptr<TokenRecord> record = Record(ns, 'i', *token);
  std::lock_guard<std::mutex> lock(record->mu);
  record->touched = absl::Now();
  for (size_t i = 0; i < entries.size(); ++i) {
    auto [it, first_time] =
        record->applied.try_emplace(token->first_position + i, 0);
    if (first_time) {
      const InsertResult r =
          InsertOne(Key(ns, entries[i].fingerprint), entries[i].size);
      it->second = r.ref_count * 2 + (r.is_new ? 1 : 0);
    }
    results.push_back({(it->second & 1) != 0, it->second >> 1});
  }
  return results;
}

absl::StatusOr<std::vector<uint64_t>> MemoryIndex::Release(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const WriteToken* token) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  std::vector<uint64_t> left;
  left.reserve(fingerprints.size());
  if (token == nullptr) {
    for (const std::string& fp : fingerprints) {
      left.push_back(ReleaseOne(Key(ns, fp)));
    }
    return left;
  }
  if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  std::shared_ptr<TokenRecord> record = Record(ns, 'r', *token);
  std::lock_guard<std::mutex> lock(record->mu);
  record->touched = absl::Now();
  for (size_t i = 0; i < fingerprints.size(); ++i) {
    auto [it, first_time] =
        record->applied.try_emplace(token->first_position + i, 0);
    if (first_time) it->second = ReleaseOne(Key(ns, fingerprints[i]));
    left.push_back(it->second);
  }
  return left;
}

absl::Status MemoryIndex::RecordNextSizes(absl::string_view ns,
                                          absl::string_view params_key,
                                          absl::Span<const NextSize> hints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  for (const NextSize& hint : hints) {
    const std::string key = Key(ns, hint.fingerprint);
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) continue;
    auto& lists = it->second.next_sizes;
    auto list = std::find_if(lists.begin(), lists.end(), [&](const auto& l) {
      return l.first == params_key;
    });
    if (list == lists.end()) {
      lists.emplace_back(std::string(params_key), std::vector<uint32_t>());
      list = lists.end() - 1;
    }
    std::vector<uint32_t>& sizes = list->second;
    sizes.erase(std::remove(sizes.begin(), sizes.end(), hint.next_size),
                sizes.end());
    sizes.insert(sizes.begin(), hint.next_size);
    if (sizes.size() > next_sizes_length_) sizes.resize(next_sizes_length_);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> MemoryIndex::NextSizes(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  std::vector<std::vector<uint32_t>> out(fingerprints.size());
  for (size_t i = 0; i < fingerprints.size(); ++i) {
    const std::string key = Key(ns, fingerprints[i]);
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) continue;
    for (const auto& [params, sizes] : it->second.next_sizes) {
      if (params == params_key) out[i] = sizes;
    }
  }
  return out;
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
