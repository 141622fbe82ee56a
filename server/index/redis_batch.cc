// The sending half of RedisBatch (redis_batch.h): calls, rounds, pauses,
// pipelines.
#include <algorithm>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "index/redis_batch.h"
#include "index/redis_cluster.h"

namespace chunkd::index {

absl::Status RedisBatch::Run() {
  if (op_.size() == 0) return absl::OkStatus();
  if (cluster_) {
    SplitBySlot();
  } else {
    SplitConsecutive();
  }
  pending_.resize(calls_.size());
  for (size_t c = 0; c < calls_.size(); ++c) pending_[c] = c;
  while (!pending_.empty() && failure_.ok() && BeginRound()) {
    std::vector<Group> groups = GroupByServer();
    SendAll(groups);
    for (Group& g : groups) {
      if (g.lease.has_value()) ReadReplies(g);
    }
    groups.clear();  // returns the leases before the next round
    std::sort(next_.begin(), next_.end());
    next_.erase(std::unique(next_.begin(), next_.end()), next_.end());
    pending_.swap(next_);
  }
  EndWait();
  return failure_;
}

// One server: consecutive items, up to max_keys_per_call() a call.
void RedisBatch::SplitConsecutive() {
  const size_t max_keys = op_.max_keys_per_call();
  for (size_t i = 0; i < op_.size(); ++i) {
    if (calls_.empty() || calls_.back().items.size() == max_keys ||
        op_.StartsCall(i)) {
      calls_.emplace_back();
    }
    calls_.back().items.push_back(i);
  }
}

// A cluster: the items of one slot, up to max_keys_per_call() a call.
void RedisBatch::SplitBySlot() {
  const size_t max_keys = op_.max_keys_per_call();
  absl::flat_hash_map<int, size_t> open;  // slot -> call being filled
  for (size_t i = 0; i < op_.size(); ++i) {
    const int slot = KeySlot(op_.key(i));
    auto [it, added] = open.try_emplace(slot, calls_.size());
    if (added || calls_[it->second].items.size() == max_keys) {
      it->second = calls_.size();
      calls_.emplace_back();
      calls_.back().slot = slot;
    }
    calls_[it->second].items.push_back(i);
  }
}

// False (and the batch has failed) when the wait is over, or after one
// round of redirections too many.
bool RedisBatch::BeginRound() {
  if (pause_) {
    pause_ = false;
    rounds_ = 0;
    if (!Pause()) return false;
  } else if (rounds_ == kMaxRounds) {
    Fail(absl::UnavailableError(absl::StrCat(
        "redis: ", pending_.size(), " commands were still redirected after ",
        kMaxRounds, " attempts (cluster resharding?)")));
    return false;
  }
  ++rounds_;
  topology_.Refresh();
  next_.clear();
  return true;
}

// Before calls that failed are sent again: at once the first time (a fresh
// connection often does it: the pooled one was stale), then after a pause,
// until the deadline. False (and the batch has failed) once it has passed
// or chunkd stopped waiting.
bool RedisBatch::Pause() {
  if (++failed_rounds_ == 1) {
    wait_.Failed();
    deadline_ = wait_.Deadline();
    return true;
  }
  const absl::Time now = absl::Now();
  if (now >= deadline_ || wait_.stopped()) {
    Fail(WaitedInVain());
    return false;
  }
  if (!waiting_) {
    waiting_ = true;
    waiting_since_ = now;
    wait_.Begin(retry_why_);
  }
  const bool go_on = wait_.Sleep(std::min(pause_length_, deadline_ - now));
  pause_length_ = std::min(2 * pause_length_, kMaxPause);
  if (!go_on) {
    Fail(WaitedInVain());
    return false;
  }
  return true;
}

// The last failure, and why the call does not wait any longer.
absl::Status RedisBatch::WaitedInVain() const {
  if (wait_.bound() == absl::ZeroDuration()) return retry_why_;
  return absl::Status(
      retry_why_.code(),
      absl::StrCat(retry_why_.message(),
                   wait_.stopped()
                       ? " (no more waiting for redis to come back: chunkd "
                         "is stopping)"
                       : absl::StrCat(" (redis did not come back within the "
                                      "failover wait of ",
                                      absl::FormatDuration(wait_.bound()),
                                      ", --redis_failover_wait)")));
}

// What the batch tells the wait: whether it waited and how that ended, and
// whether Redis answered.
void RedisBatch::EndWait() {
  if (waiting_) wait_.End(failure_.ok(), absl::Now() - waiting_since_);
  if (absl::IsUnavailable(failure_)) {
    wait_.Failed();
  } else {
    wait_.Answered();
  }
}

// The pending calls by server; a call nobody serves is retried or fails.
std::vector<RedisBatch::Group> RedisBatch::GroupByServer() {
  std::vector<Group> groups;
  for (size_t c : pending_) {
    RedisRoute route;
    if (calls_[c].redirect != nullptr) {
      route.endpoint = calls_[c].redirect;
    } else {
      route = topology_.Route(calls_[c].slot);
      if (route.endpoint == nullptr) {
        // A slot without a master: the map is reloaded next round.
        RetryOrFail(c, topology_.NoRoute(calls_[c].slot), /*sent=*/false);
        continue;
      }
    }
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.endpoint == route.endpoint;
    });
    if (g == groups.end()) {
      groups.emplace_back();
      g = groups.end() - 1;
      g->endpoint = route.endpoint;
    }
    g->replicas = std::max(g->replicas, route.replicas);
    g->calls.push_back(c);
  }
  return groups;
}

// Sends every group's pipeline before reading any reply, so that the
// servers work in parallel. Leases are taken in one global order (by
// endpoint) so that batches holding several never wait in a cycle.
void RedisBatch::SendAll(std::vector<Group>& groups) {
  std::vector<size_t> order(groups.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::less<RedisEndpoint*>()(groups[a].endpoint, groups[b].endpoint);
  });
  for (size_t k : order) Send(groups[k]);
}

// Writes the pipeline of `g`; g.lease is set when it was sent.
void RedisBatch::Send(Group& g) {
  auto lease = g.endpoint->Acquire();
  if (!lease.ok()) {
    topology_.NodeFailed(g.endpoint);
    for (size_t c : g.calls) RetryOrFail(c, lease.status(), /*sent=*/false);
    return;
  }
  redisContext* context = lease->context();
  for (size_t c : g.calls) {
    if (calls_[c].asking) {
      const char* asking = "ASKING";
      const size_t asking_len = 6;
      RedisAppend(context, 1, &asking, &asking_len);
    }
    op_.Append(context, calls_[c].items, calls_[c].slot);
  }
  AppendWait(g, context);
  if (!RedisFlush(context)) {
    lease->MarkBroken();
    topology_.NodeFailed(g.endpoint);
    const absl::Status status = g.endpoint->ContextError(context);
    for (size_t c : g.calls) RetryOrFail(c, status, /*sent=*/true);
    return;
  }
  g.lease.emplace(*std::move(lease));
}

// Writes in a cluster end the pipeline with WAIT for the master's replicas,
// or, to a master with none in the slot map, with ROLE: a replica can come
// back (the old master rejoining the new one after a failover) without a
// MOVED or a failure that would reload the map.
void RedisBatch::AppendWait(Group& g, redisContext* context) {
  if (!cluster_ || !op_.writes() || options_.cluster_wait_replicas <= 0) {
    return;
  }
  if (g.replicas <= 0) {
    const char* role = "ROLE";
    const size_t role_len = 4;
    RedisAppend(context, 1, &role, &role_len);
    g.ask_role = true;
    return;
  }
  AppendWaitFor(g, context,
                std::min(options_.cluster_wait_replicas, g.replicas));
}

// Appends WAIT for `count` replicas (cluster_wait_timeout).
void RedisBatch::AppendWaitFor(Group& g, redisContext* context, int count) {
  g.wait = count;
  const std::string replicas = std::to_string(g.wait);
  const std::string timeout =
      std::to_string(absl::ToInt64Milliseconds(options_.cluster_wait_timeout));
  const char* argv[] = {"WAIT", replicas.c_str(), timeout.c_str()};
  const size_t argv_len[] = {4, replicas.size(), timeout.size()};
  RedisAppend(context, 3, argv, argv_len);
}

}  // namespace chunkd::index
