#include "index/rocksdb_index.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "index/rocksdb_encoding.h"
#include "index/rocksdb_store.h"
#include "rocksdb/write_batch.h"

namespace chunkd::index {
namespace {

using rocksdb_format::EntryValue;

// The entry keys of `items` in namespace `ns`, each item's fingerprint
// given by `fingerprint`.
template <typename T, typename F>
std::vector<std::string> KeysOf(absl::string_view ns, absl::Span<const T> items,
                                F fingerprint) {
  std::vector<std::string> keys;
  keys.reserve(items.size());
  for (const T& item : items) {
    keys.push_back(rocksdb_format::EntryKey(ns, fingerprint(item)));
  }
  return keys;
}

std::vector<std::string> KeysOf(absl::string_view ns,
                                absl::Span<const std::string> fingerprints) {
  return KeysOf(ns, fingerprints, [](const std::string& fp) -> const auto& {
    return fp;
  });
}

// Striped locks over keys: a batch locks the stripes of every key it
// changes, in stripe order (so two batches never wait for each other in a
// cycle), for its whole read-modify-write.
class StripedLocks {
 public:
  static constexpr size_t kStripes = 1024;
  class Held {
   public:
    Held(StripedLocks* locks, std::vector<uint32_t> stripes)
        : locks_(locks), stripes_(std::move(stripes)) {
      for (uint32_t s : stripes_) locks_->mu_[s].lock();
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() {
      for (auto it = stripes_.rbegin(); it != stripes_.rend(); ++it) {
        locks_->mu_[*it].unlock();
      }
    }

   private:
    StripedLocks* locks_;
    std::vector<uint32_t> stripes_;
  };
  static uint32_t StripeOf(absl::string_view key) {
    return static_cast<uint32_t>(absl::HashOf(key) % kStripes);
  }
  // Locks the stripes of `keys` and of `extra` (unless empty).
  Held Lock(const std::vector<std::string>& keys, absl::string_view extra) {
    std::vector<uint32_t> stripes;
    stripes.reserve(keys.size() + 1);
    for (const std::string& k : keys) stripes.push_back(StripeOf(k));
    if (!extra.empty()) stripes.push_back(StripeOf(extra));
    std::sort(stripes.begin(), stripes.end());
    stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
    return Held(this, std::move(stripes));
  }

 private:
  std::array<std::mutex, kStripes> mu_;
};

// The entries a batch creates and removes.
struct Counted {
  uint64_t created = 0;
  uint64_t removed = 0;
  int64_t delta = 0;
  void Add(int64_t change) {
    delta += change;
    if (change > 0) created += static_cast<uint64_t>(change);
    if (change < 0) removed += static_cast<uint64_t>(-change);
  }
};

// The write-token records of a batch: one per run of consecutive positions
// applied now (positions recorded earlier end a run).
class TokenRuns {
 public:
  TokenRuns(rocksdb::WriteBatch* batch, rocksdb::ColumnFamilyHandle* family,
            std::string prefix, uint64_t first_position)
      : batch_(batch),
        family_(family),
        prefix_(std::move(prefix)),
        first_position_(first_position) {}
  // Position first_position + i was applied with `result`.
  void Add(size_t i, uint64_t result) {
    if (!results_.empty() && i != next_) Flush();
    if (results_.empty()) first_ = i;
    results_.push_back(result);
    next_ = i + 1;
  }
  void Flush() {
    if (results_.empty()) return;
    batch_->Put(family_,
                rocksdb_format::TokenKey(prefix_, first_position_ + first_),
                rocksdb_format::EncodeTokenValue(absl::Now(), results_));
    results_.clear();
  }

 private:
  rocksdb::WriteBatch* batch_;
  rocksdb::ColumnFamilyHandle* family_;
  std::string prefix_;
  uint64_t first_position_;
  size_t first_ = 0;
  size_t next_ = 0;
  std::vector<uint64_t> results_;
};

class RocksDbIndex final : public FingerprintIndex {
 public:
  RocksDbIndex(const RocksDbOptions& rocksdb, const IndexOptions& options)
      : store_(rocksdb, options.token_ttl),
        max_entries_(options.max_entries),
        next_sizes_length_(static_cast<size_t>(options.next_sizes_length)) {}
  RocksDbIndex(const RocksDbIndex&) = delete;
  RocksDbIndex& operator=(const RocksDbIndex&) = delete;

  absl::Status Open(uint64_t cache_bytes);

  absl::string_view backend() const override { return "rocksdb"; }
  absl::Status Health() override;
  std::optional<uint64_t> EntryCount() override { return entries_.load(); }
  std::optional<StorageStats> Storage() override { return store_.Storage(); }
  absl::StatusOr<std::string> Checkpoint() override {
    return store_.Checkpoint();
  }

  using FingerprintIndex::Insert;
  using FingerprintIndex::Release;
  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns,
      absl::Span<const std::string> fingerprints) override;
  absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries,
      const WriteToken* token) override;
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints,
      const WriteToken* token) override;
  absl::Status RecordNextSizes(absl::string_view ns,
                               absl::string_view params_key,
                               absl::Span<const NextSize> hints) override;
  absl::StatusOr<std::vector<NextHints>> NextHintsOf(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const std::string> fingerprints) override;

 private:
  // What applying one position did besides its result.
  struct Effect {
    int64_t entries = 0;   // entries created (1) or removed (-1)
    bool changed = false;  // the entry must be written
  };
  // One applied operation per position: the result to record, or nullopt
  // when it was refused (and so were those after it).
  using ApplyOne = std::function<std::optional<uint64_t>(
      size_t i, std::optional<EntryValue>& entry, Effect* effect)>;

  std::string EntryLimitMessage() const;
  // The read-modify-write of Insert, Release and RecordNextSizes: `apply`
  // per position not recorded under `token` (if any), all written as one
  // batch. `results` gets one result per position up to the first refused
  // one; `refused` says whether there was one.
  absl::Status Write(absl::string_view ns, char op,
                     const std::vector<std::string>& keys,
                     const WriteToken* token, const ApplyOne& apply,
                     bool sync, std::vector<uint64_t>* results,
                     bool* refused);
  bool Reserve();

  RocksDbStore store_;
  const uint64_t max_entries_;
  const size_t next_sizes_length_;
  StripedLocks locks_;
  std::atomic<uint64_t> entries_{0};
};

absl::Status RocksDbIndex::Open(uint64_t cache_bytes) {
  if (absl::Status s = store_.Open(cache_bytes); !s.ok()) return s;
  entries_.store(store_.entry_count());
  return absl::OkStatus();
}

std::string RocksDbIndex::EntryLimitMessage() const {
  return absl::StrCat(
      "the rocksdb index holds its limit of ", max_entries_,
      " entries (--index_max_entries); release chunks or raise the limit");
}

bool RocksDbIndex::Reserve() {
  uint64_t n = entries_.load();
  do {
    if (max_entries_ != 0 && n >= max_entries_) return false;
  } while (!entries_.compare_exchange_weak(n, n + 1));
  return true;
}

absl::Status RocksDbIndex::Health() {
  if (max_entries_ != 0 && entries_.load() >= max_entries_) {
    return absl::ResourceExhaustedError(EntryLimitMessage());
  }
  return store_.Health();
}

absl::Status RocksDbIndex::Write(absl::string_view ns, char op,
                                 const std::vector<std::string>& keys,
                                 const WriteToken* token,
                                 const ApplyOne& apply, bool sync,
                                 std::vector<uint64_t>* results,
                                 bool* refused) {
  std::string prefix;
  if (token != nullptr) {
    prefix = rocksdb_format::TokenPrefix(ns, token->stream_id, op);
  }
  StripedLocks::Held held = locks_.Lock(keys, prefix);
  std::vector<std::optional<uint64_t>> recorded(keys.size());
  if (token != nullptr) {
    auto read = store_.ReadTokens(prefix, token->first_position, keys.size());
    if (!read.ok()) return read.status();
    recorded = *std::move(read);
  }
  // Each key's entry as the batch leaves it, and whether it changed.
  struct Staged {
    std::optional<EntryValue> entry;
    bool dirty = false;
  };
  auto read = store_.ReadEntries(keys);
  if (!read.ok()) return read.status();
  absl::flat_hash_map<std::string, Staged> staged;
  for (size_t i = 0; i < keys.size(); ++i) {
    staged.try_emplace(keys[i], Staged{(*read)[i], false});
  }
  rocksdb::WriteBatch batch;
  Counted counted;
  TokenRuns runs(&batch, store_.tokens(), prefix,
                 token == nullptr ? 0 : token->first_position);
  *refused = false;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (recorded[i].has_value()) {
      results->push_back(*recorded[i]);
      continue;
    }
    Staged& s = staged[keys[i]];
    Effect effect;
    std::optional<uint64_t> result = apply(i, s.entry, &effect);
    if (!result.has_value()) {
      *refused = true;
      break;
    }
    s.dirty = s.dirty || effect.changed;
    counted.Add(effect.entries);
    if (token != nullptr) runs.Add(i, *result);
    results->push_back(*result);
  }
  runs.Flush();
  for (const auto& [key, s] : staged) {
    if (!s.dirty) continue;
    if (s.entry.has_value()) {
      batch.Put(store_.entries(), key, rocksdb_format::EncodeEntry(*s.entry));
    } else {
      batch.Delete(store_.entries(), key);
    }
  }
  if (counted.delta != 0) store_.AddToCount(&batch, counted.delta);
  absl::Status status = absl::OkStatus();
  if (batch.Count() != 0) status = store_.Commit(&batch, sync);
  // Reserve() counted the created entries already; a failed batch gives
  // them back, one that worked takes the removed ones off.
  entries_.fetch_sub(status.ok() ? counted.removed : counted.created);
  return status;
}

absl::StatusOr<std::vector<bool>> RocksDbIndex::Lookup(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  const std::vector<std::string> keys = KeysOf(ns, fingerprints);
  auto read = store_.ReadEntries(keys);
  if (!read.ok()) return read.status();
  std::vector<bool> out;
  out.reserve(keys.size());
  for (const auto& entry : *read) out.push_back(entry.has_value());
  return out;
}

absl::StatusOr<std::vector<InsertResult>> RocksDbIndex::Insert(
    absl::string_view ns, absl::Span<const InsertEntry> entries,
    const WriteToken* token) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (token != nullptr) {
    if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  }
  const std::vector<std::string> keys = KeysOf(
      ns, entries, [](const InsertEntry& e) -> const auto& {
        return e.fingerprint;
      });
  ApplyOne apply = [&](size_t i, std::optional<EntryValue>& entry,
                       Effect* effect) -> std::optional<uint64_t> {
    if (entry.has_value()) {
      ++entry->refs;
      effect->changed = true;
      return entry->refs * 2;
    }
    if (!Reserve()) return std::nullopt;
    entry = EntryValue{1, entries[i].size, {}};
    *effect = {1, true};
    return uint64_t{1} * 2 + 1;
  };
  std::vector<uint64_t> recorded;
  bool refused = false;
  absl::Status s = Write(ns, 'i', keys, token, apply, /*sync=*/true,
                         &recorded, &refused);
  if (!s.ok()) return s;
  if (refused) return absl::ResourceExhaustedError(EntryLimitMessage());
  std::vector<InsertResult> results;
  results.reserve(recorded.size());
  for (uint64_t r : recorded) results.push_back({(r & 1) != 0, r >> 1});
  return results;
}

absl::StatusOr<std::vector<uint64_t>> RocksDbIndex::Release(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const WriteToken* token) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (token != nullptr) {
    if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  }
  const std::vector<std::string> keys = KeysOf(ns, fingerprints);
  ApplyOne apply = [](size_t, std::optional<EntryValue>& entry,
                      Effect* effect) -> std::optional<uint64_t> {
    if (!entry.has_value()) return 0;
    effect->changed = true;
    if (--entry->refs == 0) {
      entry.reset();
      effect->entries = -1;
      return 0;
    }
    return entry->refs;
  };
  std::vector<uint64_t> left;
  bool refused = false;
  absl::Status s = Write(ns, 'r', keys, token, apply, /*sync=*/true, &left,
                         &refused);
  if (!s.ok()) return s;
  return left;
}

absl::Status RocksDbIndex::RecordNextSizes(absl::string_view ns,
                                           absl::string_view params_key,
                                           absl::Span<const NextSize> hints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  const std::vector<std::string> keys =
      KeysOf(ns, hints, [](const NextSize& h) -> const auto& {
        return h.fingerprint;
      });
  ApplyOne apply = [&](size_t i, std::optional<EntryValue>& entry,
                       Effect* effect) -> std::optional<uint64_t> {
    // A stream over data seen before records what the entry holds: no
    // write then.
    effect->changed = entry.has_value() &&
                      rocksdb_format::AddHint(&*entry, params_key, hints[i],
                                              next_sizes_length_);
    return 0;
  };
  std::vector<uint64_t> ignored;
  bool refused = false;
  // Hints are advice: they are never worth an fsync, nor the log.
  return Write(ns, 'h', keys, nullptr, apply, /*sync=*/false, &ignored,
               &refused);
}

absl::StatusOr<std::vector<NextHints>> RocksDbIndex::NextHintsOf(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  const std::vector<std::string> keys = KeysOf(ns, fingerprints);
  auto read = store_.ReadEntries(keys);
  if (!read.ok()) return read.status();
  std::vector<NextHints> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!(*read)[i].has_value()) continue;
    for (const auto& list : (*read)[i]->hints) {
      if (list.params_key == params_key) out[i] = list.hints;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FingerprintIndex>> OpenRocksDbIndex(
    const RocksDbOptions& rocksdb, const IndexOptions& options) {
  if (options.next_sizes_length < 1 ||
      options.next_sizes_length > kMaxNextSizesLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("--index rocksdb: next_sizes_length must be 1..",
                     kMaxNextSizesLength));
  }
  uint64_t cache_bytes = rocksdb.cache_bytes;
  if (cache_bytes == 0) cache_bytes = options.cache_bytes;
  if (cache_bytes == 0) cache_bytes = uint64_t{256} << 20;
  auto index = std::make_unique<RocksDbIndex>(rocksdb, options);
  if (absl::Status s = index->Open(cache_bytes); !s.ok()) return s;
  return index;
}

}  // namespace chunkd::index
