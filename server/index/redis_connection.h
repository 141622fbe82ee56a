// RedisEndpoint: one Redis server address with a pool of hiredis contexts,
// reconnection with exponential backoff, and the error messages that name
// the server.
//
// A redisContext is not thread-safe, so a caller leases one context for a
// whole pipelined round trip and gives it back. Contexts are opened on
// demand, up to pool_size. Every new context runs a handshake in one round
// trip: AUTH (when a password is set), SELECT (db != 0) and SCRIPT LOAD of
// every script in ConnectionSettings::scripts, so that EVALSHA finds them.
// The first connection (and the first after a failure) also reads
// maxmemory-policy: anything but noeviction is reported through
// ConnectionSettings::warn; so are listpack settings below what the bucket
// layout needs (ConnectionSettings::check_listpack).
//
// A full server: a write Redis refuses for lack of memory ("OOM command not
// allowed when used memory > 'maxmemory'.") is RESOURCE_EXHAUSTED naming the
// server (OutOfMemory()); Probe() tells it from INFO memory.
//
// An idle context that its server closed meanwhile (Redis sends nothing
// unasked, so an idle context with something to read is a closed one) is
// dropped when it would be leased: a restart between two calls leaves no
// command with an unknown outcome.
//
// Failure handling: a lease whose context broke (I/O error, timeout,
// protocol error) is returned with MarkBroken(); that drops the context and
// every idle one opened before it (they are likely dead too: the server
// restarted or the network failed). A failed connection attempt starts a
// backoff: for reconnect_backoff_min (doubling per consecutive failure up
// to reconnect_backoff_max) Acquire() fails fast with UNAVAILABLE instead of
// connecting; then one caller at a time probes until a connection succeeds.
//
// Thread safety: RedisEndpoint is thread-safe; a Lease is owned by one
// thread at a time.
#ifndef CHUNKD_INDEX_REDIS_CONNECTION_H_
#define CHUNKD_INDEX_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "index/redis_config.h"

namespace chunkd::index {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// What every connection of an index shares.
struct ConnectionSettings {
  std::string username;  // empty: AUTH <password>
  std::string password;  // empty: no AUTH
  int db = 0;
  absl::Duration connect_timeout = absl::Seconds(1);
  absl::Duration command_timeout = absl::Seconds(2);
  int pool_size = 16;
  absl::Duration reconnect_backoff_min = absl::Milliseconds(50);
  absl::Duration reconnect_backoff_max = absl::Seconds(1);
  // Lua bodies loaded on every new connection.
  std::vector<std::string> scripts;
  // Whether the policy check also reads hash-max-listpack-entries and
  // -value and warns when they are below what the bucket layout needs
  // (redis_layout.h).
  bool check_listpack = false;
  // IndexOptions::warn.
  std::function<void(const std::string&)> warn;
};

class RedisEndpoint {
 public:
  // A leased context; returns it to the pool on destruction.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();

    redisContext* context() const { return context_; }
    RedisEndpoint* endpoint() const { return endpoint_; }
    // The context must not be reused (its replies are out of step with its
    // commands, or the socket failed).
    void MarkBroken() { broken_ = true; }
    bool broken() const { return broken_; }

   private:
    friend class RedisEndpoint;
    Lease(RedisEndpoint* endpoint, redisContext* context, uint64_t generation)
        : endpoint_(endpoint), context_(context), generation_(generation) {}

    RedisEndpoint* endpoint_;
    redisContext* context_;
    uint64_t generation_;
    bool broken_ = false;
  };

  // REQUIRES: `settings` outlives the endpoint.
  RedisEndpoint(RedisAddress address, const ConnectionSettings* settings);
  RedisEndpoint(const RedisEndpoint&) = delete;
  RedisEndpoint& operator=(const RedisEndpoint&) = delete;
  ~RedisEndpoint();

  // An idle context, a new one, or UNAVAILABLE (server unreachable, in
  // backoff, or every pooled context busy for longer than the command
  // timeout).
  absl::StatusOr<Lease> Acquire();

  const RedisAddress& address() const { return address_; }
  const std::string& name() const { return name_; }

  // UNAVAILABLE "redis at <address> is unreachable: <why>".
  absl::Status Unreachable(absl::string_view why) const;
  // The error of a context that failed, as UNAVAILABLE naming the server.
  absl::Status ContextError(const redisContext* context) const;
  // An error reply of the server, as UNAVAILABLE naming the server.
  absl::Status ReplyError(absl::string_view what) const;
  // An OOM error reply of the server, as RESOURCE_EXHAUSTED naming the
  // server, quoting Redis and saying what to do:
  //   redis at 127.0.0.1:6379 refuses to grow the index: "OOM command not
  //   allowed when used memory > 'maxmemory'." ...
  absl::Status OutOfMemory(absl::string_view reply) const;

  // Whether the server can serve now, in one round trip on a pooled
  // connection (cheap enough for a probe every second): INFO memory. OK;
  // UNAVAILABLE when it does not answer or answers with an error (e.g.
  // NOAUTH); RESOURCE_EXHAUSTED while it refuses writes for lack of memory,
  // i.e. maxmemory > 0, used_memory - mem_not_counted_for_evict > maxmemory
  // (Redis' own test) and a maxmemory-policy other than allkeys-* (which
  // evicts instead). A server that does not allow INFO is PINGed instead
  // and never reported full.
  absl::Status Probe();

  // Sends SCRIPT LOAD for every script again (after NOSCRIPT).
  absl::Status LoadScripts(redisContext* context) const;

 private:
  void Return(redisContext* context, uint64_t generation, bool broken);
  // A connected, handshaken context, or nullptr with *error set. With
  // `check_policy` the handshake also asks for maxmemory-policy and sets
  // *warning when it is not noeviction (or cannot be read).
  redisContext* Connect(bool check_policy, std::string* error,
                        std::string* warning) const;
  // Requires mu_ held.
  void RecordConnectFailureLocked(const std::string& error);

  const RedisAddress address_;
  const std::string name_;
  const ConnectionSettings* const settings_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<redisContext*> idle_;  // guarded by mu_
  int open_ = 0;                     // guarded by mu_: idle + leased + opening
  uint64_t generation_ = 0;          // guarded by mu_
  int connect_failures_ = 0;         // guarded by mu_: consecutive
  absl::Time retry_at_;              // guarded by mu_
  bool probing_ = false;             // guarded by mu_
  std::string last_error_;           // guarded by mu_
  bool policy_checked_ = false;      // guarded by mu_: since the last failure
};

// Whether an error reply is Redis refusing a write for lack of memory: "OOM
// command not allowed when used memory > 'maxmemory'." (with " script: ..."
// after it when a script's command was refused).
bool IsOutOfMemoryReply(absl::string_view error);

// Sends one command (binary-safe arguments) and reads its reply. nullptr on
// an I/O error (then the context is unusable).
ReplyPtr RedisCommand(redisContext* context,
                      const std::vector<std::string>& args);

// Flushes the context's output buffer. False on an I/O error.
bool RedisFlush(redisContext* context);

// Reads the next reply. nullptr on an I/O error.
ReplyPtr RedisReadReply(redisContext* context);

// Appends one command to the context's output buffer.
void RedisAppend(redisContext* context, int argc, const char** argv,
                 const size_t* argv_len);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_CONNECTION_H_
