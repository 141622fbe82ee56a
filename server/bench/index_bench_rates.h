// index_bench's rates: Redis CPU per operation of chunkd's index calls and
// of the plainest raw commands on the same keys, and the redis-benchmark
// yardstick they are divided by. index_bench.cc says what is measured.
#ifndef CHUNKD_SERVER_BENCH_INDEX_BENCH_RATES_H_
#define CHUNKD_SERVER_BENCH_INDEX_BENCH_RATES_H_

#include "bench/index_bench_fill.h"

namespace chunkd::index::bench {

struct Rate {
  double ops = -1;        // operations per second; < 0: failed
  double server_us = -1;  // server CPU microseconds per operation
  double server_busy = -1;
};

// redis-benchmark's requests per second for `command` pipelined 64 deep
// (-P 64, its default 50 connections) on database kBaselineDb, with the
// server's CPU per request. `random_keys`: -r, so that __rand_int__ in the
// command becomes a random 12-digit number (a new key each time, mostly).
Rate RedisBenchmark(testing::DirectRedis& direct, const std::string& host,
                    int port, int requests, const std::string& command,
                    int64_t random_keys);

// The baselines, each redis-benchmark -P 64 on the same server:
//   SET      SET of one key, again and again: the yardstick;
//   SET -r   SET of new keys;
//   HSET, HINCRBY, EXISTS of random keys.
struct Baselines {
  Rate set, set_r, hset_new, hincrby, exists;
};

// `direct` is on database kBaselineDb.
absl::StatusOr<Baselines> MeasureBaselines(testing::DirectRedis& direct,
                                           const std::string& host, int port,
                                           int requests);

enum class Op { kInsertNew, kInsertDuplicate, kInsertTokened, kLookup };

// The plainest commands over the very keys chunkd's operations use, in the
// same order, batches and threads, each batch one pipelined round trip on a
// connection per thread, without scripts (and without their atomicity).
enum class Raw {
  kCreate,     // old: HSET <key> r 1 s 16384 of a new key (replies 2);
               // new: HSET <bucket> <field> <value> of a new field (1)
  kIncrement,  // old: HINCRBY <key> r 1 (replies 4, a fourth reference);
               // new: HSET <bucket> <field> <value of count 4> (0)
  kExists,     // old: EXISTS <key>; new: HEXISTS <bucket> <field> (1)
};

// One raw command for fingerprint `fp` of `s`, appended; its reply.
long long AppendRaw(const Subject& s, Raw raw, const std::string& fp,
                    const std::string& key, const std::string& value,
                    RawConnection& c);

// What `run`'s first n fingerprints cost the server per operation, from
// `threads` connections, or ops < 0 (printed) after a failure. `work`
// gets the thread's connection and a batch.
Rate MeasureOnConnections(
    testing::DirectRedis& direct, const Server& server, int db, int n,
    int batch, int threads,
    const std::function<absl::Status(RawConnection&, int64_t, int64_t)>&
        work);

Rate MeasureRaw(Subject& s, const Server& server, Raw raw, uint64_t run,
                int n, int batch, int threads);

// Deletes `run`'s first n entries (each must exist), unmeasured.
absl::Status DeleteEntries(Subject& s, const Server& server, uint64_t run,
                           int n, int threads);

// Checks the answers of one batch of `op`.
absl::Status RunOp(FingerprintIndex& index, Op op, uint64_t run, int64_t first,
                   int64_t last);

// Runs `op` over fingerprints [0, n) of `run` split over threads.
Rate Measure(Subject& s, Op op, uint64_t run, int n, int batch, int threads);

}  // namespace chunkd::index::bench

#endif  // CHUNKD_SERVER_BENCH_INDEX_BENCH_RATES_H_
