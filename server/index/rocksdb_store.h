// RocksDbStore: the RocksDB database under RocksDbIndex (rocksdb_index.h),
// everything about it that is not an index operation: the options (one LRU
// block cache that the memtables are charged to, bloom filters, LZ4), the
// column families, the format check, the background fsync of the log,
// reads and whole-batch writes, storage figures and checkpoints.
// docs/design.md, "The rocksdb backend"; the byte formats are
// rocksdb_encoding.h's.
//
// Column families: "entries" (entry keys and values), "tokens" (write-token
// records; a compaction filter drops those older than the token TTL, and
// ReadTokens ignores them) and "default" (the format version under
// "chunkd.format", the entry count under "chunkd.entries", to which
// AddToCount merges signed changes with RocksDB's uint64add operator).
//
// Thread safety: thread-safe once Open() returned OK. One process per
// directory (RocksDB's LOCK file; Open says so, naming the directory).
#ifndef CHUNKD_INDEX_ROCKSDB_STORE_H_
#define CHUNKD_INDEX_ROCKSDB_STORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "index/fingerprint_index.h"
#include "index/rocksdb_encoding.h"
#include "index/rocksdb_index.h"
#include "rocksdb/cache.h"
#include "rocksdb/compaction_filter.h"
#include "rocksdb/db.h"
#include "rocksdb/statistics.h"
#include "rocksdb/write_batch.h"

namespace chunkd::index {

// Drops write-token records older than the token TTL.
class ExpiredTokens final : public rocksdb::CompactionFilter {
 public:
  explicit ExpiredTokens(absl::Duration ttl) : ttl_(ttl) {}
  bool Filter(int level, const rocksdb::Slice& key,
              const rocksdb::Slice& existing_value, std::string* new_value,
              bool* value_changed) const override;
  const char* Name() const override { return "chunkd.ExpiredTokens"; }

 private:
  absl::Duration ttl_;
};

class RocksDbStore {
 public:
  RocksDbStore(const RocksDbOptions& rocksdb, absl::Duration token_ttl);
  RocksDbStore(const RocksDbStore&) = delete;
  RocksDbStore& operator=(const RocksDbStore&) = delete;
  // Stops the sync thread, fsyncs a log written since its last fsync,
  // closes the database.
  ~RocksDbStore();

  // Opens (creating if needed) the database with a cache of `cache_bytes`,
  // checks its format version (writing it into a new database) and reads
  // its entry count. FAILED_PRECONDITION naming the directory when another
  // process holds it, when it holds a newer format or is not a chunkd
  // index; UNAVAILABLE for an I/O error.
  absl::Status Open(uint64_t cache_bytes);
  // The entry count Open() read.
  uint64_t entry_count() const { return opened_count_; }
  const std::string& path() const { return path_; }

  // The entries of `keys` (in order); DATA_LOSS for an unreadable one.
  absl::StatusOr<std::vector<std::optional<rocksdb_format::EntryValue>>>
  ReadEntries(const std::vector<std::string>& keys);
  // The recorded results of positions [first, first + n) of `prefix`
  // (rocksdb_format::TokenPrefix), expired records passed over.
  absl::StatusOr<std::vector<std::optional<uint64_t>>> ReadTokens(
      const std::string& prefix, uint64_t first, size_t n);

  rocksdb::ColumnFamilyHandle* entries() const { return entries_cf_; }
  rocksdb::ColumnFamilyHandle* tokens() const { return tokens_cf_; }
  // Adds `delta` to the entry count as `batch` commits.
  void AddToCount(rocksdb::WriteBatch* batch, int64_t delta) const;
  // Writes `batch` whole. `sync`: through the log, fsynced as
  // RocksDbOptions::sync says; otherwise without the log (hints).
  // RESOURCE_EXHAUSTED naming the directory for a full disk.
  absl::Status Commit(rocksdb::WriteBatch* batch, bool sync);

  // The last write's error, OK again once RocksDB resumed (tried here).
  absl::Status Health();
  FingerprintIndex::StorageStats Storage();
  // A checkpoint in <checkpoint_dir>/<UTC time>; its path.
  absl::StatusOr<std::string> Checkpoint();

 private:
  absl::Status OpenDatabase(uint64_t cache_bytes);
  absl::Status CheckFormat();
  void SyncLoop();

  const std::string path_;
  const RocksDbSync sync_;
  const absl::Duration sync_interval_;
  const std::string checkpoint_dir_;
  const absl::Duration token_ttl_;
  ExpiredTokens expired_tokens_;

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> families_;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* entries_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* tokens_cf_ = nullptr;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  uint64_t opened_count_ = 0;

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

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_ROCKSDB_STORE_H_
