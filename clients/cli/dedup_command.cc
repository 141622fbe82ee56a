// `chunkctl dedup`: its command line, the files sent in turn, the report
// lines.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "clients/cli/args.h"
#include "clients/cli/chunk_options.h"
#include "clients/cli/command_common.h"
#include "clients/cli/commands.h"
#include "clients/cli/common_flags.h"
#include "clients/cli/dedup_file.h"
#include "clients/cli/input_file.h"
#include "clients/cli/json_output.h"
#include "clients/cli/progress.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"
#include "clients/cli/replay.h"
#include "clients/cli/usage.h"

namespace chunkd::cli {
namespace {

std::string Ratio(uint64_t bytes, uint64_t unique_bytes) {
  if (unique_bytes == 0) return "inf";
  return absl::StrFormat(
      "%.2f", static_cast<double>(bytes) / static_cast<double>(unique_bytes));
}

// One line of `dedup`'s output, with its newline: a file's (`name`), or the
// total line (nullopt).
std::string DedupLine(OutputFormat format,
                      const std::optional<std::string>& name,
                      const DedupTotals& file, const DedupTotals& running) {
  if (format == OutputFormat::kJson) {
    return DedupJsonLine(name, file, running) + "\n";
  }
  std::string line = absl::StrFormat(
      "%s bytes=%d unique_bytes=%d chunks=%d unique_chunks=%d ratio=%s",
      name.value_or("total"), file.bytes, file.unique_bytes, file.chunks,
      file.unique_chunks, Ratio(running.bytes, running.unique_bytes));
  if (file.hints_tried > 0) {
    absl::StrAppendFormat(
        &line,
        " hints_tried=%d hints_accepted=%d hints_rejected=%d "
        "hint_skipped_bytes=%d",
        file.hints_tried, file.hints_accepted, file.hints_rejected,
        file.hint_skipped_bytes);
  }
  return line + "\n";
}

void AddTotals(const DedupTotals& file, DedupTotals* total) {
  total->bytes += file.bytes;
  total->unique_bytes += file.unique_bytes;
  total->chunks += file.chunks;
  total->unique_chunks += file.unique_chunks;
  total->hints_tried += file.hints_tried;
  total->hints_accepted += file.hints_accepted;
  total->hints_rejected += file.hints_rejected;
  total->hint_skipped_bytes += file.hint_skipped_bytes;
}

// Everything `chunkctl dedup` needs, from its command line.
struct DedupCommand {
  DedupFileOptions file;
  CommonOptions common;
  std::vector<std::string> files;
};

// --hints, checked against the algorithm; nullopt when not given.
absl::StatusOr<std::optional<chunkd::v1::HintTest>> DedupHints(
    const ParsedArgs& args, const ChunkFlags& flags) {
  std::optional<std::string> name = args.Get("hints");
  if (!name.has_value()) return std::nullopt;
  absl::StatusOr<chunkd::v1::HintTest> test = ParseHints(*name);
  if (!test.ok()) return test.status();
  if (*test != chunkd::v1::HINT_TEST_OFF &&
      EffectiveAlgorithm(flags) != chunking::Algorithm::kFastCdc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hints ", HintsName(*test), " needs --algorithm fastcdc, not ",
        chunking::AlgorithmName(EffectiveAlgorithm(flags)),
        " (hints apply to FastCDC only); use --hints off or leave it out"));
  }
  return std::optional<chunkd::v1::HintTest>(*test);
}

// --namespace, FILE... and --retries: the files and how to send them.
absl::Status DedupTargets(const ParsedArgs& args, DedupCommand* c) {
  if (!args.Has("namespace")) return absl::InvalidArgumentError(
      "missing --namespace NS");
  const std::string ns = *args.Get("namespace");
  if (absl::Status s = CheckNamespace(ns); !s.ok()) return s;
  c->file.params.set_namespace_(ns);
  c->files = args.positional();
  if (c->files.empty()) {
    return absl::InvalidArgumentError("missing FILE (\"-\" for stdin)");
  }
  if (std::count(c->files.begin(), c->files.end(), "-") > 1) {
    return absl::InvalidArgumentError("stdin (\"-\") can be read only once");
  }
  absl::StatusOr<int> retries = Retries(args, c->files);
  if (!retries.ok()) return retries.status();
  c->file.replay.retries = *retries;
  return absl::OkStatus();
}

// Reads and checks `dedup`'s command line: a usage error, or NOT_FOUND /
// FAILED_PRECONDITION for a file it names that cannot be read.
absl::StatusOr<DedupCommand> ParseDedupCommand(const ParsedArgs& args) {
  DedupCommand c;
  if (absl::Status s = DedupTargets(args, &c); !s.ok()) return s;
  absl::StatusOr<ChunkFlags> flags = ChunkFlagsFromArgs(args);
  if (!flags.ok()) return flags.status();
  c.file.kind = EffectiveFingerprint(*flags);
  if (c.file.kind == fingerprint::Kind::kNone) {
    return absl::InvalidArgumentError(
        "--fingerprint none: dedup needs a fingerprint (sha256 or xxh128)");
  }
  absl::StatusOr<std::optional<chunkd::v1::HintTest>> hints =
      DedupHints(args, *flags);
  if (!hints.ok()) return hints.status();
  if (hints->has_value()) c.file.params.set_hints(**hints);
  absl::StatusOr<size_t> message_size = MessageSize(args);
  if (!message_size.ok()) return message_size.status();
  c.file.message_size = *message_size;
  if (absl::Status s = Validate(*flags); !s.ok()) return s;
  absl::StatusOr<CommonOptions> common = CommonOptionsFromArgs(args);
  if (!common.ok()) return common.status();
  c.common = *std::move(common);
  c.file.timeout = c.common.timeout;
  c.file.replay.timeout_set = c.common.timeout > std::chrono::nanoseconds(0);
  ToProto(*flags, c.file.params.mutable_chunking());
  c.file.params.set_fingerprint(ToProtoFingerprint(*flags));
  return c;
}

}  // namespace

int RunDedup(absl::Span<const std::string> words, std::FILE* out,
             std::FILE* err) {
  const Io io(out, err, "dedup");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kDedupUsage, "\n", ChunkFlagsHelp(),
                                 kDedupChunkNote, "\n", kDedupOutputUsage,
                                 kProgressUsage, "\n", kConnectionUsage));
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      words, WithOutputFlags(WithConnectionFlags(WithChunkFlags(
                 {{"namespace"},
                  {"message-size"},
                  {"hints"},
                  {"retries"},
                  {"help", false}}))));
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<DedupCommand> command = ParseDedupCommand(*args);
  if (!command.ok()) return io.Refused(command.status());

  std::unique_ptr<chunkd::v1::ChunkService::Stub> stub =
      Connect(command->common.connect);
  std::FILE* const tty = ProgressTarget(command->common.progress, err);
  DedupTotals total;
  for (const std::string& name : command->files) {
    absl::StatusOr<DedupTotals> file = DedupFile(
        stub.get(), command->file, name,
        [tty](InputFile* input) { return ProgressFor(tty, input); }, err);
    if (!file.ok()) return io.Failure(file.status());
    AddTotals(*file, &total);
    if (int status =
            io.Print(DedupLine(command->common.format, name, *file, total));
        status != kExitOk) {
      return status;
    }
  }
  return io.Print(
      DedupLine(command->common.format, std::nullopt, total, total));
}

}  // namespace chunkd::cli
