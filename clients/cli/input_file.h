// A file or stdin, read sequentially in pieces. chunkctl never loads a whole
// input into memory: at most one piece per reader is held at a time.
//
// Thread safety: not thread-safe; one reader at a time. Copy and move
// disabled.
#ifndef CHUNKD_CLIENTS_CLI_INPUT_FILE_H_
#define CHUNKD_CLIENTS_CLI_INPUT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

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
  // An error names the file.
  absl::StatusOr<size_t> Read(char* buffer, size_t size);

  // The name as given ("-" for stdin).
  const std::string& name() const { return name_; }

  // The size of a regular file; 0 for stdin, pipes and devices.
  uint64_t size() const;

  // Every byte Read() returns from now on is counted on `progress` (nullptr
  // stops it). REQUIRES: `progress` outlives the reads.
  void set_progress(Progress* progress) { progress_ = progress; }

 private:
  InputFile(std::string name, std::FILE* file, bool owned);

  const std::string name_;
  std::FILE* const file_;
  const bool owned_;
  Progress* progress_ = nullptr;
};

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_INPUT_FILE_H_
