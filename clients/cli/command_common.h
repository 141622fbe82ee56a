// What chunkctl's commands share: how a command prints and reports errors
// (Io), the options of every command that talks to a server, and small
// readers of flags.
//
// Thread safety: Io writes to its FILEs unsynchronized; one command, one
// thread. The functions are pure but for Connect (a channel).
#ifndef CHUNKD_CLIENTS_CLI_COMMAND_COMMON_H_
#define CHUNKD_CLIENTS_CLI_COMMAND_COMMON_H_

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "clients/cli/args.h"
#include "clients/cli/cli.h"
#include "clients/cli/common_flags.h"
#include "clients/cli/error_reason.h"
#include "clients/cli/input_file.h"
#include "clients/cli/progress.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"

namespace chunkd::chunking::kernels {
struct KernelSet;  // chunking/kernels/kernels.h
}  // namespace chunkd::chunking::kernels

namespace chunkd::cli {

inline constexpr uint64_t kDefaultMessageSize = 1 << 20;
inline constexpr uint64_t kMaxMessageSize = 64 << 20;

// Where a command prints, and how it reports errors (docs/cli.md, "Exit
// status"): one line on stderr, "chunkctl: message".
class Io {
 public:
  Io(std::FILE* out, std::FILE* err, absl::string_view command)
      : out_(out), err_(err), command_(command) {}

  Io(const Io&) = delete;
  Io& operator=(const Io&) = delete;

  int Usage(absl::string_view text) const {
    std::fputs(std::string(text).c_str(), out_);
    return kExitOk;
  }
  // A bad command line: the message and where to find help.
  int UsageError(absl::string_view message) const {
    absl::FPrintF(err_, "chunkctl: %s (see chunkctl %s--help)\n", message,
                  command_.empty() ? "" : absl::StrCat(command_, " "));
    return kExitUsage;
  }
  // A command line that could not be taken: a usage error, or a file it
  // names (--token-file, --tls-ca, ...) that cannot be read (exit 1).
  int Refused(const absl::Status& status) const {
    return status.code() == absl::StatusCode::kInvalidArgument
               ? UsageError(status.message())
               : Failure(status);
  }
  // Anything that went wrong while running: exit status 1, except the
  // server's INVALID_ARGUMENT (a bad parameter: 2) and a closed standard
  // output (141, silently).
  int Failure(const absl::Status& status) const {
    if (IsBrokenPipe(status)) return kExitBrokenPipe;
    absl::FPrintF(err_, "chunkctl: %s%s\n", status.message(),
                  ReasonSuffix(status));
    return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                                : kExitFailure;
  }
  // Writes `text` to standard output and flushes it.
  int Print(absl::string_view text) const {
    if (std::fwrite(text.data(), 1, text.size(), out_) != text.size() ||
        std::fflush(out_) != 0) {
      return Failure(WriteError(errno));
    }
    return kExitOk;
  }

 private:
  std::FILE* const out_;
  std::FILE* const err_;
  const std::string command_;
};

// The options every command with a server shares, read from its flags.
struct CommonOptions {
  ConnectOptions connect;
  std::chrono::nanoseconds timeout{0};
  OutputFormat format = OutputFormat::kText;
  ProgressMode progress = ProgressMode::kAuto;
};

// `specs` and ChunkFlagSpecs().
std::vector<FlagSpec> WithChunkFlags(std::vector<FlagSpec> specs);

// --message-size, kDefaultMessageSize when not given; INVALID_ARGUMENT for 0
// or more than kMaxMessageSize.
absl::StatusOr<size_t> MessageSize(const ParsedArgs& args);

// --namespace: 1..tables::kNamespaceMaxLength characters of
// tables::kNameCharacters, as the server checks it.
absl::Status CheckNamespace(absl::string_view ns);

std::unique_ptr<chunkd::v1::ChunkService::Stub> Connect(
    const ConnectOptions& options);

// The progress display of one input, drawn on `tty` (nullptr: none).
std::unique_ptr<Progress> ProgressFor(std::FILE* tty, InputFile* input);

// --retries, 0 when not given; with replays, `files` must be regular files
// (CheckReplayable()).
absl::StatusOr<int> Retries(const ParsedArgs& args,
                            const std::vector<std::string>& files);

// Most threads a --local command cuts with.
inline constexpr uint64_t kMaxLocalThreads = 256;

// The flags that apply to only one of --server and --local: --backend and
// --threads need --local; the connection flags, --timeout, --retries and
// --namespace need a server. INVALID_ARGUMENT names the flag.
absl::Status CheckLocalTarget(const ParsedArgs& args);

// --backend, else $CHUNKD_BACKEND's, else nullptr (the engine's automatic
// choice); with --local, $CHUNKD_SHA256 is checked too (reported here, not
// at the first chunk).
absl::StatusOr<const chunking::kernels::KernelSet*> LocalKernel(
    const ParsedArgs& args);

// --threads, 1 when not given; 1..kMaxLocalThreads.
absl::StatusOr<size_t> LocalThreads(const ParsedArgs& args);

// Reads CommonOptions from `args`; INVALID_ARGUMENT names the flag.
absl::StatusOr<CommonOptions> CommonOptionsFromArgs(const ParsedArgs& args);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_COMMAND_COMMON_H_
