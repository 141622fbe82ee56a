#include "clients/cli/record_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::cli {

namespace {

constexpr absl::string_view kBrokenPipeMessage = "standard output was closed";

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view name) {
  if (name == "text" || name == "csv") return OutputFormat::kText;
  if (name == "json") return OutputFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--format: expected text, csv or json, got \"", name, "\""));
}

absl::Status BrokenPipeError() {
  // CANCELLED: chunkctl gives up; no server error has this exact message,
  // since FromGrpcStatus() prefixes the code's name.
  return absl::CancelledError(kBrokenPipeMessage);
}

bool IsBrokenPipe(const absl::Status& status) {
  return status.code() == absl::StatusCode::kCancelled &&
         status.message() == kBrokenPipeMessage;
}

absl::Status WriteError(int error) {
  if (error == EPIPE) return BrokenPipeError();
  return absl::UnavailableError(
      absl::StrCat("writing output: ", std::strerror(error)));
}

RecordWriter::RecordWriter(std::FILE* out, OutputFormat format,
                           bool with_fingerprint)
    : out_(out), format_(format), with_fingerprint_(with_fingerprint) {}

void RecordWriter::Add(uint64_t offset, uint32_t length,
                       absl::string_view fingerprint) {
  switch (format_) {
    case OutputFormat::kText:
      absl::StrAppend(&buffer_, offset, ",", length);
      if (with_fingerprint_) {
        absl::StrAppend(&buffer_, ",", fingerprint::ToHex(fingerprint));
      }
      buffer_ += '\n';
      break;
    case OutputFormat::kJson:
      absl::StrAppend(&buffer_, "{\"offset\":", offset, ",\"length\":", length);
      if (with_fingerprint_) {
        absl::StrAppend(&buffer_, ",\"fingerprint\":\"",
                        fingerprint::ToHex(fingerprint), "\"");
      }
      buffer_ += "}\n";
      break;
  }
}

absl::Status RecordWriter::Flush() {
  if (!buffer_.empty() &&
      std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
    return WriteError(errno);
  }
  buffer_.clear();
  if (std::fflush(out_) != 0) return WriteError(errno);
  return absl::OkStatus();
}

}  // namespace chunkd::cli
