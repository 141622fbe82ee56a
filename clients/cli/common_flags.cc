#include "clients/cli/common_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "clients/cli/input_file.h"
#include "clients/cli/progress.h"

namespace chunkd::cli {
namespace {

constexpr char kFallbackServer[] = "127.0.0.1:50051";
// The longest --timeout: a year, far beyond any call, and far from the
// overflow of a nanosecond count.
constexpr double kMaxTimeoutSeconds = 365.0 * 24 * 3600;
// The largest file --tls-ca, --tls-cert, --tls-key and --token-file read.
constexpr size_t kMaxFlagFileBytes = 1 << 20;

absl::StatusOr<std::string> ReadWholeFile(absl::string_view flag,
                                          const std::string& path) {
  // A file that cannot be opened or read keeps its error's code: it is a
  // failure to run (exit 1), not a bad command line (docs/cli.md).
  absl::StatusOr<std::unique_ptr<InputFile>> file = InputFile::Open(path);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("--", flag, ": ", file.status().message()));
  }
  std::string text;
  char buffer[4096];
  while (true) {
    absl::StatusOr<size_t> n = (*file)->Read(buffer, sizeof(buffer));
    if (!n.ok()) {
      return absl::Status(n.status().code(),
                          absl::StrCat("--", flag, ": ", n.status().message()));
    }
    if (*n == 0) return text;
    text.append(buffer, *n);
    if (text.size() > kMaxFlagFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": ", path, " is larger than 1 MiB"));
    }
  }
}

// The PEM files of --tls-ca, --tls-cert and --tls-key into `options`.
absl::Status ReadTlsFiles(const ParsedArgs& args, ConnectOptions* options) {
  if (args.Has("tls-cert") != args.Has("tls-key")) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both or neither");
  }
  for (auto [flag, field] : {std::pair{"tls-ca", &options->tls_root_certs},
                             std::pair{"tls-cert", &options->tls_cert_chain},
                             std::pair{"tls-key", &options->tls_private_key}}) {
    if (std::optional<std::string> path = args.Get(flag)) {
      absl::StatusOr<std::string> text = ReadWholeFile(flag, *path);
      if (!text.ok()) return text.status();
      if (text->find("-----BEGIN") == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, ": ", *path, " holds no PEM block"));
      }
      *field = *std::move(text);
    }
  }
  return absl::OkStatus();
}

// --token, else --token-file's first line, else $CHUNKD_TOKEN, else "".
absl::StatusOr<std::string> Token(const ParsedArgs& args) {
  if (args.Has("token") && args.Has("token-file")) {
    return absl::InvalidArgumentError("give --token or --token-file, not both");
  }
  std::string token;
  if (std::optional<std::string> value = args.Get("token")) {
    token = *value;
  } else if (std::optional<std::string> path = args.Get("token-file")) {
    absl::StatusOr<std::string> text = ReadWholeFile("token-file", *path);
    if (!text.ok()) return text.status();
    token = std::string(absl::StripAsciiWhitespace(
        absl::string_view(*text).substr(0, text->find('\n'))));
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-file: ", *path, " holds no token"));
    }
  } else if (const char* env = std::getenv("CHUNKD_TOKEN")) {
    token = std::string(absl::StripAsciiWhitespace(env));
  }
  if (std::any_of(token.begin(), token.end(),
                  [](char c) { return absl::ascii_isspace(c) || c == 0; })) {
    return absl::InvalidArgumentError("the token must be one word");
  }
  return token;
}

}  // namespace

std::string DefaultServer() {
  const char* env = std::getenv("CHUNKD_SERVER");
  if (env != nullptr && *env != '\0') return env;
  return kFallbackServer;
}

std::vector<FlagSpec> WithConnectionFlags(std::vector<FlagSpec> specs) {
  for (const char* name :
       {"server", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "token",
        "token-file", "timeout"}) {
    specs.push_back({name});
  }
  specs.push_back({"tls", false});
  return specs;
}

std::vector<FlagSpec> WithOutputFlags(std::vector<FlagSpec> specs) {
  specs.push_back({"format"});
  specs.push_back({"json", false});
  specs.push_back({"progress"});
  return specs;
}

absl::StatusOr<ConnectOptions> ConnectOptionsFromArgs(const ParsedArgs& args) {
  ConnectOptions options;
  options.address = args.Get("server").value_or(DefaultServer());
  if (options.address.empty()) {
    return absl::InvalidArgumentError("--server: expected an address");
  }
  options.tls = args.Has("tls") || args.Has("tls-ca") || args.Has("tls-cert") ||
                args.Has("tls-key") || args.Has("tls-server-name");
  options.tls_server_name = args.Get("tls-server-name").value_or("");
  if (args.Has("tls-server-name") && options.tls_server_name.empty()) {
    return absl::InvalidArgumentError("--tls-server-name: expected a name");
  }
  if (absl::Status s = ReadTlsFiles(args, &options); !s.ok()) return s;
  absl::StatusOr<std::string> token = Token(args);
  if (!token.ok()) return token.status();
  options.token = *std::move(token);
  return options;
}

absl::StatusOr<std::chrono::nanoseconds> ParseTimeout(absl::string_view text) {
  double seconds = 0;
  // SimpleAtod also takes "inf", "nan", "1e3" and surrounding spaces; a
  // number of seconds is digits with at most one point.
  const bool plain =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return absl::ascii_isdigit(c) || c == '.';
      });
  if (!plain || std::count(text.begin(), text.end(), '.') > 1 || text == "." ||
      !absl::SimpleAtod(text, &seconds) || !(seconds <= kMaxTimeoutSeconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeout: expected seconds, a number such as 30 or 0.5 (0: no "
        "deadline), got \"",
        text, "\""));
  }
  return std::chrono::nanoseconds(
      static_cast<int64_t>(std::llround(seconds * 1e9)));
}

absl::StatusOr<std::chrono::nanoseconds> TimeoutFromArgs(
    const ParsedArgs& args) {
  std::optional<std::string> text = args.Get("timeout");
  if (!text.has_value()) return std::chrono::nanoseconds::zero();
  return ParseTimeout(*text);
}

absl::StatusOr<OutputFormat> OutputFormatFromArgs(const ParsedArgs& args) {
  std::optional<std::string> name = args.Get("format");
  if (!name.has_value()) {
    return args.Has("json") ? OutputFormat::kJson : OutputFormat::kText;
  }
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(*name);
  if (!format.ok()) return format.status();
  if (args.Has("json") && *format != OutputFormat::kJson) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--json is --format json; it contradicts --format ", *name));
  }
  return format;
}

absl::StatusOr<ProgressMode> ParseProgressMode(absl::string_view text) {
  if (text == "auto") return ProgressMode::kAuto;
  if (text == "always") return ProgressMode::kAlways;
  if (text == "never") return ProgressMode::kNever;
  return absl::InvalidArgumentError(absl::StrCat(
      "--progress: expected auto, always or never, got \"", text, "\""));
}

absl::StatusOr<ProgressMode> ProgressModeFromArgs(const ParsedArgs& args) {
  std::optional<std::string> text = args.Get("progress");
  if (!text.has_value()) return ProgressMode::kAuto;
  return ParseProgressMode(*text);
}

std::FILE* ProgressTarget(ProgressMode mode, std::FILE* err) {
  switch (mode) {
    case ProgressMode::kAlways:
      return err;
    case ProgressMode::kNever:
      return nullptr;
    case ProgressMode::kAuto:
      break;
  }
  return Progress::IsTerminal(err) ? err : nullptr;
}

}  // namespace chunkd::cli
