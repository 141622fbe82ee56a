// FingerprintIndex: the deduplication index shared by all streams (and, with
// the Redis backends, by all replicas). docs/design.md, "The fingerprint index".
//
// Every call is batched: one call carries many fingerprints and returns one
// result per fingerprint, in order. Entries live in a namespace (one tenant's
// index); namespaces never share entries. Per fingerprint the index keeps the
// chunk size, a reference count and, per set of chunking parameters, a short
// most-recently-used list of the sizes of the chunk that followed it
// (RapidCDC next-chunk size hints).
//
// Failures. A remote backend that cannot reach its server returns
// UNAVAILABLE with a message naming the server ("redis at 127.0.0.1:6379 is
// unreachable: Connection refused") and reconnects by itself on a later call.
// The Redis backends first wait, within IndexOptions::failover_wait, for a
// failover or a restart to end (re-sending only what is safe to re-send), so
// that such a call fails only when Redis stays away longer.
// An index that is full fails the writes that would grow it with
// RESOURCE_EXHAUSTED saying which limit and what to do (the memory and
// rocksdb indexes at IndexOptions::max_entries, the rocksdb index on a full
// disk, a Redis server at its maxmemory), and keeps
// serving everything else: reads, releases, and inserts of fingerprints it
// already has. Health() says so too while it lasts.
// Every fingerprint of a write batch is applied atomically (count and entry
// together), but a failed batch may have been applied for some of its
// fingerprints and not for others: a caller that retries a failed write must
// pass the same WriteToken so that nothing is counted twice.
//
// Thread safety: implementations are thread-safe; any number of streams call
// one index concurrently.
#ifndef CHUNKD_INDEX_FINGERPRINT_INDEX_H_
#define CHUNKD_INDEX_FINGERPRINT_INDEX_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "chunkd/tables.h"

namespace chunkd::index {

// Longest namespace name and WriteToken::stream_id: the table's
// (proto/chunkd/v1/tables.json), as every client checks them.
inline constexpr size_t kMaxNamespaceLength =
    chunking::tables::kNamespaceMaxLength;
inline constexpr size_t kMaxStreamIdLength = chunking::tables::kIdMaxLength;
// Longest chunking-parameter key of the next-size hints.
inline constexpr size_t kMaxParamsKeyLength = 64;
// Bounds of IndexOptions::next_sizes_length.
inline constexpr int kMaxNextSizesLength = 8;

// OK when `ns` is 1..kMaxNamespaceLength characters of [A-Za-z0-9._-];
// otherwise INVALID_ARGUMENT naming the `namespace` field and the rule.
absl::Status ValidateNamespace(absl::string_view ns);

// A chunk to insert.
struct InsertEntry {
  std::string fingerprint;  // binary digest
  uint32_t size = 0;        // chunk length in bytes
};

struct InsertResult {
  // True for exactly one caller per fingerprint: the one whose insert created
  // the entry. Racing inserts of the same new fingerprint see one true.
  bool is_new = false;
  // Reference count after this insert.
  uint64_t ref_count = 0;
};

// Makes a write batch idempotent per stream position. Entry i of a batch
// written with token {stream_id, first_position} has the position
// first_position + i; the index remembers, per (namespace, stream_id,
// position), that the write was applied and what it returned, for
// IndexOptions::token_ttl. Writing a position again (a client retrying a
// failed batch, or a whole stream) applies nothing and returns the result
// recorded the first time, so a retry after any failure counts every
// reference exactly once.
//
// REQUIRES: a position is written with the same fingerprint every time (the
// chunk at a stream offset never changes). Chunk ordinals within a stream
// are natural positions: a retried stream chunks the same bytes into the
// same chunks, whatever the batching. Insert and Release positions are
// separate: one stream id may be used for both.
struct WriteToken {
  // 1..kMaxStreamIdLength characters of [A-Za-z0-9._-], unique per logical
  // stream across retries (e.g. a client-chosen UUID).
  std::string stream_id;
  // Position of the batch's first entry. Default 0.
  uint64_t first_position = 0;
};

// OK for a well-formed token; otherwise INVALID_ARGUMENT naming stream_id.
absl::Status ValidateWriteToken(const WriteToken& token);

// OK when `params_key` is 1..kMaxParamsKeyLength printable ASCII characters
// other than space; otherwise INVALID_ARGUMENT naming params_key.
absl::Status ValidateParamsKey(absl::string_view params_key);

// Longest NextSize::run: the sizes recorded after the next one.
inline constexpr size_t kHintRunLength = 3;

// A next-chunk size observation: the chunk after `fingerprint` in some
// stream was `next_size` bytes long, and the chunks after that one were
// `run` long, in stream order (at most kHintRunLength; fewer where that
// stream ended or stopped learning).
struct NextSize {
  NextSize() = default;
  NextSize(std::string fingerprint, uint32_t next_size,
           std::vector<uint32_t> run = {})
      : fingerprint(std::move(fingerprint)),
        next_size(next_size),
        run(std::move(run)) {}

  std::string fingerprint;
  uint32_t next_size = 0;
  std::vector<uint32_t> run;
};

// The hints an entry holds under one parameter key: `sizes`, the sizes of
// the chunk that followed it, most recent first; `run`, the run recorded
// with sizes[0] (empty when there are no sizes).
struct NextHints {
  std::vector<uint32_t> sizes;
  std::vector<uint32_t> run;
};

class FingerprintIndex {
 public:
  virtual ~FingerprintIndex() = default;

  // Backend name as used by flags and metrics: "memory", "rocksdb",
  // "redis", "redis-cluster".
  virtual absl::string_view backend() const = 0;

  // OK when the index can serve now. Remote backends make one round trip
  // to every server they need (bounded by the command timeout) and return
  // UNAVAILABLE naming the first server that does not answer. Cheap enough
  // for a readiness check every second. RESOURCE_EXHAUSTED while the index
  // is full (new fingerprints are refused; see each backend for when), with
  // the message its refused inserts carry. Default: OK.
  virtual absl::Status Health() { return absl::OkStatus(); }

  // Ends every wait for a failover at once (see IndexOptions::failover_wait):
  // waiting calls fail with UNAVAILABLE after the round trip in progress, and
  // later calls fail instead of waiting. For a server that stops: its calls
  // must end within its grace period. Irreversible. Default: nothing.
  virtual void StopWaiting() {}

  // Calls waiting for a failover now, and waits that ended since start.
  struct WaitCounts {
    uint64_t waiting = 0;
    uint64_t recovered = 0;  // the call went on
    uint64_t expired = 0;    // the call failed (or chunkd stopped waiting)
  };
  // The counts of a backend that waits (the Redis ones); default nullopt.
  virtual std::optional<WaitCounts> FailoverWaits() { return std::nullopt; }

  // The number of entries over all namespaces, when the backend knows it
  // cheaply: the memory index exactly; nullopt for the Redis backends
  // (counting would scan every server). Default: nullopt.
  virtual std::optional<uint64_t> EntryCount() { return std::nullopt; }

  // What an embedded database's storage looks like now (the RocksDB
  // backend); nullopt for the others. Exported as metrics.
  struct StorageStats {
    uint64_t disk_bytes = 0;           // SST files and write-ahead logs
    uint64_t pending_compaction_bytes = 0;
    uint64_t running_compactions = 0;
    uint64_t stall_micros = 0;         // writes delayed or stopped, in all
    uint64_t cache_hits = 0;           // block cache, since start
    uint64_t cache_misses = 0;
    uint64_t cache_bytes = 0;          // in use (memtables charged to it)
    uint64_t cache_capacity = 0;
  };
  virtual std::optional<StorageStats> Storage() { return std::nullopt; }

  // Writes a consistent copy of an embedded database (the RocksDB backend)
  // to a new directory and returns its path; UNIMPLEMENTED for the others.
  virtual absl::StatusOr<std::string> Checkpoint() {
    return absl::UnimplementedError(absl::StrCat(
        "the ", backend(), " index has no checkpoints; only rocksdb has"));
  }

  // For each fingerprint, whether the namespace has it.
  virtual absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns, absl::Span<const std::string> fingerprints) = 0;

  // Insert-if-absent and count a reference, atomically per fingerprint. A
  // fingerprint present twice in one batch is new at most once.
  absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries) {
    return Insert(ns, entries, nullptr);
  }
  // The same, idempotent per position of `*token` when token is not null.
  virtual absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries,
      const WriteToken* token) = 0;

  // Drops one reference per fingerprint; an entry whose count reaches zero is
  // removed (with its hints). Returns the count left (0 for removed or absent
  // entries).
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints) {
    return Release(ns, fingerprints, nullptr);
  }
  // The same, idempotent per position of `*token` when token is not null.
  virtual absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints,
      const WriteToken* token) = 0;

  // Records next-chunk sizes under the chunking parameters `params_key`
  // (e.g. "fastcdc:4096:16384:65536:2:0"; hints learned under other
  // parameters are never returned): `next_size` moves to the front of its
  // fingerprint's most-recently-used list, which keeps at most
  // IndexOptions::next_sizes_length distinct sizes, and the observation's
  // run replaces the one the entry held (a run always belongs to the
  // list's first size). Observations for
  // fingerprints the namespace does not have are dropped: hints live and die
  // with their entry. Idempotent by nature: recording twice changes nothing.
  virtual absl::Status RecordNextSizes(absl::string_view ns,
                                       absl::string_view params_key,
                                       absl::Span<const NextSize> hints) = 0;

  // For each fingerprint, its hints under `params_key`; empty when there
  // are none or the entry is absent.
  virtual absl::StatusOr<std::vector<NextHints>> NextHintsOf(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const std::string> fingerprints) = 0;

  // NextHintsOf's sizes alone.
  absl::StatusOr<std::vector<std::vector<uint32_t>>> NextSizes(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const std::string> fingerprints);
};

// Settings of CreateIndex. Fields a backend does not use are ignored.
struct IndexOptions {
  // Redis credentials when the spec carries none: `redis_password` if not
  // empty, else the contents of `redis_password_file` (a trailing newline
  // trimmed) if not empty, else the environment variable
  // CHUNKD_REDIS_PASSWORD if set. Default: empty (no AUTH).
  std::string redis_password;
  std::string redis_password_file;

  // Bound on establishing a TCP connection (and its AUTH/SELECT/SCRIPT LOAD
  // handshake). Default 1 s.
  absl::Duration connect_timeout = absl::Seconds(1);
  // Bound on each blocking read or write of a command pipeline; a server
  // that takes longer is treated as unreachable. Default 2 s.
  absl::Duration command_timeout = absl::Seconds(2);
  // Connections per Redis server, opened on demand. A batch holds one
  // connection per server for its round trip. Default 16.
  int pool_size = 16;
  // After a connection fails, new connections to that server are attempted
  // no sooner than this, doubling per consecutive failure up to
  // reconnect_backoff_max; calls in between fail fast with UNAVAILABLE.
  // Defaults 50 ms and 1 s.
  absl::Duration reconnect_backoff_min = absl::Milliseconds(50);
  absl::Duration reconnect_backoff_max = absl::Seconds(1);

  // redis, redis-cluster: how long a call waits for Redis to come back
  // before it fails with UNAVAILABLE, while what it needs is away: a cluster
  // slot without a reachable master (a failover: the node timeout plus the
  // election), a server that refuses connections, does not answer or is
  // loading its data (a restart), or answers CLUSTERDOWN, MASTERDOWN,
  // READONLY, LOADING, BUSY or TRYAGAIN. Meanwhile the call re-reads the slot
  // map and re-sends, after pauses of 20 ms doubling to 500 ms, what may be
  // re-sent: whatever did not reach Redis, reads, and writes with a
  // WriteToken; a write without one whose outcome is unknown (sent, then no
  // reply) still fails at once. The wait counts from when the index started
  // failing: once it has failed for longer than this without answering in
  // between, calls fail at once, as an outage is no failover. Zero turns
  // waiting off: a failed call is re-sent once, at once. Default 30 s: a
  // failover at Redis's default node timeout (15 s) plus its election, or
  // a whole cluster reloading its AOF.
  absl::Duration failover_wait = absl::Seconds(30);
  // Told on the calling thread when a call starts waiting for Redis (true;
  // the thread then sleeps between attempts, for at most failover_wait) and
  // when it stops (false), without locks held. chunkd lends its worker pool
  // a thread meanwhile (pipeline::WorkerPool::Blocking), so that a wait
  // does not hold up other streams. Default: empty.
  std::function<void(bool waiting)> on_wait;

  // redis-cluster: each node's pipeline of writes ends with
  // WAIT min(cluster_wait_replicas, healthy replicas of that master), so
  // that a batch reported applied survives the failover of its master. 0
  // turns it off. Default 1.
  int cluster_wait_replicas = 1;
  // Longest a WAIT blocks. Fewer acknowledgements in time fail the batch
  // with UNAVAILABLE: it was applied on the master only, so its outcome is
  // unknown (retry with the same WriteToken). Default 500 ms.
  absl::Duration cluster_wait_timeout = absl::Milliseconds(500);

  // memory, rocksdb: the most entries the index holds at once, over all
  // namespaces; 0 = unlimited. At the limit an insert that would create an
  // entry fails with RESOURCE_EXHAUSTED naming --index_max_entries, and
  // Health() says so, until releases free entries (see memory_index.h,
  // which also gives the memory per entry, and the bound on write-token
  // records this implies). Default 0.
  uint64_t max_entries = 0;

  // rocksdb: the block cache, memtables charged to it (rocksdb_index.h);
  // the spec's cache_mib wins. 0: 256 MiB.
  uint64_t cache_bytes = 0;

  // redis, redis-cluster: the buckets per namespace, 2^bits, when the
  // database is new (a database keeps the number it was created with: see
  // redis_layout.h); `?bucket_bits=` in the spec. 0: 18.
  int redis_bucket_bits = 0;

  // Length of the next-chunk size lists (1..kMaxNextSizesLength). Default 2.
  int next_sizes_length = 2;
  // How long the index remembers the positions written with a WriteToken.
  // Default 10 minutes.
  absl::Duration token_ttl = absl::Minutes(10);

  // Where the index reports what an operator must know but no call fails
  // for, one line per call (the library itself never prints). The Redis
  // backends report a server whose maxmemory-policy is not noeviction (an
  // evicting Redis silently drops index entries) or that refuses to say,
  // once per server and again after it was unreachable (it may have
  // restarted with another configuration); and calls waiting for Redis to
  // come back (failover_wait): when they start, and when none waits any more,
  // at most one such pair of lines every 5 s. Called from any thread, without
  // locks held. Default: empty (dropped).
  std::function<void(const std::string& message)> warn;
};

// Creates the index named by a --index flag value:
//   memory
//       embedded, lost on restart;
//   rocksdb:///path[?query]
//       embedded, kept in a RocksDB database in /path (rocksdb_index.h,
//       which lists the query's options); opened here, so an index another
//       process holds, or of a newer format, fails here;
//   redis://[[user]:password@]host:port[/db][?query]
//       one Redis server (db 0..15, default 0);
//   redis-cluster://[[user]:password@]host:port[,host:port...][?query]
//       a Redis Cluster, reached through any of the given seed nodes.
// The query sets options in the URL, overriding `options`:
//   password_file=/path, connect_timeout_ms=N, command_timeout_ms=N,
//   pool_size=N, failover_wait_ms=N (0 turns waiting off), bucket_bits=N
//   (a new database's only). A password in the URL wins over every other
//   source.
// A Redis backend reads the database's layout key once, without waiting: a
// database of another layout fails here (FAILED_PRECONDITION), one that
// does not answer is asked again at the first call or health probe, so
// chunkd starts while Redis is down. INVALID_ARGUMENT, with a message that
// names --index, for an unknown scheme or a malformed spec; also when a
// password file cannot be read.
absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateIndex(
    absl::string_view spec, const IndexOptions& options);
absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateIndex(
    absl::string_view spec);

// The backend a --index value names, as backend() will say it ("memory",
// "rocksdb", "redis", "redis-cluster"), from its scheme alone; empty for
// a value CreateIndex refuses for its scheme. For what must be decided
// before the index exists (the memory plan sizes its cache).
absl::string_view BackendOfSpec(absl::string_view spec);

// Where the index a --index value names keeps its entries, from its scheme
// alone: what the server's memory plan and caches depend on, decided before
// the index exists.
struct IndexPlacement {
  // As BackendOfSpec says it.
  absl::string_view backend;
  // The entries live in chunkd's heap and are lost on restart (memory): a
  // lookup costs no I/O, and the entries count against chunkd's memory.
  bool in_process_memory = false;
  // The index runs inside chunkd (memory, rocksdb): max_entries applies.
  bool embedded = false;
  // The entries outlive chunkd (rocksdb, redis, redis-cluster).
  bool persistent = false;
  // chunkd holds a block cache of the index (rocksdb): cache_bytes applies.
  bool block_cache = false;
};
// INVALID_ARGUMENT, naming --index, for a scheme CreateIndex refuses.
absl::StatusOr<IndexPlacement> PlacementOfSpec(absl::string_view spec);

// `spec` with any password replaced by "***", for logs and messages.
std::string RedactIndexSpec(absl::string_view spec);

// Whether this build has the Redis backends (CMake CHUNKD_WITH_REDIS).
bool RedisSupported();

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_FINGERPRINT_INDEX_H_
