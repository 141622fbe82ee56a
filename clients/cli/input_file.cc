#include "clients/cli/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chunkd::cli {
namespace {

std::string DisplayName(const std::string& name) {
  return name == "-" ? std::string("stdin") : name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<InputFile>> InputFile::Open(
    const std::string& name) {
  if (name == "-") {
    return std::unique_ptr<InputFile>(new InputFile(name, stdin, false));
  }
  std::FILE* file = std::fopen(name.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    std::string message = absl::StrCat(name, ": ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message)
                           : absl::FailedPreconditionError(message);
  }
  return std::unique_ptr<InputFile>(new InputFile(name, file, true));
}

InputFile::InputFile(std::string name, std::FILE* file, bool owned)
    : name_(std::move(name)), file_(file), owned_(owned) {}

InputFile::~InputFile() {
  if (owned_) std::fclose(file_);
}

absl::StatusOr<size_t> InputFile::Read(char* buffer, size_t size) {
  const size_t n = std::fread(buffer, 1, size, file_);
  if (n < size && std::ferror(file_)) {
    return absl::DataLossError(absl::StrCat(
        DisplayName(name_), ": read error: ", std::strerror(errno)));
  }
  if (progress_ != nullptr) progress_->Add(n);
  return n;
}

uint64_t InputFile::size() const {
  struct stat st;
  if (::fstat(::fileno(file_), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace chunkd::cli
