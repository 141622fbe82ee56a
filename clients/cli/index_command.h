// `chunkctl index migrate`: moves a Redis index to the bucket layout
// (server/index/redis_migrate.h does the work; docs/operations.md, "Moving an
// index to the bucket layout", is the guide).
//
// Thread safety: functions of one command line.
#ifndef CHUNKD_CLIENTS_CLI_INDEX_COMMAND_H_
#define CHUNKD_CLIENTS_CLI_INDEX_COMMAND_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "clients/cli/args.h"

namespace chunkd::cli {

extern const absl::string_view kIndexUsage;

struct MigrateConfig {
  std::string index;     // --index: a redis:// or redis-cluster:// spec
  int bucket_bits = 0;   // --bucket-bits; 0: the database's, or 18
  absl::Duration settle = absl::Seconds(3);  // --settle-ms
};

std::vector<FlagSpec> MigrateFlagSpecs();
// INVALID_ARGUMENT naming the flag for a bad command line.
absl::StatusOr<MigrateConfig> MigrateConfigFromArgs(const ParsedArgs& args);

// Runs the migration: a progress line on `err` every few seconds, the
// outcome on `out`. Redis' and the migration's failures as they are.
absl::Status RunMigrate(const MigrateConfig& config, std::FILE* out,
                        std::FILE* err);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_INDEX_COMMAND_H_
