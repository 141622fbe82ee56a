// RocksDbIndex (rocksdb_index.h): layout, locking and durability are
// described in docs/design.md, "The rocksdb backend".
#include "index/rocksdb_index.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "index/rocksdb_encoding.h"
#include "rocksdb/cache.h"
#include "rocksdb/compaction_filter.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "rocksdb/perf_level.h"
#include "rocksdb/statistics.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"

namespace chunkd::index {
namespace {

using rocksdb_format::EntryValue;
using rocksdb_format::TokenRecord;

constexpr char kFormatKey[] = "chunkd.format";
constexpr char kCountKey[] = "chunkd.entries";
constexpr char kEntriesFamily[] = "entries";
constexpr char kTokensFamily[] = "tokens";

absl::string_view View(const rocksdb::Slice& s) {
  return absl::string_view(s.data(), s.size());
}

// LZ4 on every level, where this RocksDB has it: fingerprints do not
// compress, the keys' shared namespaces, sequence numbers zeroed by
// compaction and hints' parameter keys do, and LZ4 costs compactions and
// reads of blocks a fraction of what ZSTD does.
void ChooseCompression(rocksdb::ColumnFamilyOptions* options) {
  const std::vector<rocksdb::CompressionType> supported =
      rocksdb::GetSupportedCompressions();
  auto has = [&](rocksdb::CompressionType type) {
    return std::find(supported.begin(), supported.end(), type) !=
           supported.end();
  };
  options->compression = has(rocksdb::kLZ4Compression)
                             ? rocksdb::kLZ4Compression
                             : rocksdb::kNoCompression;
  options->bottommost_compression = options->compression;
}

// Drops write-token records older than the token TTL.
class ExpiredTokens final : public rocksdb::CompactionFilter {
 public:
  explicit ExpiredTokens(absl::Duration ttl) : ttl_(ttl) {}
  bool Filter(int /*level*/, const rocksdb::Slice& /*key*/,
              const rocksdb::Slice& existing_value,
              std::string* /*new_value*/,
              bool* /*value_changed*/) const override {
    return rocksdb_format::TokenExpired(View(existing_value), absl::Now(),
                                        ttl_);
  }
  const char* Name() const override { return "chunkd.ExpiredTokens"; }

 private:
  absl::Duration ttl_;
};

// One memtable: an eighth of the cache (the write buffer manager lets
// memtables take a quarter), 1 to 16 MiB (a larger one costs more per
// lookup and makes a restart replay more).
uint64_t WriteBufferBytes(uint64_t cache_bytes) {
  return std::clamp<uint64_t>(cache_bytes / 8, 1 << 20, 16 << 20);
}

// RocksDB counts every operation into a per-thread perf context unless
// told not to; chunkd reads none of it. Called by ReadEntries, which every
// call but Health and Storage goes through.
void NoPerfCounts() {
  thread_local bool done = false;
  if (!done) {
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    done = true;
  }
}

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

absl::Status FromRocks(const rocksdb::Status& s, const std::string& path) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsNoSpace()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the rocksdb index at ", path,
        " cannot write: its disk is full (", s.ToString(),
        "); free space or release chunks"));
  }
  return absl::UnavailableError(
      absl::StrCat("the rocksdb index at ", path, ": ", s.ToString()));
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
      : path_(rocksdb.path),
        sync_(rocksdb.sync),
        sync_interval_(rocksdb.sync_interval),
        checkpoint_dir_(rocksdb.checkpoint_dir.empty()
                            ? rocksdb.path + ".checkpoints"
                            : rocksdb.checkpoint_dir),
        max_entries_(options.max_entries),
        next_sizes_length_(static_cast<size_t>(options.next_sizes_length)),
        token_ttl_(options.token_ttl),
        expired_tokens_(options.token_ttl) {}
  ~RocksDbIndex() override;
  RocksDbIndex(const RocksDbIndex&) = delete;
  RocksDbIndex& operator=(const RocksDbIndex&) = delete;

  absl::Status Open(uint64_t cache_bytes);

  absl::string_view backend() const override { return "rocksdb"; }
  absl::Status Health() override;
  std::optional<uint64_t> EntryCount() override { return entries_.load(); }
  std::optional<StorageStats> Storage() override;
  absl::StatusOr<std::string> Checkpoint() override;

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

  absl::Status OpenDatabase(uint64_t cache_bytes);
  absl::Status CheckFormat();
  void SyncLoop();
  std::string EntryLimitMessage() const;
  // Reads the entries of `keys` (in order).
  absl::StatusOr<std::vector<std::optional<EntryValue>>> ReadEntries(
      const std::vector<std::string>& keys);
  // The recorded results of positions [first, first + n) of `prefix`.
  absl::StatusOr<std::vector<std::optional<uint64_t>>> ReadTokens(
      const std::string& prefix, uint64_t first, size_t n);
  // The read-modify-write of Insert, Release and RecordNextSizes: `apply`
  // per position not recorded under `token` (if any), all written as one
  // batch. `results` gets one result per position up to the first refused
  // one; `refused` says whether there was one.
  absl::Status Write(absl::string_view ns, char op,
                     const std::vector<std::string>& keys,
                     const WriteToken* token, const ApplyOne& apply,
                     bool sync, std::vector<uint64_t>* results,
                     bool* refused);
  absl::Status Commit(rocksdb::WriteBatch* batch, bool sync);
  bool Reserve();

  const std::string path_;
  const RocksDbSync sync_;
  const absl::Duration sync_interval_;
  const std::string checkpoint_dir_;
  const uint64_t max_entries_;
  const size_t next_sizes_length_;
  const absl::Duration token_ttl_;
  ExpiredTokens expired_tokens_;

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> families_;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* entries_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* tokens_cf_ = nullptr;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::Statistics> statistics_;

  StripedLocks locks_;
  std::atomic<uint64_t> entries_{0};
  // What the last failed write said; cleared by the next one that works.
  std::mutex error_mu_;
  absl::Status write_error_;  // guarded by error_mu_

  // The batch sync thread.
  std::atomic<bool> unsynced_{false};
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  bool stopping_ = false;  // guarded by sync_mu_
  std::thread sync_thread_;
  std::mutex checkpoint_mu_;
};

RocksDbIndex::~RocksDbIndex() {
  {
    std::lock_guard<std::mutex> lock(sync_mu_);
    stopping_ = true;
  }
  sync_cv_.notify_all();
  if (sync_thread_.joinable()) sync_thread_.join();
  if (db_ != nullptr) {
    if (unsynced_.load()) db_->SyncWAL().PermitUncheckedError();
    for (rocksdb::ColumnFamilyHandle* family : families_) {
      db_->DestroyColumnFamilyHandle(family).PermitUncheckedError();
    }
    db_->Close().PermitUncheckedError();
  }
}

absl::Status RocksDbIndex::OpenDatabase(uint64_t cache_bytes) {
  rocksdb::LRUCacheOptions cache_options;
  cache_options.capacity = cache_bytes;
  cache_options.high_pri_pool_ratio = 0.5;
  cache_ = rocksdb::NewLRUCache(cache_options);
  statistics_ = rocksdb::CreateDBStatistics();
  // Tickers only (the metrics read three): histograms cost every
  // operation an update of shared counters.
  statistics_->set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  db_options.statistics = statistics_;
  // Memtables are charged to the block cache: one bound for both.
  db_options.write_buffer_manager =
      std::make_shared<rocksdb::WriteBufferManager>(cache_bytes / 4, cache_);
  // A column family that is rarely flushed (the meta and token ones) keeps
  // every log since its last flush: past this much log RocksDB flushes it,
  // which bounds the log a restart replays.
  db_options.max_total_wal_size = 2 * WriteBufferBytes(cache_bytes);
  // A restart replays the log into memtables and goes on serving; they are
  // flushed when full, as any.
  db_options.avoid_flush_during_recovery = true;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.keep_log_file_num = 4;

  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache_;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  // Index and filter blocks live in the cache too (so the cache bounds
  // memory whatever the entry count), partitioned into blocks of 4 KiB: a
  // whole file's filter in one block would not fit a cache shard (512 KiB)
  // and would be read again at every lookup.
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.pin_top_level_index_and_filter = true;
  table.partition_filters = true;
  table.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  table.metadata_block_size = 4096;
  table.format_version = 5;

  rocksdb::ColumnFamilyOptions family;
  family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  family.write_buffer_size = WriteBufferBytes(cache_bytes);
  // A bloom filter over each memtable's keys: a lookup of a fingerprint the
  // index does not have (new data) skips the memtable's skip list.
  family.memtable_whole_key_filtering = true;
  family.memtable_prefix_bloom_size_ratio = 0.02;
  family.level_compaction_dynamic_level_bytes = true;
  ChooseCompression(&family);

  rocksdb::ColumnFamilyOptions meta = family;
  // RocksDB's own: adds 8-byte little-endian numbers, so that each batch's
  // signed change of the entry count (two's complement) is one Merge.
  if (!rocksdb::MergeOperator::CreateFromString(rocksdb::ConfigOptions(),
                                                "uint64add",
                                                &meta.merge_operator)
           .ok()) {
    return absl::InternalError("this RocksDB has no uint64add merge operator");
  }
  rocksdb::ColumnFamilyOptions tokens = family;
  tokens.compaction_filter = &expired_tokens_;
  tokens.periodic_compaction_seconds = 3600;

  std::error_code ec;
  std::filesystem::create_directories(path_, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--index rocksdb://", path_, ": cannot create ", path_,
                     ": ", ec.message()));
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = {
      {rocksdb::kDefaultColumnFamilyName, meta},
      {kEntriesFamily, family},
      {kTokensFamily, tokens}};
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, path_, descriptors, &families_, &db);
  if (!s.ok()) {
    if (s.IsIOError() && absl::StrContains(s.ToString(), "lock")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--index rocksdb://", path_, ": the directory ", path_,
          " is in use by another process (its LOCK file is held): run one "
          "chunkd per index directory (", s.ToString(), ")"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "--index rocksdb://", path_, ": cannot open ", path_, ": ",
        s.ToString()));
  }
  db_.reset(db);
  meta_ = families_[0];
  entries_cf_ = families_[1];
  tokens_cf_ = families_[2];
  return absl::OkStatus();
}

absl::Status RocksDbIndex::CheckFormat() {
  std::string format;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_, kFormatKey,
                               &format);
  if (s.IsNotFound()) {
    // A new database, or something else's: only an empty one is taken.
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), entries_cf_));
    it->SeekToFirst();
    if (it->Valid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--index rocksdb://", path_, ": ", path_,
          " holds entries but no chunkd format version: not a chunkd "
          "index, or a damaged one"));
    }
    rocksdb::WriteOptions write;
    write.sync = true;
    return FromRocks(db_->Put(write, meta_, kFormatKey,
                              absl::StrCat(kRocksDbFormatVersion)),
                     path_);
  }
  if (!s.ok()) return FromRocks(s, path_);
  int version = 0;
  if (!absl::SimpleAtoi(format, &version)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--index rocksdb://", path_, ": ", path_,
                     " has an unreadable format version '", format, "'"));
  }
  if (version > kRocksDbFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--index rocksdb://", path_, ": ", path_, " has format version ",
        version, ", written by a newer chunkd; this chunkd reads format ",
        kRocksDbFormatVersion, ": run the newer chunkd (or restore a "
        "checkpoint this version wrote)"));
  }
  return absl::OkStatus();
}

absl::Status RocksDbIndex::Open(uint64_t cache_bytes) {
  if (absl::Status s = OpenDatabase(cache_bytes); !s.ok()) return s;
  if (absl::Status s = CheckFormat(); !s.ok()) return s;
  std::string count;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), meta_, kCountKey, &count);
  if (s.ok()) {
    entries_.store(rocksdb_format::DecodeFixed64(count));
  } else if (!s.IsNotFound()) {
    return FromRocks(s, path_);
  }
  if (sync_ == RocksDbSync::kBatch) {
    sync_thread_ = std::thread([this] { SyncLoop(); });
  }
  return absl::OkStatus();
}

void RocksDbIndex::SyncLoop() {
  std::unique_lock<std::mutex> lock(sync_mu_);
  while (!stopping_) {
    sync_cv_.wait_for(lock, absl::ToChronoMilliseconds(sync_interval_));
    if (stopping_ || !unsynced_.exchange(false)) continue;
    lock.unlock();
    rocksdb::Status s = db_->SyncWAL();
    if (!s.ok()) {
      unsynced_.store(true);
      std::lock_guard<std::mutex> error(error_mu_);
      write_error_ = FromRocks(s, path_);
    }
    lock.lock();
  }
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
  std::lock_guard<std::mutex> lock(error_mu_);
  if (!write_error_.ok()) {
    // RocksDB stops writing after a background error; try to go on.
    if (db_->Resume().ok()) write_error_ = absl::OkStatus();
  }
  return write_error_;
}

absl::StatusOr<std::vector<std::optional<EntryValue>>>
RocksDbIndex::ReadEntries(const std::vector<std::string>& keys) {
  NoPerfCounts();
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  db_->MultiGet(rocksdb::ReadOptions(), entries_cf_, keys.size(),
                slices.data(), values.data(), statuses.data());
  std::vector<std::optional<EntryValue>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) return FromRocks(statuses[i], path_);
    EntryValue entry;
    if (!rocksdb_format::DecodeEntry(View(values[i]), &entry)) {
      return absl::DataLossError(absl::StrCat(
          "the rocksdb index at ", path_, " holds an unreadable entry"));
    }
    out[i] = std::move(entry);
  }
  return out;
}

absl::StatusOr<std::vector<std::optional<uint64_t>>> RocksDbIndex::ReadTokens(
    const std::string& prefix, uint64_t first, size_t n) {
  std::vector<std::optional<uint64_t>> out(n);
  const std::string lower = prefix;
  const std::string upper = rocksdb_format::TokenKey(prefix, first + n);
  rocksdb::Slice lower_slice(lower);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_lower_bound = &lower_slice;
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, tokens_cf_));
  const absl::Time now = absl::Now();
  // The record starting at or before `first`, then those starting inside.
  it->SeekForPrev(rocksdb_format::TokenKey(prefix, first));
  if (!it->Valid()) it->Seek(rocksdb_format::TokenKey(prefix, first));
  for (; it->Valid(); it->Next()) {
    if (rocksdb_format::TokenExpired(View(it->value()), now, token_ttl_)) {
      continue;
    }
    TokenRecord record;
    if (!rocksdb_format::DecodeTokenRecord(View(it->key()), View(it->value()),
                                           prefix.size(), &record)) {
      return absl::DataLossError(absl::StrCat(
          "the rocksdb index at ", path_, " holds an unreadable token record"));
    }
    for (size_t j = 0; j < record.results.size(); ++j) {
      const uint64_t position = record.first + j;
      if (position >= first && position < first + n) {
        out[position - first] = record.results[j];
      }
    }
  }
  if (!it->status().ok()) return FromRocks(it->status(), path_);
  return out;
}

absl::Status RocksDbIndex::Commit(rocksdb::WriteBatch* batch, bool sync) {
  rocksdb::WriteOptions write;
  write.sync = sync && sync_ == RocksDbSync::kAlways;
  // Hints skip the log: a crash loses those not yet flushed, never a count
  // (every logged write of an entry holds its whole value).
  write.disableWAL = !sync;
  rocksdb::Status s = db_->Write(write, batch);
  std::lock_guard<std::mutex> lock(error_mu_);
  if (!s.ok()) {
    write_error_ = FromRocks(s, path_);
    return write_error_;
  }
  write_error_ = absl::OkStatus();
  if (sync_ == RocksDbSync::kBatch) unsynced_.store(true);
  return absl::OkStatus();
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
    auto read = ReadTokens(prefix, token->first_position, keys.size());
    if (!read.ok()) return read.status();
    recorded = *std::move(read);
  }
  // Each key's entry as the batch leaves it, and whether it changed.
  struct Staged {
    std::optional<EntryValue> entry;
    bool dirty = false;
  };
  auto read = ReadEntries(keys);
  if (!read.ok()) return read.status();
  absl::flat_hash_map<std::string, Staged> staged;
  for (size_t i = 0; i < keys.size(); ++i) {
    staged.try_emplace(keys[i], Staged{(*read)[i], false});
  }
  rocksdb::WriteBatch batch;
  Counted counted;
  TokenRuns runs(&batch, tokens_cf_, prefix,
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
      batch.Put(entries_cf_, key, rocksdb_format::EncodeEntry(*s.entry));
    } else {
      batch.Delete(entries_cf_, key);
    }
  }
  if (counted.delta != 0) {
    batch.Merge(meta_, kCountKey,
                rocksdb_format::EncodeFixed64(
                    static_cast<uint64_t>(counted.delta)));
  }
  absl::Status status = absl::OkStatus();
  if (batch.Count() != 0) status = Commit(&batch, sync);
  // Reserve() counted the created entries already; a failed batch gives
  // them back, one that worked takes the removed ones off.
  entries_.fetch_sub(status.ok() ? counted.removed : counted.created);
  return status;
}

absl::StatusOr<std::vector<bool>> RocksDbIndex::Lookup(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  const std::vector<std::string> keys = KeysOf(ns, fingerprints);
  auto read = ReadEntries(keys);
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
  auto read = ReadEntries(keys);
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

std::optional<FingerprintIndex::StorageStats> RocksDbIndex::Storage() {
  StorageStats stats;
  uint64_t value = 0;
  if (db_->GetAggregatedIntProperty("rocksdb.total-sst-files-size", &value)) {
    stats.disk_bytes = value;
  }
  rocksdb::VectorLogPtr logs;
  if (db_->GetSortedWalFiles(logs).ok()) {
    for (const auto& log : logs) stats.disk_bytes += log->SizeFileBytes();
  }
  if (db_->GetAggregatedIntProperty(
          "rocksdb.estimate-pending-compaction-bytes", &value)) {
    stats.pending_compaction_bytes = value;
  }
  if (db_->GetIntProperty("rocksdb.num-running-compactions", &value)) {
    stats.running_compactions = value;
  }
  stats.stall_micros = statistics_->getTickerCount(rocksdb::STALL_MICROS);
  stats.cache_hits = statistics_->getTickerCount(rocksdb::BLOCK_CACHE_HIT);
  stats.cache_misses = statistics_->getTickerCount(rocksdb::BLOCK_CACHE_MISS);
  stats.cache_bytes = cache_->GetUsage();
  stats.cache_capacity = cache_->GetCapacity();
  return stats;
}

absl::StatusOr<std::string> RocksDbIndex::Checkpoint() {
  std::lock_guard<std::mutex> lock(checkpoint_mu_);
  std::error_code ec;
  std::filesystem::create_directories(checkpoint_dir_, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create the checkpoint directory ", checkpoint_dir_, ": ",
        ec.message()));
  }
  const std::string dir = absl::StrCat(
      checkpoint_dir_, "/",
      absl::FormatTime("%Y%m%dT%H%M%E3SZ", absl::Now(), absl::UTCTimeZone()));
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  if (s.ok()) s = checkpoint->CreateCheckpoint(dir);
  if (!s.ok()) return FromRocks(s, path_);
  return dir;
}

absl::StatusOr<uint64_t> ParseNumber(absl::string_view spec,
                                     absl::string_view name,
                                     absl::string_view value) {
  uint64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--index '", spec, "': ", name, "='", value,
                     "' is not a non-negative whole number"));
  }
  return n;
}

absl::Status ParseRocksDbOption(absl::string_view spec, absl::string_view name,
                                absl::string_view value,
                                RocksDbOptions* options) {
  if (name == "sync") {
    if (value == "always") {
      options->sync = RocksDbSync::kAlways;
    } else if (value == "batch") {
      options->sync = RocksDbSync::kBatch;
    } else if (value == "none") {
      options->sync = RocksDbSync::kNone;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--index '", spec, "': sync='", value,
                       "' is not one of always, batch, none"));
    }
    return absl::OkStatus();
  }
  if (name == "checkpoint_dir") {
    if (!absl::StartsWith(value, "/")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--index '", spec, "': checkpoint_dir must be an absolute path"));
    }
    options->checkpoint_dir = std::string(value);
    return absl::OkStatus();
  }
  if (name != "sync_interval_ms" && name != "cache_mib") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--index '", spec, "': unknown option '", name,
        "'; rocksdb takes sync, sync_interval_ms, cache_mib, checkpoint_dir"));
  }
  auto n = ParseNumber(spec, name, value);
  if (!n.ok()) return n.status();
  if (*n == 0 || *n > (uint64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--index '", spec, "': ", name, " must be 1..1048576"));
  }
  if (name == "sync_interval_ms") {
    options->sync_interval = absl::Milliseconds(static_cast<int64_t>(*n));
  } else {
    options->cache_bytes = *n << 20;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RocksDbOptions> ParseRocksDbSpec(absl::string_view spec) {
  constexpr absl::string_view kScheme = "rocksdb://";
  if (!absl::StartsWith(spec, kScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--index '", spec, "' is not a rocksdb:///path URL"));
  }
  absl::string_view rest = spec.substr(kScheme.size());
  absl::string_view query;
  if (size_t q = rest.find('?'); q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (!absl::StartsWith(rest, "/") || rest.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--index '", spec,
        "': the path must be absolute, e.g. rocksdb:///var/lib/chunkd/index"));
  }
  RocksDbOptions options;
  options.path = std::string(rest);
  while (options.path.size() > 1 && options.path.back() == '/') {
    options.path.pop_back();
  }
  options.cache_bytes = 0;  // unset: IndexOptions or the default decides
  if (query.empty()) return options;
  for (absl::string_view pair : absl::StrSplit(query, '&')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (absl::Status s = ParseRocksDbOption(spec, kv.first, kv.second,
                                            &options);
        !s.ok()) {
      return s;
    }
  }
  return options;
}

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
