#include "index/memory_index.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace chunkd::index {

MemoryIndex::MemoryIndex(const IndexOptions& options)
    : max_entries_(options.max_entries),
      token_position_limit_(
          options.max_entries == 0
              ? 0
              : std::max(options.max_entries <=
                                 UINT64_MAX / kTokenPositionsPerEntry
                             ? options.max_entries * kTokenPositionsPerEntry
                             : UINT64_MAX,
                         kMinTokenPositions)),
      next_sizes_length_(static_cast<size_t>(
          std::clamp(options.next_sizes_length, 1, kMaxNextSizesLength))),
      token_ttl_(options.token_ttl) {}

std::string MemoryIndex::EntryLimitMessage() const {
  return absl::StrCat(
      "the memory index holds its limit of ", max_entries_,
      " entries (--index_max_entries): new chunks cannot be indexed until "
      "entries are freed (duplicates of indexed chunks still count); release "
      "chunks that are no longer needed, raise --index_max_entries if memory "
      "allows, or use a Redis index (--index redis://...)");
}

std::string MemoryIndex::TokenLimitMessage() const {
  return absl::StrCat(
      "the memory index remembers its limit of ", token_position_limit_,
      " write-token positions (", kTokenPositionsPerEntry,
      " x --index_max_entries, at least ", kMinTokenPositions,
      "): streams wrote more chunks than that in the "
      "last ",
      absl::FormatDuration(token_ttl_),
      "; retry later (positions are forgotten that long after they were "
      "written), raise --index_max_entries if memory allows, or use a Redis "
      "index (--index redis://...)");
}

std::string MemoryIndex::Key(absl::string_view ns,
                             absl::string_view fingerprint) {
  return absl::StrCat(ns, ":", fingerprint);
}

MemoryIndex::Shard& MemoryIndex::ShardFor(const std::string& key) {
  return shards_[absl::Hash<std::string>{}(key) % kShards];
}

absl::Status MemoryIndex::Health() {
  {
    std::lock_guard<std::mutex> lock(tokens_mu_);
    SweepTokensLocked(absl::Now());
  }
  if (max_entries_ != 0 && entries_.load() >= max_entries_) {
    return absl::ResourceExhaustedError(EntryLimitMessage());
  }
  if (token_position_limit_ != 0 &&
      token_positions_.load() + kTokenBlockPositions > token_position_limit_) {
    return absl::ResourceExhaustedError(TokenLimitMessage());
  }
  return absl::OkStatus();
}

std::optional<uint64_t> MemoryIndex::EntryCount() { return entries_.load(); }

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

std::optional<InsertResult> MemoryIndex::InsertOne(const std::string& key,
                                                   uint32_t size) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(key);
  const bool is_new = it == shard.map.end();
  if (is_new) {
    // Reserve the entry before creating it: the count never passes the
    // limit, whatever other shards do meanwhile.
    uint64_t n = entries_.load();
    do {
      if (max_entries_ != 0 && n >= max_entries_) return std::nullopt;
    } while (!entries_.compare_exchange_weak(n, n + 1));
    it = shard.map.try_emplace(key).first;
    it->second.size = size;
  }
  ++it->second.ref_count;
  return InsertResult{is_new, it->second.ref_count};
}

uint64_t MemoryIndex::ReleaseOne(const std::string& key) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(key);
  if (it == shard.map.end()) return 0;
  if (--it->second.ref_count == 0) {
    shard.map.erase(it);
    entries_.fetch_sub(1);
    return 0;
  }
  return it->second.ref_count;
}

bool MemoryIndex::TakeTokenPositions(uint64_t n, bool bounded) {
  if (!bounded || token_position_limit_ == 0) {
    token_positions_.fetch_add(n);
    return true;
  }
  uint64_t held = token_positions_.load();
  do {
    if (held + n > token_position_limit_) return false;
  } while (!token_positions_.compare_exchange_weak(held, held + n));
  return true;
}

void MemoryIndex::SweepTokensLocked(absl::Time now) {
  if (now - last_token_sweep_ <= token_ttl_ / 10) return;
  last_token_sweep_ = now;
  // Batches never wait for tokens_mu_ while they hold a record's lock, so
  // waiting for a record's lock here cannot deadlock.
  for (auto it = tokens_.begin(); it != tokens_.end();) {
    TokenRecord& record = *it->second;
    std::lock_guard<std::mutex> record_lock(record.mu);
    uint64_t freed = 0;
    for (auto b = record.blocks.begin(); b != record.blocks.end();) {
      if (now - b->second->written > token_ttl_) {
        record.blocks.erase(b++);
        freed += kTokenBlockPositions;
      } else {
        ++b;
      }
    }
    if (record.blocks.empty()) {
      record.dead = true;
      freed += kTokenBlockPositions;
      tokens_.erase(it++);
    } else {
      ++it;
    }
    token_positions_.fetch_sub(freed);
  }
}

bool MemoryIndex::LockRecord(absl::string_view ns, char op,
                             const WriteToken& token, bool bounded,
                             LockedRecord* out) {
  const std::string name =
      absl::StrCat(ns, ":", std::string(1, op), ":", token.stream_id);
  while (true) {
    std::shared_ptr<TokenRecord> record;
    {
      std::lock_guard<std::mutex> lock(tokens_mu_);
      SweepTokensLocked(absl::Now());
      auto it = tokens_.find(name);
      if (it != tokens_.end()) {
        record = it->second;
      } else {
        // A record costs about a block's worth of memory.
        if (!TakeTokenPositions(kTokenBlockPositions, bounded)) return false;
        record = std::make_shared<TokenRecord>();
        tokens_.emplace(name, record);
      }
    }
    std::unique_lock<std::mutex> lock(record->mu);
    if (!record->dead) {
      out->record = std::move(record);
      out->lock = std::move(lock);
      return true;
    }
    // Swept between the lookup and the lock: take the new one.
  }
}

template <typename Apply>
absl::Status MemoryIndex::WriteRecorded(absl::string_view ns, char op,
                                        const WriteToken& token, size_t n,
                                        bool bounded, Apply apply,
                                        std::vector<uint64_t>* results) {
  LockedRecord locked;
  if (!LockRecord(ns, op, token, bounded, &locked)) {
    return absl::ResourceExhaustedError(TokenLimitMessage());
  }
  TokenRecord& record = *locked.record;
  const absl::Time now = absl::Now();
  results->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t position = token.first_position + i;
    auto [it, new_block] = record.blocks.try_emplace(
        position / kTokenBlockPositions, nullptr);
    if (new_block) {
      if (!TakeTokenPositions(kTokenBlockPositions, bounded)) {
        record.blocks.erase(it);
        return absl::ResourceExhaustedError(TokenLimitMessage());
      }
      it->second = std::make_unique<TokenBlock>();
    }
    TokenBlock& block = *it->second;
    uint64_t& recorded = block.results[position % kTokenBlockPositions];
    if (recorded == 0) {
      const std::optional<uint64_t> result = apply(i);
      if (!result.has_value()) {
        if (new_block) {
          record.blocks.erase(it);
          token_positions_.fetch_sub(kTokenBlockPositions);
        }
        return absl::ResourceExhaustedError(EntryLimitMessage());
      }
      recorded = *result + 1;
      block.written = now;
    }
    results->push_back(recorded - 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<InsertResult>> MemoryIndex::Insert(
    absl::string_view ns, absl::Span<const InsertEntry> entries,
    const WriteToken* token) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  std::vector<InsertResult> results;
  results.reserve(entries.size());
  if (token == nullptr) {
    for (const InsertEntry& e : entries) {
      std::optional<InsertResult> r = InsertOne(Key(ns, e.fingerprint), e.size);
      if (!r.has_value()) {
        return absl::ResourceExhaustedError(EntryLimitMessage());
      }
      results.push_back(*r);
    }
    return results;
  }
  if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  std::vector<uint64_t> recorded;
  absl::Status status = WriteRecorded(
      ns, 'i', *token, entries.size(), /*bounded=*/true,
      [&](size_t i) -> std::optional<uint64_t> {
        std::optional<InsertResult> r =
            InsertOne(Key(ns, entries[i].fingerprint), entries[i].size);
        if (!r.has_value()) return std::nullopt;
        return r->ref_count * 2 + (r->is_new ? 1 : 0);
      },
      &recorded);
  if (!status.ok()) return status;
  for (uint64_t r : recorded) results.push_back({(r & 1) != 0, r >> 1});
  return results;
}

absl::StatusOr<std::vector<uint64_t>> MemoryIndex::Release(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const WriteToken* token) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  std::vector<uint64_t> left;
  if (token == nullptr) {
    left.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) {
      left.push_back(ReleaseOne(Key(ns, fp)));
    }
    return left;
  }
  if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  // Never refused for the limit of token positions: releasing is how
  // memory is freed.
  absl::Status status = WriteRecorded(
      ns, 'r', *token, fingerprints.size(), /*bounded=*/false,
      [&](size_t i) -> std::optional<uint64_t> {
        return ReleaseOne(Key(ns, fingerprints[i]));
      },
      &left);
  if (!status.ok()) return status;
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
