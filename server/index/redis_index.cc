#include "index/redis_index.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "index/redis_batch.h"
#include "index/redis_cluster.h"
#include "index/redis_ops.h"
#include "index/redis_scripts.h"
#include "index/redis_topology.h"

namespace chunkd::index {

const std::vector<std::string>& RedisIndex::Scripts() {
  return RedisScripts();
}

RedisIndex::RedisIndex(RedisConfig config)
    : config_(std::move(config)),
      wait_(config_.options.failover_wait, config_.options.on_wait,
            config_.options.warn) {
  settings_.username = config_.username;
  settings_.password = config_.password;
  settings_.db = config_.db;
  settings_.connect_timeout = config_.options.connect_timeout;
  settings_.command_timeout = config_.options.command_timeout;
  settings_.pool_size = config_.options.pool_size;
  settings_.reconnect_backoff_min = config_.options.reconnect_backoff_min;
  settings_.reconnect_backoff_max = config_.options.reconnect_backoff_max;
  settings_.scripts = Scripts();
  settings_.check_listpack = !config_.legacy_layout;
  settings_.warn = config_.options.warn;
  if (config_.cluster) {
    topology_ = std::make_unique<ClusterTopology>(config_.servers, &settings_);
  } else {
    topology_ =
        std::make_unique<SingleTopology>(config_.servers.front(), &settings_);
  }
}

RedisIndex::~RedisIndex() = default;

absl::string_view RedisIndex::backend() const {
  return config_.cluster ? "redis-cluster" : "redis";
}

absl::Status RedisIndex::Health() {
  absl::Status health = topology_->Health();
  if (health.ok() && !config_.legacy_layout) health = RecheckLayout();
  // The probe runs every second: it dates the start of an outage even when
  // no call comes.
  if (absl::IsUnavailable(health)) {
    wait_.Failed();
  } else {
    wait_.Answered();
  }
  return health;
}

void RedisIndex::StopWaiting() { wait_.Stop(); }

std::optional<FingerprintIndex::WaitCounts> RedisIndex::FailoverWaits() {
  const FailoverWait::Counts c = wait_.counts();
  return WaitCounts{c.waiting, c.recovered, c.expired};
}

absl::Status RedisIndex::Run(RedisBatchOp& op) { return Run(op, wait_); }

absl::Status RedisIndex::Run(RedisBatchOp& op, FailoverWait& wait) {
  return RedisBatch(op, *topology_, config_.options, wait).Run();
}

absl::StatusOr<std::vector<RedisIndex::CommandReply>> RedisIndex::Commands(
    const std::vector<std::vector<std::string>>& commands, bool writes) {
  return Commands(commands, writes, wait_);
}

absl::StatusOr<std::vector<RedisIndex::CommandReply>> RedisIndex::Commands(
    const std::vector<std::vector<std::string>>& commands, bool writes,
    FailoverWait& wait) {
  std::vector<CommandReply> replies;
  std::unique_ptr<RedisBatchOp> op = CommandsOp(commands, writes, &replies);
  if (absl::Status s = Run(*op, wait); !s.ok()) return s;
  return replies;
}

absl::StatusOr<std::vector<RedisEndpoint*>> RedisIndex::Masters() {
  return topology_->Masters(/*complete=*/true);
}

// The layout, and every fingerprint checked against it.
absl::Status RedisIndex::Prepare(absl::string_view ns, LayoutPtr* layout,
                                 absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (absl::Status s = Layout(wait_, layout); !s.ok()) return s;
  if (*layout == nullptr) return absl::OkStatus();
  for (const std::string& fp : fingerprints) {
    if (absl::Status s = (*layout)->ValidFingerprint(fp); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<bool>> RedisIndex::Lookup(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, fingerprints); !s.ok()) return s;
  std::vector<bool> found;
  std::unique_ptr<RedisBatchOp> op =
      LookupOp(ns, fingerprints, layout.get(), &found);
  if (absl::Status s = Run(*op); !s.ok()) return s;
  return found;
}

absl::StatusOr<std::vector<InsertResult>> RedisIndex::Insert(
    absl::string_view ns, absl::Span<const InsertEntry> entries,
    const WriteToken* token) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, {}); !s.ok()) return s;
  if (layout != nullptr) {
    for (const InsertEntry& e : entries) {
      if (absl::Status s = layout->ValidFingerprint(e.fingerprint); !s.ok()) {
        return s;
      }
    }
  }
  if (token != nullptr) {
    if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  }
  std::vector<InsertResult> results;
  std::unique_ptr<RedisBatchOp> op =
      InsertOp(ns, entries, token, config_.options.token_ttl, layout.get(),
               &results);
  if (absl::Status s = Run(*op); !s.ok()) return s;
  return results;
}

absl::StatusOr<std::vector<uint64_t>> RedisIndex::Release(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const WriteToken* token) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, fingerprints); !s.ok()) return s;
  if (token != nullptr) {
    if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  }
  std::vector<uint64_t> left;
  std::unique_ptr<RedisBatchOp> op =
      ReleaseOp(ns, fingerprints, token, config_.options.token_ttl,
                layout.get(), &left);
  if (absl::Status s = Run(*op); !s.ok()) return s;
  return left;
}

absl::Status RedisIndex::RecordNextSizes(absl::string_view ns,
                                         absl::string_view params_key,
                                         absl::Span<const NextSize> hints) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, {}); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  if (layout != nullptr) {
    for (const NextSize& h : hints) {
      if (absl::Status s = layout->ValidFingerprint(h.fingerprint); !s.ok()) {
        return s;
      }
    }
  }
  std::unique_ptr<RedisBatchOp> op =
      RecordNextOp(ns, params_key, hints, config_.options.next_sizes_length,
                   layout.get());
  return Run(*op);
}

absl::StatusOr<std::vector<NextHints>> RedisIndex::NextHintsOf(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, fingerprints); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  std::vector<NextHints> hints;
  std::unique_ptr<RedisBatchOp> op =
      NextHintsOp(ns, params_key, fingerprints, layout.get(), &hints);
  if (absl::Status s = Run(*op); !s.ok()) return s;
  return hints;
}

absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateRedisIndex(
    RedisConfig config) {
  auto index = std::make_unique<RedisIndex>(std::move(config));
  // A database of another layout stops chunkd at start; one that does not
  // answer yet is asked again at the first call or health probe.
  FailoverWait no_wait(absl::ZeroDuration(), nullptr, nullptr);
  RedisIndex::LayoutPtr layout;
  absl::Status layout_status = index->Layout(no_wait, &layout);
  if (absl::IsFailedPrecondition(layout_status)) return layout_status;
  return index;
}

}  // namespace chunkd::index
