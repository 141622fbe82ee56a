#include "index/memory_index.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "platform/error_reason.h"

namespace chunkd::index {

MemoryIndex::MemoryIndex(const IndexOptions& options, Clock clock)
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
      token_ttl_(options.token_ttl),
      clock_(std::move(clock)),
      inline_hints_(next_sizes_length_ <= kInlineHintSizes) {}

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

TableKey MemoryIndex::KeyOf(const Name& ns,
                            absl::string_view fingerprint) {
  TableKey key{ns.id, fingerprint, 0};
  if (fingerprint.size() == 32 || fingerprint.size() == 16) {
    key.hash = CompactKeyHash(ns.id, key.data(), fingerprint.size());
  } else {
    key.hash = absl::HashOf(ns.id, fingerprint);
  }
  return key;
}

std::string MemoryIndex::HintsKey(const TableKey& key) {
  std::string hints_key(sizeof(key.ns_id) + key.bytes.size(), '\0');
  std::memcpy(hints_key.data(), &key.ns_id, sizeof(key.ns_id));
  if (!key.bytes.empty()) {
    std::memcpy(hints_key.data() + sizeof(key.ns_id), key.bytes.data(),
                key.bytes.size());
  }
  return hints_key;
}

absl::Status MemoryIndex::Health() {
  {
    std::lock_guard<std::mutex> lock(tokens_mu_);
    SweepTokensLocked(clock_());
  }
  if (max_entries_ != 0 && entries_.load() >= max_entries_) {
    return absl::ResourceExhaustedError(EntryLimitMessage());
  }
  if (token_position_limit_ != 0 &&
      token_positions_.load() + kTokenBlockPositions > token_position_limit_) {
    return WithReason(absl::ResourceExhaustedError(TokenLimitMessage()),
                      ErrorReason::kTokenLimit);
  }
  return absl::OkStatus();
}

std::optional<uint64_t> MemoryIndex::EntryCount() { return entries_.load(); }

absl::StatusOr<std::vector<bool>> MemoryIndex::Lookup(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  std::vector<bool> found(fingerprints.size(), false);
  Pin pin(&namespaces_, namespaces_.Pin(ns, /*create=*/false));
  if (pin.get() == nullptr) return found;
  for (size_t i = 0; i < fingerprints.size(); ++i) {
    const TableKey key = KeyOf(*pin.get(), fingerprints[i]);
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    found[i] = WithTable(
        shard, key, [&](const auto& table) { return table.Contains(key); });
  }
  return found;
}

std::optional<InsertResult> MemoryIndex::InsertOne(Name& ns,
                                                   const TableKey& key,
                                                   uint32_t size) {
  // Reserves the entry before creating it: the count never passes the
  // limit, whatever other shards do meanwhile.
  auto reserve = [this] {
    uint64_t n = entries_.load();
    do {
      if (max_entries_ != 0 && n >= max_entries_) return false;
    } while (!entries_.compare_exchange_weak(n, n + 1));
    return true;
  };
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto added = WithTable(shard, key, [&](auto& table) {
    return table.Add(key, size, reserve);
  });
  if (!added.has_value()) return std::nullopt;
  if (added->is_new) ns.uses.fetch_add(1);
  return InsertResult{added->is_new, added->refs};
}

uint64_t MemoryIndex::ReleaseOne(Name& ns, const TableKey& key) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const ReleaseResult released = WithTable(
      shard, key, [&](auto& table) { return table.Release(key); });
  if (released.removed) {
    if (released.had_hints) DropHints(shard, key);
    // Pinned by the caller: the name is forgotten, if empty, when unpinned.
    ns.uses.fetch_sub(1);
    entries_.fetch_sub(1);
  }
  return released.refs;
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
      SweepTokensLocked(clock_());
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
    return WithReason(absl::ResourceExhaustedError(TokenLimitMessage()),
                      ErrorReason::kTokenLimit);
  }
  TokenRecord& record = *locked.record;
  const absl::Time now = clock_();
  results->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t position = token.first_position + i;
    auto [it, new_block] = record.blocks.try_emplace(
        position / kTokenBlockPositions, nullptr);
    if (new_block) {
      if (!TakeTokenPositions(kTokenBlockPositions, bounded)) {
        record.blocks.erase(it);
        return WithReason(absl::ResourceExhaustedError(TokenLimitMessage()),
                          ErrorReason::kTokenLimit);
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
  if (token != nullptr) {
    if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  }
  Pin pin(&namespaces_, namespaces_.Pin(ns, /*create=*/true));
  if (pin.get() == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the memory index holds its limit of ", kMaxNamespaceId,
        " namespaces with entries; release chunks of namespaces that are no "
        "longer needed"));
  }
  Name& space = *pin.get();
  std::vector<InsertResult> results;
  results.reserve(entries.size());
  if (token == nullptr) {
    for (const InsertEntry& e : entries) {
      std::optional<InsertResult> r =
          InsertOne(space, KeyOf(space, e.fingerprint), e.size);
      if (!r.has_value()) {
        return absl::ResourceExhaustedError(EntryLimitMessage());
      }
      results.push_back(*r);
    }
    return results;
  }
  std::vector<uint64_t> recorded;
  absl::Status status = WriteRecorded(
      ns, 'i', *token, entries.size(), /*bounded=*/true,
      [&](size_t i) -> std::optional<uint64_t> {
        std::optional<InsertResult> r = InsertOne(
            space, KeyOf(space, entries[i].fingerprint), entries[i].size);
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
  if (token != nullptr) {
    if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  }
  // A namespace the index does not know has nothing to release.
  Pin pin(&namespaces_, namespaces_.Pin(ns, /*create=*/false));
  auto release = [&](const std::string& fp) -> uint64_t {
    if (pin.get() == nullptr) return 0;
    return ReleaseOne(*pin.get(), KeyOf(*pin.get(), fp));
  };
  std::vector<uint64_t> left;
  if (token == nullptr) {
    left.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) left.push_back(release(fp));
    return left;
  }
  // Never refused for the limit of token positions: releasing is how
  // memory is freed.
  absl::Status status = WriteRecorded(
      ns, 'r', *token, fingerprints.size(), /*bounded=*/false,
      [&](size_t i) -> std::optional<uint64_t> {
        return release(fingerprints[i]);
      },
      &left);
  if (!status.ok()) return status;
  return left;
}

void MemoryIndex::DropParamsUse(uint32_t id) {
  if (params_.ById(id)->uses.fetch_sub(1) == 1) params_.ReleaseIfUnused(id);
}

namespace {

static_assert(std::size(InlineHints{}.run) >= kHintRunLength,
              "a slot holds a whole run");

// Moves `size` to the front of the most-recently-used list `sizes` (each
// size once, at most `length`).
void MoveToFront(std::vector<uint32_t>& sizes, uint32_t size, size_t length) {
  sizes.erase(std::remove(sizes.begin(), sizes.end(), size), sizes.end());
  sizes.insert(sizes.begin(), size);
  if (sizes.size() > length) sizes.resize(length);
}

}  // namespace

void MemoryIndex::RecordHint(Shard& shard, const TableKey& key, Name* params,
                             absl::string_view params_key,
                             const NextSize& hint) {
  const size_t run_length = std::min(hint.run.size(), kHintRunLength);
  auto in_slot = [&](auto& slots) {
    auto* slot = slots.Find(key);
    const bool fits = inline_hints_ && params != nullptr;
    if (slot == nullptr) {
      slot = slots.Insert(key);
      if (!fits) {
        slot->tag |= kSideHints;
        return false;
      }
      slot->value.params = params->id;
      params->uses.fetch_add(1);
    } else if ((slot->tag & kSideHints) != 0) {
      return false;
    }
    InlineHints& hints = slot->value;
    const uint32_t id = hints.params & kParamsIdMask;
    size_t count = (hints.params >> kParamsCountShift) & kParamsFieldMask;
    if (fits && id == params->id) {
      // Most recent first, each size once, at most next_sizes_length_.
      size_t at = 0;
      while (at < count && hints.sizes[at] != hint.next_size) ++at;
      if (at == count && count < next_sizes_length_) ++count;
      for (size_t i = std::min(at, count - 1); i > 0; --i) {
        hints.sizes[i] = hints.sizes[i - 1];
      }
      hints.sizes[0] = hint.next_size;
      std::copy_n(hint.run.begin(), run_length, hints.run);
      hints.params = id | static_cast<uint32_t>(count << kParamsCountShift) |
                     static_cast<uint32_t>(run_length << kParamsRunShift);
      return true;
    }
    // Another parameter key (or one without an id): the entry's lists move
    // to the side map.
    const size_t run = (hints.params >> kParamsRunShift) & kParamsFieldMask;
    shard.hints[HintsKey(key)].push_back(
        {params_.ById(id)->name,
         {std::vector<uint32_t>(hints.sizes, hints.sizes + count),
          std::vector<uint32_t>(hints.run, hints.run + run)}});
    DropParamsUse(id);
    slot->tag |= kSideHints;
    return false;
  };
  if (WithHintSlots(shard, key, false, in_slot)) return;
  HintLists& lists = shard.hints[HintsKey(key)];
  auto list = std::find_if(lists.begin(), lists.end(), [&](const auto& l) {
    return l.params_key == params_key;
  });
  if (list == lists.end()) {
    lists.push_back({std::string(params_key), {}});
    list = lists.end() - 1;
  }
  MoveToFront(list->hints.sizes, hint.next_size, next_sizes_length_);
  list->hints.run.assign(hint.run.begin(), hint.run.begin() + run_length);
}

NextHints MemoryIndex::HintsOf(Shard& shard, const TableKey& key,
                               const Name* params,
                               absl::string_view params_key) {
  std::optional<NextHints> inline_hints;
  const bool in_slot = WithHintSlots(shard, key, false, [&](auto& slots) {
    const auto* slot = slots.Find(key);
    if (slot == nullptr || (slot->tag & kSideHints) != 0) return false;
    const InlineHints& hints = slot->value;
    inline_hints.emplace();
    if (params != nullptr && (hints.params & kParamsIdMask) == params->id) {
      const size_t count =
          (hints.params >> kParamsCountShift) & kParamsFieldMask;
      const size_t run = (hints.params >> kParamsRunShift) & kParamsFieldMask;
      inline_hints->sizes.assign(hints.sizes, hints.sizes + count);
      inline_hints->run.assign(hints.run, hints.run + run);
    }
    return true;
  });
  if (in_slot) return *std::move(inline_hints);
  auto it = shard.hints.find(HintsKey(key));
  if (it == shard.hints.end()) return {};
  for (const HintList& list : it->second) {
    if (list.params_key == params_key) return list.hints;
  }
  return {};
}

void MemoryIndex::DropHints(Shard& shard, const TableKey& key) {
  const bool side = WithHintSlots(shard, key, true, [&](auto& slots) {
    auto* slot = slots.Find(key);
    if (slot == nullptr) return false;
    const bool in_side_map = (slot->tag & kSideHints) != 0;
    if (!in_side_map) DropParamsUse(slot->value.params & kParamsIdMask);
    slots.Erase(slot);
    return in_side_map;
  });
  if (side) shard.hints.erase(HintsKey(key));
}

absl::Status MemoryIndex::RecordNextSizes(absl::string_view ns,
                                          absl::string_view params_key,
                                          absl::Span<const NextSize> hints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  Pin pin(&namespaces_, namespaces_.Pin(ns, /*create=*/false));
  if (pin.get() == nullptr) return absl::OkStatus();
  // Null when every id is taken: the lists go to the side map then.
  Pin params(&params_, params_.Pin(params_key, /*create=*/true));
  for (const NextSize& hint : hints) {
    const TableKey key = KeyOf(*pin.get(), hint.fingerprint);
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    const bool present = WithTable(
        shard, key, [&](auto& table) { return table.MarkHints(key); });
    if (present) {
      RecordHint(shard, key, params.get(), params_key, hint);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NextHints>> MemoryIndex::NextHintsOf(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  std::vector<NextHints> out(fingerprints.size());
  Pin pin(&namespaces_, namespaces_.Pin(ns, /*create=*/false));
  if (pin.get() == nullptr) return out;
  Pin params(&params_, params_.Pin(params_key, /*create=*/false));
  for (size_t i = 0; i < fingerprints.size(); ++i) {
    const TableKey key = KeyOf(*pin.get(), fingerprints[i]);
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    const bool flagged = WithTable(
        shard, key, [&](const auto& table) { return table.HasHints(key); });
    if (flagged) out[i] = HintsOf(shard, key, params.get(), params_key);
  }
  return out;
}

size_t MemoryIndex::size() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    n += shard.sha256.size() + shard.xxh128.size() + shard.other.size();
  }
  return n;
}

size_t MemoryIndex::NamespaceCount() const { return namespaces_.size(); }

}  // namespace chunkd::index
