// What the index benchmarks share: measuring in a child process of its own
// (so that each measurement starts from a fresh heap and its resident set
// is its own), the resident set size, and medians.
#ifndef CHUNKD_BENCH_CHILD_PROCESS_H_
#define CHUNKD_BENCH_CHILD_PROCESS_H_

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <vector>

namespace chunkd::bench {

// Resident bytes of this process (/proc/self/statm).
inline uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0;
  uint64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// Runs `measure` in a child process and returns the doubles it produced;
// exits the program, naming `program`, when the child fails.
template <size_t K>
std::array<double, K> InChild(
    const char* program,
    const std::function<std::array<double, K>()>& measure) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const std::array<double, K> values = measure();
    const ssize_t written = write(fds[1], values.data(), sizeof(values));
    _exit(written == static_cast<ssize_t>(sizeof(values)) ? 0 : 1);
  }
  close(fds[1]);
  std::array<double, K> values{};
  const ssize_t got = read(fds[0], values.data(), sizeof(values));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (got != static_cast<ssize_t>(sizeof(values)) || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s: a measurement failed\n", program);
    std::exit(1);
  }
  return values;
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace chunkd::bench

#endif  // CHUNKD_BENCH_CHILD_PROCESS_H_
