// chunkctl: the command-line client of chunkd. See cli.h.
#include <csignal>
#include <string>
#include <vector>

#include "clients/cli/cli.h"

int main(int argc, char** argv) {
  // A closed stdout then shows as EPIPE, which RunCli turns into exit status
  // 141 without a word; a SIGPIPE could also hit in the middle of a gRPC
  // write or leave a half-drawn progress line.
  std::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> args(argv + 1, argv + argc);
  return chunkd::cli::RunCli(args, stdout, stderr);
}
