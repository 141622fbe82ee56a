#include "clients/cli/command_common.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "chunkd/tables.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/chunk_options.h"
#include "clients/cli/replay.h"
#include "fingerprint/sha256_mb.h"

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

absl::Status CheckLocalTarget(const ParsedArgs& args) {
  const bool local = args.Has("local");
  if (!local && (args.Has("backend") || args.Has("threads"))) {
    return absl::InvalidArgumentError(
        "--backend and --threads apply to --local; the server has its own");
  }
  for (const char* flag :
       {"server", "tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name",
        "token", "token-file", "timeout", "retries", "namespace"}) {
    if (local && args.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " applies to a server, not to --local"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const chunking::kernels::KernelSet*> LocalKernel(
    const ParsedArgs& args) {
  absl::StatusOr<const chunking::kernels::KernelSet*> kernel;
  if (std::optional<std::string> name = args.Get("backend")) {
    kernel = chunking::kernels::FindKernelSet(*name);
    if (!kernel.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--backend: ", kernel.status().message()));
    }
  } else {
    kernel = chunking::kernels::ForcedKernelSet();
    if (!kernel.ok()) return kernel.status();
  }
  if (args.Has("local")) {
    absl::StatusOr<const fingerprint::Sha256Impl*> sha256 =
        fingerprint::DefaultSha256Impl();
    if (!sha256.ok()) return sha256.status();
  }
  return kernel;
}

absl::StatusOr<size_t> LocalThreads(const ParsedArgs& args) {
  std::optional<std::string> text = args.Get("threads");
  if (!text.has_value()) return 1;
  absl::StatusOr<uint64_t> n = ParseUint("threads", *text, kMaxLocalThreads);
  if (!n.ok() || *n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads: expected an integer in 1..", kMaxLocalThreads,
                     ", got \"", *text, "\""));
  }
  return static_cast<size_t>(*n);
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
