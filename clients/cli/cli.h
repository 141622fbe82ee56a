// chunkctl's commands: `chunk`, `dedup`, `info` and `bench`, with their usage
// texts.
// main() only forwards to RunCli(), so tests can run any command line
// in-process.
//
// Exit status (also in `chunkctl --help`):
//   kExitOk       success;
//   kExitFailure  a failure while running: reading the input, writing the
//                 output, any error status of the server (printed as
//                 "CODE_NAME: message": UNAVAILABLE, RESOURCE_EXHAUSTED,
//                 INVALID_ARGUMENT, DATA_LOSS, ...), a stream whose summary
//                 does not count every byte sent (DATA_LOSS) or a protocol
//                 violation;
//   kExitUsage    a usage error found before any RPC (unknown command or
//                 flag, bad value, parameters out of range, a flag the
//                 algorithm does not take).
#ifndef CHUNKD_CLIENTS_CLI_CLI_H_
#define CHUNKD_CLIENTS_CLI_CLI_H_

#include <cstdio>
#include <string>
#include <vector>

namespace chunkd::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Runs the command line `args` (without the program name), printing results
// and help to `out` and errors to `err`; returns the exit status. The input
// "-" is the process's stdin.
int RunCli(const std::vector<std::string>& args, std::FILE* out,
           std::FILE* err);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_CLI_H_
