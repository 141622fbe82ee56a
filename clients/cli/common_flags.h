// The flags every command that talks to a server shares (docs/cli.md, the
// contract of chunkctl, chunkd-client and chunkd-go): the connection
// (--server, TLS, token), --timeout, the output format (--format, --json)
// and --progress; and how each is read from a ParsedArgs.
//
// Every value is checked here, before anything is sent, so a bad one is a
// usage error (exit status 2) naming the flag.
//
// Thread safety: pure functions, except that DefaultServer() and
// ConnectOptionsFromArgs() read the environment.
#ifndef CHUNKD_CLIENTS_CLI_COMMON_FLAGS_H_
#define CHUNKD_CLIENTS_CLI_COMMON_FLAGS_H_

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cli/args.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"

namespace chunkd::cli {

// --progress: when a file's progress line is drawn on stderr.
enum class ProgressMode {
  kAuto,    // when stderr is a terminal (the default)
  kAlways,  // always, even into a file or a pipe
  kNever,
};

// The server when --server is not given: $CHUNKD_SERVER when set and not
// empty, else "127.0.0.1:50051".
std::string DefaultServer();

// `specs` plus the connection flags: --server, --tls, --tls-ca, --tls-cert,
// --tls-key, --tls-server-name, --token, --token-file and --timeout.
std::vector<FlagSpec> WithConnectionFlags(std::vector<FlagSpec> specs);

// `specs` plus --format, --json and --progress.
std::vector<FlagSpec> WithOutputFlags(std::vector<FlagSpec> specs);

// The connection flags of `args` (--server defaulting to DefaultServer(),
// the token to $CHUNKD_TOKEN). Files are read here, so a missing one is
// reported before anything is sent. INVALID_ARGUMENT names the flag.
absl::StatusOr<ConnectOptions> ConnectOptionsFromArgs(const ParsedArgs& args);

// --timeout SECONDS: a non-negative decimal number of seconds ("30",
// "0.5"); zero means no deadline. INVALID_ARGUMENT for anything else,
// including values over a year.
absl::StatusOr<std::chrono::nanoseconds> ParseTimeout(absl::string_view text);

// --timeout of `args`; zero (no deadline) when not given.
absl::StatusOr<std::chrono::nanoseconds> TimeoutFromArgs(
    const ParsedArgs& args);

// --format and --json of `args`: text when neither is given. --json is
// --format json; with both, they must agree.
absl::StatusOr<OutputFormat> OutputFormatFromArgs(const ParsedArgs& args);

// "auto", "always" or "never"; INVALID_ARGUMENT otherwise.
absl::StatusOr<ProgressMode> ParseProgressMode(absl::string_view text);

// --progress of `args`; auto when not given.
absl::StatusOr<ProgressMode> ProgressModeFromArgs(const ParsedArgs& args);

// Where progress goes in `mode`: `err`, or nullptr for none.
std::FILE* ProgressTarget(ProgressMode mode, std::FILE* err);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_COMMON_FLAGS_H_
