// A one-line progress display for long transfers: bytes done, rate and, when
// the total is known, a bar, the percentage and the ETA. chunkctl shows it on
// stderr only when stderr is a terminal, so piped or redirected runs print
// nothing but their results.
//
// Thread safety: Add() and Finish() must not run concurrently (chunkctl calls
// them from the one thread that reads the input).
#ifndef CHUNKD_CLIENTS_CLI_PROGRESS_H_
#define CHUNKD_CLIENTS_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"

namespace chunkd::cli {

class Progress {
 public:
  // Draws on `tty`; nullptr makes every call a no-op. `total` is the input's
  // size in bytes, 0 when unknown (stdin, a pipe).
  Progress(std::FILE* tty, std::string label, uint64_t total);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Counts `bytes` more; redraws at most ten times a second.
  void Add(uint64_t bytes);
  // Draws the final state and ends the line.
  void Finish();

  // The text of the display for `done` of `total` bytes after `seconds`.
  static std::string Line(absl::string_view label, uint64_t done,
                          uint64_t total, double seconds);
  // "1.5 MiB" and the like.
  static std::string HumanBytes(double bytes);
  // True when `file` is a terminal.
  static bool IsTerminal(std::FILE* file);

 private:
  void Draw();

  std::FILE* const tty_;
  const std::string label_;
  const uint64_t total_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  uint64_t done_ = 0;
};

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_PROGRESS_H_
