#include "clients/cli/record_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::cli {

absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view name) {
  if (name == "csv") return OutputFormat::kCsv;
  if (name == "json") return OutputFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--format: expected csv or json, got \"", name, "\""));
}

RecordWriter::RecordWriter(std::FILE* out, OutputFormat format,
                           bool with_fingerprint)
    : out_(out), format_(format), with_fingerprint_(with_fingerprint) {}

void RecordWriter::Add(uint64_t offset, uint32_t length,
                       absl::string_view fingerprint) {
  switch (format_) {
    case OutputFormat::kCsv:
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
    return absl::UnavailableError(
        absl::StrCat("writing output: ", std::strerror(errno)));
  }
  buffer_.clear();
  if (std::fflush(out_) != 0) {
    return absl::UnavailableError(
        absl::StrCat("writing output: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace chunkd::cli
