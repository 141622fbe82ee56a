#include "clients/cli/command_common.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "chunkd/tables.h"
#include "clients/cli/chunk_options.h"
#include "clients/cli/replay.h"

namespace chunkd::cli {

std::vector<FlagSpec> WithChunkFlags(std::vector<FlagSpec> specs) {
  for (FlagSpec& spec : ChunkFlagSpecs()) specs.push_back(std::move(spec));
  return specs;
}

absl::StatusOr<size_t> MessageSize(const ParsedArgs& args) {
  std::optional<std::string> text = args.Get("message-size");
  if (!text.has_value()) return kDefaultMessageSize;
  absl::StatusOr<uint64_t> size =
      ParseUint("message-size", *text, kMaxMessageSize);
  if (!size.ok()) return size.status();
  if (*size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--message-size: expected an integer in 1..",
                     kMaxMessageSize, ", got \"", *text, "\""));
  }
  return static_cast<size_t>(*size);
}

absl::Status CheckNamespace(absl::string_view ns) {
  // The characters of tables::kNameCharacters, [A-Za-z0-9._-].
  const bool valid_chars = std::all_of(ns.begin(), ns.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
  });
  const int max_length = chunking::tables::kNamespaceMaxLength;
  if (ns.empty() || ns.size() > static_cast<size_t>(max_length) ||
      !valid_chars) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--namespace: expected 1..", max_length, " characters of [",
        chunking::tables::kNameCharacters, "], got \"", ns, "\""));
  }
  return absl::OkStatus();
}

std::unique_ptr<chunkd::v1::ChunkService::Stub> Connect(
    const ConnectOptions& options) {
  return chunkd::v1::ChunkService::NewStub(MakeChannel(options));
}

std::unique_ptr<Progress> ProgressFor(std::FILE* tty, InputFile* input) {
  auto progress = std::make_unique<Progress>(
      tty, input->name() == "-" ? std::string("stdin") : input->name(),
      input->size());
  input->set_progress(progress.get());
  return progress;
}

absl::StatusOr<CommonOptions> CommonOptionsFromArgs(const ParsedArgs& args) {
  CommonOptions options;
  absl::StatusOr<OutputFormat> format = OutputFormatFromArgs(args);
  if (!format.ok()) return format.status();
  options.format = *format;
  absl::StatusOr<ProgressMode> progress = ProgressModeFromArgs(args);
  if (!progress.ok()) return progress.status();
  options.progress = *progress;
  absl::StatusOr<std::chrono::nanoseconds> timeout = TimeoutFromArgs(args);
  if (!timeout.ok()) return timeout.status();
  options.timeout = *timeout;
  absl::StatusOr<ConnectOptions> connect = ConnectOptionsFromArgs(args);
  if (!connect.ok()) return connect.status();
  options.connect = *std::move(connect);
  return options;
}

absl::StatusOr<int> Retries(const ParsedArgs& args,
                            const std::vector<std::string>& files) {
  std::optional<std::string> text = args.Get("retries");
  if (!text.has_value()) return 0;
  absl::StatusOr<uint64_t> n = ParseUint("retries", *text, kMaxRetries);
  if (!n.ok()) return n.status();
  if (*n > 0) {
    if (absl::Status s = CheckReplayable(files); !s.ok()) return s;
  }
  return static_cast<int>(*n);
}

}  // namespace chunkd::cli
