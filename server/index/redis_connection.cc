#include "index/redis_connection.h"

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "index/redis_flush.h"
#include "index/redis_layout.h"

namespace chunkd::index {
namespace {

// `timeout` names the timeout in force: "command" or "connect".
std::string ContextErrorText(const redisContext* context,
                             absl::string_view timeout,
                             absl::Duration duration) {
  if (context->err == REDIS_ERR_IO &&
      (std::strcmp(context->errstr, std::strerror(EAGAIN)) == 0 ||
       std::strcmp(context->errstr, std::strerror(EWOULDBLOCK)) == 0)) {
    return absl::StrCat("no answer within the ", timeout, " timeout of ",
                        absl::FormatDuration(duration));
  }
  if (context->errstr[0] == '\0') return "connection failed";
  return context->errstr;
}

// What to tell an operator about the reply to CONFIG GET maxmemory-policy;
// empty when the policy is noeviction.
std::string PolicyWarning(absl::string_view server, const redisReply& reply) {
  const absl::string_view why =
      "an evicting Redis silently drops index entries, so that chunks count "
      "as new again and reference counts are lost; set maxmemory-policy "
      "noeviction (Redis then refuses new entries when full, and chunkd "
      "fails their inserts with RESOURCE_EXHAUSTED instead)";
  if (reply.type == REDIS_REPLY_ERROR) {
    return absl::StrCat("WARNING: redis at ", server,
                        " does not tell its maxmemory-policy (CONFIG GET: ",
                        absl::string_view(reply.str, reply.len),
                        "); make sure it is noeviction: ", why);
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 ||
      reply.element[1]->type != REDIS_REPLY_STRING) {
    return absl::StrCat("WARNING: redis at ", server,
                        " gave no maxmemory-policy; make sure it is "
                        "noeviction: ",
                        why);
  }
  const absl::string_view policy(reply.element[1]->str,
                                 reply.element[1]->len);
  if (policy == "noeviction") return "";
  return absl::StrCat("WARNING: redis at ", server, " runs with maxmemory-policy ",
                      policy, ": ", why);
}

// What to tell an operator about the reply to CONFIG GET
// hash-max-listpack-*; empty when both settings keep buckets listpacks.
std::string ListpackWarning(absl::string_view server, const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ARRAY) {
    return absl::StrCat(
        "WARNING: redis at ", server,
        " does not tell its hash-max-listpack-entries and -value (CONFIG GET",
        reply.type == REDIS_REPLY_ERROR
            ? absl::StrCat(": ", absl::string_view(reply.str, reply.len))
            : "",
        "); make sure they are at least ", kMinListpackEntries, " and ",
        kMinListpackValue, ", or index buckets take up to about twice the memory");
  }
  std::string out;
  for (size_t i = 0; i + 1 < reply.elements; i += 2) {
    const redisReply& name = *reply.element[i];
    const redisReply& value = *reply.element[i + 1];
    if (name.type != REDIS_REPLY_STRING || value.type != REDIS_REPLY_STRING) {
      continue;
    }
    const absl::string_view n(name.str, name.len);
    const long long least = n == "hash-max-listpack-entries" ? kMinListpackEntries
                            : n == "hash-max-listpack-value" ? kMinListpackValue
                                                             : 0;
    long long v = 0;
    if (least == 0 || !absl::SimpleAtoi(absl::string_view(value.str, value.len),
                                        &v) ||
        v >= least) {
      continue;
    }
    absl::StrAppend(&out, out.empty() ? "" : "; ", n, " is ", v,
                    ", below the ", least, " chunkd's index buckets need");
  }
  if (out.empty()) return out;
  return absl::StrCat(
      "WARNING: redis at ", server, ": ", out,
      ": Redis converts fuller buckets into full hashes, up to about twice the "
      "memory per entry; set them in redis.conf (docs/operations.md, "
      "\"Redis settings\")");
}

// What to do about a full server, after what it said.
constexpr absl::string_view kFullAdvice =
    ": new chunks cannot be indexed until it has room (lookups, releases "
    "and duplicates of indexed chunks still work); raise its maxmemory "
    "(CONFIG SET maxmemory <bytes>, and in its configuration) or free "
    "entries by releasing chunks that are no longer needed";

// The value of `field` in an INFO reply ("field:value\r\n" lines).
absl::string_view InfoField(absl::string_view info, absl::string_view field) {
  for (absl::string_view line : absl::StrSplit(info, '\n')) {
    if (absl::ConsumePrefix(&line, field) && absl::ConsumePrefix(&line, ":")) {
      return absl::StripTrailingAsciiWhitespace(line);
    }
  }
  return "";
}

// Whether the server closed an idle connection (or it failed): Redis sends
// nothing unasked, so anything to read on an idle connection is its end.
bool ClosedWhileIdle(const redisContext* context) {
  pollfd p{};
  p.fd = context->fd;
  p.events = POLLIN;
  return poll(&p, 1, 0) != 0;
}

}  // namespace

bool IsOutOfMemoryReply(absl::string_view error) {
  return absl::StartsWith(error, "OOM ");
}

RedisEndpoint::Lease::Lease(Lease&& other) noexcept
    : endpoint_(other.endpoint_),
      context_(std::exchange(other.context_, nullptr)),
      generation_(other.generation_),
      broken_(other.broken_) {}

RedisEndpoint::Lease::~Lease() {
  if (context_ != nullptr) endpoint_->Return(context_, generation_, broken_);
}

RedisEndpoint::RedisEndpoint(RedisAddress address,
                             const ConnectionSettings* settings)
    : address_(std::move(address)),
      name_(address_.ToString()),
      settings_(settings) {}

RedisEndpoint::~RedisEndpoint() {
  // Every lease is back by now (the index outlives its calls).
  for (redisContext* context : idle_) redisFree(context);
}

absl::Status RedisEndpoint::Unreachable(absl::string_view why) const {
  return absl::UnavailableError(
      absl::StrCat("redis at ", name_, " is unreachable: ", why));
}

absl::Status RedisEndpoint::ContextError(const redisContext* context) const {
  return Unreachable(
      ContextErrorText(context, "command", settings_->command_timeout));
}

absl::Status RedisEndpoint::ReplyError(absl::string_view what) const {
  return absl::UnavailableError(
      absl::StrCat("redis at ", name_, " refused the command: ", what));
}

absl::Status RedisEndpoint::OutOfMemory(absl::string_view reply) const {
  // A refusal inside a script ends with " script: <sha>, on @user_script:N.".
  const size_t script = reply.find(" script: ");
  if (script != absl::string_view::npos) reply = reply.substr(0, script);
  return absl::ResourceExhaustedError(
      absl::StrCat("redis at ", name_, " refuses to grow the index: \"",
                   reply, "\"", kFullAdvice));
}

absl::Status RedisEndpoint::Probe() {
  auto lease = Acquire();
  if (!lease.ok()) return lease.status();
  ReplyPtr reply = RedisCommand(lease->context(), {"INFO", "memory"});
  if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
    // INFO may be forbidden (ACL, rename-command): PING then.
    reply = RedisCommand(lease->context(), {"PING"});
  }
  if (reply == nullptr) {
    lease->MarkBroken();
    return ContextError(lease->context());
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    return ReplyError(absl::string_view(reply->str, reply->len));
  }
  if (reply->type != REDIS_REPLY_STRING) return absl::OkStatus();  // PONG
  const absl::string_view info(reply->str, reply->len);
  uint64_t used = 0;
  uint64_t max = 0;
  uint64_t not_counted = 0;
  if (!absl::SimpleAtoi(InfoField(info, "used_memory"), &used) ||
      !absl::SimpleAtoi(InfoField(info, "maxmemory"), &max) || max == 0) {
    return absl::OkStatus();
  }
  // Absent before Redis 4: then nothing is left out.
  (void)absl::SimpleAtoi(InfoField(info, "mem_not_counted_for_evict"),
                         &not_counted);
  const absl::string_view policy = InfoField(info, "maxmemory_policy");
  if (used <= max || used - not_counted <= max ||
      absl::StartsWith(policy, "allkeys-")) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "redis at ", name_, " refuses to grow the index for lack of memory "
      "(used memory ", used - not_counted, " bytes > maxmemory ", max,
      " bytes, maxmemory-policy ", policy.empty() ? "unknown" : policy, ")",
      kFullAdvice));
}

redisContext* RedisEndpoint::Connect(bool check_policy, std::string* error,
                                     std::string* warning) const {
  redisContext* context =
      redisConnectWithTimeout(address_.host.c_str(), address_.port,
                              absl::ToTimeval(settings_->connect_timeout));
  if (context == nullptr) {
    *error = "cannot allocate a connection";
    return nullptr;
  }
  if (context->err != 0) {
    *error = ContextErrorText(context, "connect", settings_->connect_timeout);
    redisFree(context);
    return nullptr;
  }
  // The handshake is part of connecting: bound it by the connect timeout.
  redisSetTimeout(context, absl::ToTimeval(settings_->connect_timeout));
  redisEnableKeepAlive(context);

  std::vector<std::vector<std::string>> handshake;
  if (!settings_->password.empty()) {
    if (settings_->username.empty()) {
      handshake.push_back({"AUTH", settings_->password});
    } else {
      handshake.push_back({"AUTH", settings_->username, settings_->password});
    }
  }
  if (settings_->db != 0) {
    handshake.push_back({"SELECT", std::to_string(settings_->db)});
  }
  for (const std::string& script : settings_->scripts) {
    handshake.push_back({"SCRIPT", "LOAD", script});
  }
  if (check_policy) handshake.push_back({"CONFIG", "GET", "maxmemory-policy"});
  if (check_policy && settings_->check_listpack) {
    handshake.push_back({"CONFIG", "GET", "hash-max-listpack-*"});
  }
  for (const auto& args : handshake) {
    std::vector<const char*> argv;
    std::vector<size_t> argv_len;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      argv_len.push_back(a.size());
    }
    RedisAppend(context, static_cast<int>(argv.size()), argv.data(),
                argv_len.data());
  }
  std::string failure;
  for (const auto& args : handshake) {
    ReplyPtr reply = RedisReadReply(context);
    if (reply == nullptr) {
      *error = ContextErrorText(context, "connect", settings_->connect_timeout);
      redisFree(context);
      return nullptr;
    }
    if (args[0] == "CONFIG") {
      const std::string said = args[2] == "maxmemory-policy"
                                   ? PolicyWarning(name_, *reply)
                                   : ListpackWarning(name_, *reply);
      if (!said.empty()) {
        absl::StrAppend(warning, warning->empty() ? "" : "\n", said);
      }
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR && failure.empty()) {
      failure = absl::StrCat(
          args[0], " failed: ", absl::string_view(reply->str, reply->len));
    }
  }
  if (!failure.empty()) {
    *error = std::move(failure);
    redisFree(context);
    return nullptr;
  }
  redisSetTimeout(context, absl::ToTimeval(settings_->command_timeout));
  return context;
}

void RedisEndpoint::RecordConnectFailureLocked(const std::string& error) {
  ++connect_failures_;
  absl::Duration backoff = settings_->reconnect_backoff_min;
  for (int i = 1;
       i < connect_failures_ && backoff < settings_->reconnect_backoff_max;
       ++i) {
    backoff *= 2;
  }
  if (backoff > settings_->reconnect_backoff_max) {
    backoff = settings_->reconnect_backoff_max;
  }
  retry_at_ = absl::Now() + backoff;
  last_error_ = error;
  // The server may come back with another configuration.
  policy_checked_ = false;
}

absl::StatusOr<RedisEndpoint::Lease> RedisEndpoint::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  const absl::Time deadline = absl::Now() + settings_->command_timeout;
  while (true) {
    while (!idle_.empty()) {
      redisContext* context = idle_.back();
      idle_.pop_back();
      if (!ClosedWhileIdle(context)) return Lease(this, context, generation_);
      // Closed since it was used (a restart): a command sent on it would
      // have an unknown outcome; one sent on a new connection has none.
      --open_;
      redisFree(context);
    }
    if (connect_failures_ > 0) {
      const absl::Time now = absl::Now();
      if (now < retry_at_ || probing_) {
        const absl::Duration wait =
            probing_ ? absl::ZeroDuration() : retry_at_ - now;
        return Unreachable(absl::StrCat(
            last_error_, " (next connection attempt in ",
            absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1))),
            ")"));
      }
    }
    if (open_ < settings_->pool_size) {
      ++open_;
      const bool probe = connect_failures_ > 0;
      if (probe) probing_ = true;
      const uint64_t generation = generation_;
      // Racing first connections may each check; that is harmless.
      const bool check_policy = !policy_checked_;
      lock.unlock();
      std::string error;
      std::string warning;
      redisContext* context = Connect(check_policy, &error, &warning);
      lock.lock();
      if (probe) probing_ = false;
      if (context == nullptr) {
        --open_;
        RecordConnectFailureLocked(error);
        cv_.notify_all();
        return Unreachable(error);
      }
      connect_failures_ = 0;
      if (check_policy) policy_checked_ = true;
      cv_.notify_all();
      if (!warning.empty() && settings_->warn) {
        lock.unlock();
        for (absl::string_view line : absl::StrSplit(warning, '\n')) {
          settings_->warn(std::string(line));
        }
        lock.lock();
      }
      return Lease(this, context, generation);
    }
    // Every context is leased: wait for one to come back.
    if (cv_.wait_until(lock, absl::ToChronoTime(deadline)) ==
            std::cv_status::timeout &&
        idle_.empty() && open_ >= settings_->pool_size) {
      return absl::UnavailableError(
          absl::StrCat("redis at ", name_, ": all ", settings_->pool_size,
                       " connections stayed busy for ",
                       absl::FormatDuration(settings_->command_timeout)));
    }
  }
}

void RedisEndpoint::Return(redisContext* context, uint64_t generation,
                           bool broken) {
  std::vector<redisContext*> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken || generation != generation_) {
      --open_;
      if (broken && generation == generation_) {
        // Connections opened before this failure likely failed too.
        ++generation_;
        policy_checked_ = false;
        stale.swap(idle_);
        open_ -= static_cast<int>(stale.size());
      }
      stale.push_back(context);
    } else {
      idle_.push_back(context);
    }
  }
  cv_.notify_all();
  for (redisContext* c : stale) redisFree(c);
}

absl::Status RedisEndpoint::LoadScripts(redisContext* context) const {
  for (const std::string& script : settings_->scripts) {
    ReplyPtr reply = RedisCommand(context, {"SCRIPT", "LOAD", script});
    if (reply == nullptr) return ContextError(context);
    if (reply->type == REDIS_REPLY_ERROR) {
      return ReplyError(absl::string_view(reply->str, reply->len));
    }
  }
  return absl::OkStatus();
}

void RedisAppend(redisContext* context, int argc, const char** argv,
                 const size_t* argv_len) {
  // Fails only when out of memory, which the next read reports as an I/O
  // error of the context.
  (void)redisAppendCommandArgv(context, argc, argv, argv_len);
}

bool RedisFlush(redisContext* context) {
  return chunkd_redis_flush(context) == 0;
}

ReplyPtr RedisReadReply(redisContext* context) {
  if (!RedisFlush(context)) return nullptr;
  void* reply = nullptr;
  if (redisGetReply(context, &reply) != REDIS_OK) return nullptr;
  return ReplyPtr(static_cast<redisReply*>(reply));
}

ReplyPtr RedisCommand(redisContext* context,
                      const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> argv_len;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    argv_len.push_back(a.size());
  }
  RedisAppend(context, static_cast<int>(argv.size()), argv.data(),
              argv_len.data());
  return RedisReadReply(context);
}

}  // namespace chunkd::index
