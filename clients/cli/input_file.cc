#include "clients/cli/input_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace chunkd::cli {
namespace {

// Marks the error of an interrupted read (IsInterrupted).
constexpr absl::string_view kInterrupted = "chunkd.cli/input-interrupted";

std::string DisplayName(const std::string& name) {
  return name == "-" ? std::string("stdin") : name;
}

bool IsRegular(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

absl::StatusOr<std::unique_ptr<InputFile>> InputFile::Open(
    const std::string& name) {
  int fd = STDIN_FILENO;
  if (name != "-") {
    fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      std::string message = absl::StrCat(name, ": ", std::strerror(error));
      return error == ENOENT ? absl::NotFoundError(message)
                             : absl::FailedPreconditionError(message);
    }
  }
  int wake_fd = -1;
  if (!IsRegular(fd)) {
    wake_fd = ::eventfd(0, EFD_CLOEXEC);
    if (wake_fd < 0) {
      const int error = errno;
      if (name != "-") ::close(fd);
      return absl::ResourceExhaustedError(absl::StrCat(
          DisplayName(name), ": cannot wait on it: eventfd: ",
          std::strerror(error)));
    }
  }
  return std::unique_ptr<InputFile>(
      new InputFile(name, fd, name != "-", wake_fd));
}

InputFile::InputFile(std::string name, int fd, bool owned, int wake_fd)
    : name_(std::move(name)), fd_(fd), owned_(owned), wake_fd_(wake_fd) {}

InputFile::~InputFile() {
  if (owned_) ::close(fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool InputFile::WaitForData() const {
  if (wake_fd_ < 0) return true;
  while (!interrupted_.load()) {
    struct pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = ::poll(fds, 2, -1);
    if (ready < 0 && errno != EINTR) return true;  // read() will say why
    if (ready > 0 && fds[1].revents != 0) return false;
    if (ready > 0 && fds[0].revents != 0) return true;
  }
  return false;
}

absl::StatusOr<size_t> InputFile::Read(char* buffer, size_t size) {
  size_t total = 0;
  while (total < size) {
    if (!WaitForData()) {
      absl::Status status = absl::CancelledError(absl::StrCat(
          "reading ", DisplayName(name_), " was interrupted"));
      status.SetPayload(kInterrupted, absl::Cord("1"));
      return status;
    }
    const ssize_t n = ::read(fd_, buffer + total, size - total);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::DataLossError(absl::StrCat(
          DisplayName(name_), ": read error: ", std::strerror(errno)));
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  if (progress_ != nullptr) progress_->Add(total);
  return total;
}

void InputFile::Interrupt() {
  interrupted_.store(true);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    // A full counter (never, at one write per call) is as good a wake-up.
    [[maybe_unused]] const ssize_t written =
        ::write(wake_fd_, &one, sizeof(one));
  }
}

bool InputFile::IsInterrupted(const absl::Status& status) {
  return status.GetPayload(kInterrupted).has_value();
}

uint64_t InputFile::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace chunkd::cli
