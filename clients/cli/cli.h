// chunkctl's commands: `chunk`, `dedup`, `info` and `bench`, with their usage
// texts.
// main() only forwards to RunCli(), so tests can run any command line
// in-process.
//
// Exit status (docs/cli.md; also in `chunkctl --help`):
//   kExitOk          success;
//   kExitFailure     a failure while running: reading the input, writing the
//                    output, an error status of the server other than
//                    INVALID_ARGUMENT (printed as "CODE_NAME: message":
//                    UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED,
//                    ...), a stream whose summary does not count every byte
//                    sent (DATA_LOSS) or a protocol violation;
//   kExitUsage       a usage error or a bad parameter: found before any RPC
//                    (unknown command or flag, bad value, parameters out of
//                    range, a flag the algorithm does not take), or the
//                    server's INVALID_ARGUMENT;
//   kExitBrokenPipe  standard output was closed early (`| head`): nothing
//                    more is printed, not even an error; the status a shell
//                    shows for a process killed by SIGPIPE.
#ifndef CHUNKD_CLIENTS_CLI_CLI_H_
#define CHUNKD_CLIENTS_CLI_CLI_H_

#include <cstdio>
#include <string>
#include <vector>

namespace chunkd::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitBrokenPipe = 141;

// Runs the command line `args` (without the program name), printing results
// and help to `out` and errors to `err`; returns the exit status. The input
// "-" is the process's stdin. A write to `out` after its reader went away
// must fail with EPIPE rather than raise SIGPIPE: main() ignores SIGPIPE.
int RunCli(const std::vector<std::string>& args, std::FILE* out,
           std::FILE* err);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_CLI_H_
