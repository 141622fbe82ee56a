#include "index/rocksdb_store.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rocksdb/convenience.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "rocksdb/perf_level.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
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

}  // namespace

bool ExpiredTokens::Filter(int /*level*/, const rocksdb::Slice& /*key*/,
                           const rocksdb::Slice& existing_value,
                           std::string* /*new_value*/,
                           bool* /*value_changed*/) const {
  return rocksdb_format::TokenExpired(View(existing_value), absl::Now(), ttl_);
}

RocksDbStore::RocksDbStore(const RocksDbOptions& rocksdb,
                           absl::Duration token_ttl)
    : path_(rocksdb.path),
      sync_(rocksdb.sync),
      sync_interval_(rocksdb.sync_interval),
      checkpoint_dir_(rocksdb.checkpoint_dir.empty()
                          ? rocksdb.path + ".checkpoints"
                          : rocksdb.checkpoint_dir),
      token_ttl_(token_ttl),
      expired_tokens_(token_ttl) {}

RocksDbStore::~RocksDbStore() {
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

absl::Status RocksDbStore::OpenDatabase(uint64_t cache_bytes) {
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

absl::Status RocksDbStore::CheckFormat() {
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

absl::Status RocksDbStore::Open(uint64_t cache_bytes) {
  if (absl::Status s = OpenDatabase(cache_bytes); !s.ok()) return s;
  if (absl::Status s = CheckFormat(); !s.ok()) return s;
  std::string count;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), meta_, kCountKey, &count);
  if (s.ok()) {
    opened_count_ = rocksdb_format::DecodeFixed64(count);
  } else if (!s.IsNotFound()) {
    return FromRocks(s, path_);
  }
  if (sync_ == RocksDbSync::kBatch) {
    sync_thread_ = std::thread([this] { SyncLoop(); });
  }
  return absl::OkStatus();
}

void RocksDbStore::SyncLoop() {
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

absl::Status RocksDbStore::Health() {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (!write_error_.ok()) {
    // RocksDB stops writing after a background error; try to go on.
    if (db_->Resume().ok()) write_error_ = absl::OkStatus();
  }
  return write_error_;
}

absl::StatusOr<std::vector<std::optional<EntryValue>>>
RocksDbStore::ReadEntries(const std::vector<std::string>& keys) {
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

absl::StatusOr<std::vector<std::optional<uint64_t>>> RocksDbStore::ReadTokens(
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

absl::Status RocksDbStore::Commit(rocksdb::WriteBatch* batch, bool sync) {
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

void RocksDbStore::AddToCount(rocksdb::WriteBatch* batch,
                              int64_t delta) const {
  batch->Merge(meta_, kCountKey,
               rocksdb_format::EncodeFixed64(static_cast<uint64_t>(delta)));
}

FingerprintIndex::StorageStats RocksDbStore::Storage() {
  FingerprintIndex::StorageStats stats;
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

absl::StatusOr<std::string> RocksDbStore::Checkpoint() {
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

}  // namespace chunkd::index
