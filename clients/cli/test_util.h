// Test only: what the chunkctl tests share.
#ifndef CHUNKD_CLIENTS_CLI_TEST_UTIL_H_
#define CHUNKD_CLIENTS_CLI_TEST_UTIL_H_

#include <cstdio>
#include <string>

namespace chunkd::cli::testing {

// Everything written to `file` (a std::tmpfile() a test ran into), from
// its start.
inline std::string ReadAll(std::FILE* file) {
  std::rewind(file);
  std::string contents;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    contents.append(buffer, n);
  }
  return contents;
}

}  // namespace chunkd::cli::testing

#endif  // CHUNKD_CLIENTS_CLI_TEST_UTIL_H_
