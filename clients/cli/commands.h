// chunkctl's commands that stream files to a server, each run by RunCli
// (cli.h) with the words after its name: printing to `out`, errors to `err`,
// returning the exit status.
#ifndef CHUNKD_CLIENTS_CLI_COMMANDS_H_
#define CHUNKD_CLIENTS_CLI_COMMANDS_H_

#include <cstdio>
#include <string>

#include "absl/types/span.h"

namespace chunkd::cli {

// `chunkctl chunk` (chunk_command.cc).
int RunChunk(absl::Span<const std::string> words, std::FILE* out,
             std::FILE* err);

// `chunkctl dedup` (dedup_command.cc).
int RunDedup(absl::Span<const std::string> words, std::FILE* out,
             std::FILE* err);

// `chunkctl estimate` (estimate_command.cc).
int RunEstimate(absl::Span<const std::string> words, std::FILE* out,
                std::FILE* err);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_COMMANDS_H_
