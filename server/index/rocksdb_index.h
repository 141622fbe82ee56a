// RocksDbIndex: the embedded FingerprintIndex that survives restarts, in a
// RocksDB database in one directory. docs/design.md, "The rocksdb backend",
// gives the keys and values it writes, how a batch is applied and what each
// sync mode keeps. The parts: the batch operations (rocksdb_index.cc), the
// database (rocksdb_store.h), the byte formats (rocksdb_encoding.h), the
// --index URL (rocksdb_spec.cc).
//
// What it promises beyond FingerprintIndex's contract:
// - a batch (its entries, the entry count's change, its write-token
//   records) is one WriteBatch: after a crash it is there whole or not at
//   all;
// - the write-ahead log is written before every answer in every sync mode
//   (RocksDbOptions::sync says when it is fsynced), so a killed process
//   loses nothing acknowledged; next-size hints skip the log;
// - IndexOptions::max_entries as in the memory index (refused with
//   RESOURCE_EXHAUSTED naming --index_max_entries); a full disk fails
//   writes with RESOURCE_EXHAUSTED naming the directory, and Health() says
//   so until RocksDB has resumed;
// - memory: the block cache (index and filter blocks included) and the
//   memtables, charged to it, stay within RocksDbOptions::cache_bytes,
//   whatever the number of entries.
//
// Thread safety: thread-safe. One process per directory: RocksDB's LOCK
// file keeps a second one out (Open says so, naming the directory).
#ifndef CHUNKD_INDEX_ROCKSDB_INDEX_H_
#define CHUNKD_INDEX_ROCKSDB_INDEX_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "index/fingerprint_index.h"

namespace chunkd::index {

// When the write-ahead log is fsynced.
enum class RocksDbSync {
  kAlways,  // before each write's answer (group commit shares the fsync)
  kBatch,   // by a background thread every RocksDbOptions::sync_interval
  kNone,    // when the OS writes it back, or RocksDB flushes a memtable
};

struct RocksDbOptions {
  std::string path;  // the database directory, created if missing
  RocksDbSync sync = RocksDbSync::kBatch;
  absl::Duration sync_interval = absl::Milliseconds(100);
  // Block cache, memtables charged to it. Default 256 MiB.
  uint64_t cache_bytes = uint64_t{256} << 20;
  // Where a checkpoint goes: <checkpoint_dir>/<UTC time>. Default
  // "<path>.checkpoints".
  std::string checkpoint_dir;
};

// The database format this build writes and reads.
inline constexpr int kRocksDbFormatVersion = 1;

// Parses "rocksdb:///abs/path[?sync=always|batch|none&sync_interval_ms=N&
// cache_mib=N&checkpoint_dir=/abs/path]". INVALID_ARGUMENT naming --index
// and the problem.
absl::StatusOr<RocksDbOptions> ParseRocksDbSpec(absl::string_view spec);

// Opens (creating if needed) the database. FAILED_PRECONDITION naming the
// directory when another process holds it, when it holds a newer format or
// is not a chunkd index; UNAVAILABLE for an I/O error.
absl::StatusOr<std::unique_ptr<FingerprintIndex>> OpenRocksDbIndex(
    const RocksDbOptions& rocksdb, const IndexOptions& options);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_ROCKSDB_INDEX_H_
