// A small command-line parser for chunkctl's subcommands.
//
// absl::flags keeps one global set of flags per binary, which fits a server
// but not a tool whose commands accept different flags; this parser takes the
// accepted flags per command instead. Accepted forms: "--name VALUE",
// "--name=VALUE" and "--name" for switches. "-h" means "--help", a lone "-"
// is a positional argument (stdin), and "--" ends the flags. Flag names are
// spelled with dashes; the same name with underscores ("--tls_ca" for
// "--tls-ca", the spelling of earlier releases) is the same flag
// (docs/cli.md).
//
// Thread safety: ParsedArgs is an immutable value once parsed.
#ifndef CHUNKD_CLIENTS_CLI_ARGS_H_
#define CHUNKD_CLIENTS_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace chunkd::cli {

// One flag a command accepts.
struct FlagSpec {
  // The name without the leading "--", with dashes, never underscores.
  std::string name;
  // False for a switch ("--local"), true for a flag that takes a value.
  bool takes_value = true;
  // True for a flag that may be given more than once ("--set"); GetAll()
  // returns its values in order.
  bool repeatable = false;
};

// The flags and positional arguments of one command line.
class ParsedArgs {
 public:
  ParsedArgs() = default;
  ParsedArgs(const ParsedArgs&) = default;
  ParsedArgs& operator=(const ParsedArgs&) = default;
  ParsedArgs(ParsedArgs&&) = default;
  ParsedArgs& operator=(ParsedArgs&&) = default;

  // True when the flag was given.
  bool Has(absl::string_view name) const;
  // The value of a flag; nullopt when it was not given (or is a switch).
  std::optional<std::string> Get(absl::string_view name) const;
  // Every value of a repeatable flag, in the order given (empty when not
  // given); for another flag, its one value.
  std::vector<std::string> GetAll(absl::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(
      absl::Span<const std::string> args, absl::Span<const FlagSpec> specs);

  // The first value of each flag given; repeated_ holds every value of
  // the repeatable ones.
  std::map<std::string, std::string, std::less<>> flags_;
  std::map<std::string, std::vector<std::string>, std::less<>> repeated_;
  std::vector<std::string> positional_;
};

// Parses `args` (the words after the command name) against `specs`.
// INVALID_ARGUMENT names the offending word: an unknown flag, a flag without
// its value, a value given to a switch, or a flag that is not repeatable
// given twice (in either spelling).
absl::StatusOr<ParsedArgs> ParseArgs(absl::Span<const std::string> args,
                                     absl::Span<const FlagSpec> specs);

// True when "--help" or "-h" appears before any "--".
bool WantsHelp(absl::Span<const std::string> args);

// Parses a decimal integer (or "0x" hexadecimal) in [0, max] given to
// --`flag`. INVALID_ARGUMENT says which flag and what was expected.
absl::StatusOr<uint64_t> ParseUint(absl::string_view flag,
                                   absl::string_view text, uint64_t max);

// When --`name` was given, parses its value with `parse` into *out (which
// is left as it is otherwise). A failure is INVALID_ARGUMENT
// "--name: <the parser's message>".
template <typename T, typename Out>
absl::Status ParseFlag(const ParsedArgs& args, absl::string_view name,
                       absl::StatusOr<T> (*parse)(absl::string_view),
                       Out* out) {
  std::optional<std::string> text = args.Get(name);
  if (!text.has_value()) return absl::OkStatus();
  absl::StatusOr<T> value = parse(*text);
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": ", value.status().message()));
  }
  *out = *std::move(value);
  return absl::OkStatus();
}

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_ARGS_H_
