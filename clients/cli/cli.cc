#include "clients/cli/cli.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "clients/cli/args.h"
#include "clients/cli/bench.h"
#include "clients/cli/command_common.h"
#include "clients/cli/commands.h"
#include "clients/cli/common_flags.h"
#include "clients/cli/index_command.h"
#include "clients/cli/input_file.h"
#include "clients/cli/json_output.h"
#include "clients/cli/progress.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"
#include "clients/cli/size.h"
#include "clients/cli/usage.h"

#ifndef CHUNKD_VERSION
#define CHUNKD_VERSION "unknown"
#endif

namespace chunkd::cli {
namespace {

int RunInfo(absl::Span<const std::string> words, std::FILE* out,
            std::FILE* err) {
  const Io io(out, err, "info");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kInfoUsage, "\n", kConnectionUsage));
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      words, WithOutputFlags(WithConnectionFlags({{"help", false}})));
  if (!args.ok()) return io.UsageError(args.status().message());
  if (!args->positional().empty()) {
    return io.UsageError(
        absl::StrCat("unexpected argument \"", args->positional()[0], "\""));
  }
  absl::StatusOr<CommonOptions> common = CommonOptionsFromArgs(*args);
  if (!common.ok()) return io.Refused(common.status());
  absl::StatusOr<chunkd::v1::GetServerInfoResponse> info =
      GetServerInfo(Connect(common->connect).get(), common->timeout);
  if (!info.ok()) return io.Failure(info.status());
  return io.Print(common->format == OutputFormat::kJson
                      ? ServerInfoJson(*info)
                      : FormatServerInfo(*info));
}

int RunBenchCommand(absl::Span<const std::string> words, std::FILE* out,
                    std::FILE* err) {
  const Io io(out, err, "bench");
  if (WantsHelp(words)) return io.Usage(BenchUsage());
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, BenchFlagSpecs());
  if (!args.ok()) return io.UsageError(args.status().message());
  if (!args->positional().empty()) {
    return io.UsageError(
        absl::StrCat("unexpected argument \"", args->positional()[0], "\""));
  }
  absl::StatusOr<BenchConfig> config = BenchConfigFromArgs(*args);
  if (!config.ok()) return io.UsageError(config.status().message());
  if (absl::Status s = RunBench(*config, out); !s.ok()) return io.Failure(s);
  return kExitOk;
}

int RunIndexCommand(absl::Span<const std::string> words, std::FILE* out,
                    std::FILE* err) {
  const Io io(out, err, "index");
  if (words.empty() || words[0] != "migrate") {
    if (WantsHelp(words)) return io.Usage(kIndexUsage);
    return io.UsageError(words.empty()
                             ? "a subcommand is required: migrate"
                             : absl::StrCat("unknown subcommand \"", words[0],
                                            "\"; known: migrate"));
  }
  const absl::Span<const std::string> rest = words.subspan(1);
  if (WantsHelp(rest)) return io.Usage(kIndexUsage);
  absl::StatusOr<ParsedArgs> args = ParseArgs(rest, MigrateFlagSpecs());
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<MigrateConfig> config = MigrateConfigFromArgs(*args);
  if (!config.ok()) return io.UsageError(config.status().message());
  if (absl::Status s = RunMigrate(*config, out, err); !s.ok()) {
    return io.Failure(s);
  }
  return kExitOk;
}

int RunSizeCommand(absl::Span<const std::string> words, std::FILE* out,
                   std::FILE* err) {
  const Io io(out, err, "size");
  if (WantsHelp(words)) return io.Usage(kSizeUsage);
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, SizeFlagSpecs());
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<SizeConfig> config = SizeConfigFromArgs(*args);
  if (!config.ok()) return io.UsageError(config.status().message());
  return io.Print(FormatSizeEstimate(*config));
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::FILE* out,
           std::FILE* err) {
  const Io io(out, err, "");
  if (args.empty()) {
    std::fputs(std::string(kMainUsage).c_str(), err);
    return kExitUsage;
  }
  const std::string& command = args[0];
  const absl::Span<const std::string> rest =
      absl::MakeConstSpan(args).subspan(1);
  if (command == "--help" || command == "-h" || command == "help") {
    if (command == "help" && !rest.empty()) {
      // "chunkctl help chunk" is "chunkctl chunk --help".
      return RunCli({rest[0], "--help"}, out, err);
    }
    return io.Usage(kMainUsage);
  }
  if (command == "--version") {
    return io.Print(absl::StrCat("chunkctl ", CHUNKD_VERSION, "\n"));
  }
  if (command == "chunk") return RunChunk(rest, out, err);
  if (command == "dedup") return RunDedup(rest, out, err);
  if (command == "estimate") return RunEstimate(rest, out, err);
  if (command == "info") return RunInfo(rest, out, err);
  if (command == "bench") return RunBenchCommand(rest, out, err);
  if (command == "size") return RunSizeCommand(rest, out, err);
  if (command == "index") return RunIndexCommand(rest, out, err);
  return io.UsageError(absl::StrCat("unknown command \"", command, "\""));
}

}  // namespace chunkd::cli
