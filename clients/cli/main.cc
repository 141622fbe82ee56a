// chunkctl: the command-line client of chunkd. See cli.h.
#include <string>
#include <vector>

#include "clients/cli/cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return chunkd::cli::RunCli(args, stdout, stderr);
}
