// A file or stdin, read sequentially in pieces. chunkctl never loads a whole
// input into memory: at most one piece per reader is held at a time.
//
// A read from stdin or another pipe waits for data; Interrupt() ends that
// wait from another thread, so a call whose deadline passed, or that the
// server ended, does not wait for a source that stalls without closing
// (docs/cli.md, "Exit status").
//
// Thread safety: one reader at a time; Interrupt() may be called from any
// thread. Copy and move disabled.
#ifndef CHUNKD_CLIENTS_CLI_INPUT_FILE_H_
#define CHUNKD_CLIENTS_CLI_INPUT_FILE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cli/progress.h"

namespace chunkd::cli {

class InputFile {
 public:
  // Opens `name` for reading; "-" is stdin. An error names the file.
  static absl::StatusOr<std::unique_ptr<InputFile>> Open(
      const std::string& name);

  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  // Reads up to `size` bytes into `buffer`, blocking until `size` bytes, the
  // end of the input or an error; returns the number read, 0 at the end.
  // An error names the file; after Interrupt(), Interrupted().
  absl::StatusOr<size_t> Read(char* buffer, size_t size);

  // Makes a Read() waiting for data, and every later one, return
  // Interrupted() at once. Reads of a regular file never wait, and are
  // not interrupted.
  void Interrupt();

  // The error of an interrupted Read(): CANCELLED, naming the file.
  static bool IsInterrupted(const absl::Status& status);

  // The name as given ("-" for stdin).
  const std::string& name() const { return name_; }

  // The size of a regular file; 0 for stdin, pipes and devices.
  uint64_t size() const;

  // Every byte Read() returns from now on is counted on `progress` (nullptr
  // stops it). REQUIRES: `progress` outlives the reads.
  void set_progress(Progress* progress) { progress_ = progress; }

 private:
  InputFile(std::string name, int fd, bool owned, int wake_fd);

  // Waits until fd_ has data (or its end) or Interrupt() was called; false
  // for the latter.
  bool WaitForData() const;

  const std::string name_;
  const int fd_;
  const bool owned_;
  // An eventfd Interrupt() signals; -1 for a regular file.
  const int wake_fd_;
  std::atomic<bool> interrupted_{false};
  Progress* progress_ = nullptr;
};

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_INPUT_FILE_H_
