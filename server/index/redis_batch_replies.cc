// The reading half of RedisBatch (redis_batch.h): replies, error replies,
// redirections, WAIT and ROLE, retries and failure.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "index/redis_batch.h"

namespace chunkd::index {
namespace {

// The redirection in an error reply "MOVED 3999 127.0.0.1:6381".
bool ParseRedirect(absl::string_view error, absl::string_view kind, int* slot,
                   absl::string_view* address) {
  if (!absl::ConsumePrefix(&error, kind)) return false;
  std::vector<absl::string_view> parts =
      absl::StrSplit(error, ' ', absl::SkipEmpty());
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], slot)) return false;
  *address = parts[1];
  return true;
}

// Error replies that say the command did not run because the server cannot
// serve it now: a cluster without a quorum or with a slot not served
// (CLUSTERDOWN), a replica cut off from its master (MASTERDOWN) or one that
// a failover made of a master (READONLY: our scripts fail at their first
// write, before they changed anything), a server loading its data after a
// restart (LOADING), one busy with another script (BUSY).
bool ServerCannotServeNow(absl::string_view error) {
  for (absl::string_view prefix :
       {"CLUSTERDOWN", "MASTERDOWN", "READONLY", "LOADING", "BUSY"}) {
    if (absl::StartsWith(error, prefix)) return true;
  }
  return false;
}

// The replicas online per the ROLE reply of a master: "master", its offset,
// then one [ip, port, offset] per replica online. 0 for any other reply (a
// replica's, or an error such as an ACL user's NOPERM).
int OnlineReplicas(const redisReply& role) {
  if (role.type != REDIS_REPLY_ARRAY || role.elements < 3) return 0;
  const redisReply& kind = *role.element[0];
  const redisReply& replicas = *role.element[2];
  if ((kind.type != REDIS_REPLY_STRING && kind.type != REDIS_REPLY_STATUS) ||
      absl::string_view(kind.str, kind.len) != "master" ||
      replicas.type != REDIS_REPLY_ARRAY) {
    return 0;
  }
  return static_cast<int>(replicas.elements);
}
}  // namespace

// Reads the replies of the pipeline of `g`, its WAIT's included, and
// reloads the scripts after NOSCRIPT.
void RedisBatch::ReadReplies(Group& g) {
  redisContext* context = g.lease->context();
  absl::Status broken;
  for (size_t c : g.calls) {
    if (!broken.ok()) {
      RetryOrFail(c, broken, /*sent=*/true);
      continue;
    }
    broken = ReadReply(g, context, c);
  }
  if (broken.ok() && g.ask_role) broken = ReadRole(g, context);
  if (broken.ok() && g.wait > 0) broken = ReadWait(g, context);
  if (broken.ok() && g.reload_scripts) {
    absl::Status loaded = g.endpoint->LoadScripts(context);
    if (!loaded.ok()) {
      // Re-sending would meet NOSCRIPT again.
      Fail(loaded);
      broken = loaded;
    }
  }
  if (!broken.ok()) {
    g.lease->MarkBroken();
    topology_.NodeFailed(g.endpoint);
  }
}

// Reads the reply of call c (after ASKING's, if sent); not OK when the
// connection broke.
absl::Status RedisBatch::ReadReply(Group& g, redisContext* context, size_t c) {
  if (calls_[c].asking && RedisReadReply(context) == nullptr) {
    return Broke(g, context, c);
  }
  ReplyPtr reply = RedisReadReply(context);
  if (reply == nullptr) return Broke(g, context, c);
  if (reply->type != REDIS_REPLY_ERROR) {
    if (!op_.Accept(calls_[c].items, *reply)) {
      Fail(absl::InternalError(
          absl::StrCat("redis at ", g.endpoint->name(),
                       " sent an unexpected reply of type ", reply->type)));
    }
    return absl::OkStatus();
  }
  OnError(g, c, absl::string_view(reply->str, reply->len));
  return absl::OkStatus();
}

// The connection broke while reading call c's reply.
absl::Status RedisBatch::Broke(Group& g, redisContext* context, size_t c) {
  absl::Status broken = g.endpoint->ContextError(context);
  RetryOrFail(c, broken, /*sent=*/true);
  return broken;
}

// Call c got the error reply `error`.
void RedisBatch::OnError(Group& g, size_t c, absl::string_view error) {
  int slot = -1;
  absl::string_view address;
  if (ParseRedirect(error, "MOVED ", &slot, &address) ||
      ParseRedirect(error, "ASK ", &slot, &address)) {
    Redirect(g, c, error, slot, address);
  } else if (absl::StartsWith(error, "NOSCRIPT")) {
    g.reload_scripts = true;
    Resend(c);
  } else if (absl::StartsWith(error, "TRYAGAIN")) {
    // A multi-key call met a slot in migration: nothing ran. One call per
    // key after a pause lets each go where it is.
    SplitIntoSingles(c);
    RetryOrFail(c, g.endpoint->ReplyError(error), /*sent=*/false);
  } else if (IsOutOfMemoryReply(error)) {
    // Nothing of the call ran (see admit in the scripts).
    Fail(g.endpoint->OutOfMemory(error));
  } else if (ServerCannotServeNow(error)) {
    // Nothing ran; a failover may be under way: reload the map and wait.
    topology_.NodeFailed(g.endpoint);
    RetryOrFail(c, g.endpoint->ReplyError(error), /*sent=*/false);
  } else {
    Fail(g.endpoint->ReplyError(error));
  }
}

// MOVED or ASK: call c goes to the server named, next round (nothing ran:
// safe to re-send).
void RedisBatch::Redirect(Group& g, size_t c, absl::string_view error, int slot,
                          absl::string_view address) {
  const bool moved = absl::StartsWith(error, "MOVED");
  RedisEndpoint* to = topology_.Redirect(slot, address, moved, g.endpoint);
  if (to == nullptr) {
    Fail(g.endpoint->ReplyError(error));
    return;
  }
  calls_[c].redirect = to;
  calls_[c].asking = !moved;
  next_.push_back(c);
}

// After TRYAGAIN some of call c's keys have moved and some not: one call
// per key lets each go where it is. Call c keeps its first item.
void RedisBatch::SplitIntoSingles(size_t c) {
  const std::vector<size_t> rest(calls_[c].items.begin() + 1,
                                 calls_[c].items.end());
  const int slot = calls_[c].slot;
  calls_[c].items.resize(1);
  for (size_t item : rest) {
    next_.push_back(calls_.size());
    Call single;
    single.items = {item};
    single.slot = slot;
    calls_.push_back(std::move(single));
  }
}

// Reads the ROLE reply of a master the slot map knows no replica of. When
// it has some online, the map is behind: it learns them, and this batch
// waits for them as the next ones will, with a WAIT of its own (one more
// round trip). Not OK when the connection broke.
absl::Status RedisBatch::ReadRole(Group& g, redisContext* context) {
  ReplyPtr role = RedisReadReply(context);
  if (role != nullptr) {
    const int online = OnlineReplicas(*role);
    if (online == 0) return absl::OkStatus();
    topology_.ReplicasOnline(g.endpoint, online);
    AppendWaitFor(g, context,
                  std::min(options_.cluster_wait_replicas, online));
    if (RedisFlush(context)) return absl::OkStatus();
  }
  absl::Status broken = g.endpoint->ContextError(context);
  for (size_t c : g.calls) RetryOrFail(c, broken, /*sent=*/true);
  return broken;
}

// Reads the WAIT's reply; not OK when the connection broke.
absl::Status RedisBatch::ReadWait(Group& g, redisContext* context) {
  ReplyPtr acks = RedisReadReply(context);
  if (acks == nullptr) {
    absl::Status broken = g.endpoint->ContextError(context);
    for (size_t c : g.calls) RetryOrFail(c, broken, /*sent=*/true);
    return broken;
  }
  if (acks->type != REDIS_REPLY_INTEGER || acks->integer < g.wait) {
    // Applied on the master only: a failover now (or one under way, that
    // demoted this master without its knowing yet) would lose it. The
    // outcome is unknown to the caller, as after a broken connection.
    const absl::Status unconfirmed = absl::UnavailableError(absl::StrCat(
        "redis at ", g.endpoint->name(), ": writes not confirmed by ", g.wait,
        " replica(s) within ",
        absl::FormatDuration(options_.cluster_wait_timeout),
        " (failover under way?)"));
    for (size_t c : g.calls) RetryOrFail(c, unconfirmed, /*sent=*/true);
  }
  return absl::OkStatus();
}

// Nothing of call c ran: it is re-sent next round, routed afresh.
void RedisBatch::Resend(size_t c) {
  calls_[c].redirect = nullptr;
  calls_[c].asking = false;
  next_.push_back(c);
}

// Call c failed with `status`; `sent` when the server may have run it. A
// call is sent again, after a pause and within the wait, when that is
// safe: it did not run, or running it twice does no harm.
void RedisBatch::RetryOrFail(size_t c, absl::Status status, bool sent) {
  Call& call = calls_[c];
  call.redirect = nullptr;
  call.asking = false;
  if (sent && !op_.idempotent()) {
    Fail(absl::Status(
        status.code(),
        absl::StrCat(status.message(),
                     " (the write may have been applied; without a write "
                     "token it is not sent again)")));
    return;
  }
  retry_why_ = std::move(status);
  pause_ = true;
  next_.push_back(c);
}

// The batch fails with the first failure.
void RedisBatch::Fail(absl::Status status) {
  if (failure_.ok()) failure_ = std::move(status);
}

}  // namespace chunkd::index
