#include "clients/cli/args.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace chunkd::cli {

bool ParsedArgs::Has(absl::string_view name) const {
  return flags_.find(name) != flags_.end();
}

std::optional<std::string> ParsedArgs::Get(absl::string_view name) const {
  auto it = flags_.find(name);
  if (it == flags_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ParsedArgs::GetAll(absl::string_view name) const {
  if (auto it = repeated_.find(name); it != repeated_.end()) return it->second;
  if (std::optional<std::string> value = Get(name)) return {*value};
  return {};
}

absl::StatusOr<ParsedArgs> ParseArgs(absl::Span<const std::string> args,
                                     absl::Span<const FlagSpec> specs) {
  ParsedArgs parsed;
  bool flags_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (flags_ended || word == "-" || !absl::StartsWith(word, "-")) {
      parsed.positional_.push_back(word);
      continue;
    }
    if (word == "--") {
      flags_ended = true;
      continue;
    }
    absl::string_view body = word;
    if (word == "-h") {
      body = "help";
    } else if (absl::StartsWith(body, "--")) {
      body.remove_prefix(2);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag \"", word, "\" (flags start with --)"));
    }
    absl::string_view given = body;
    std::optional<std::string> inline_value;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      given = body.substr(0, eq);
      inline_value = std::string(body.substr(eq + 1));
    }
    // The spelling of earlier releases, --tls_ca for --tls-ca, is the same
    // flag; a name keeps its dashes in messages and in ParsedArgs.
    const std::string name = absl::StrReplaceAll(given, {{"_", "-"}});
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag \"--", given, "\""));
    }
    if (parsed.flags_.count(name) != 0 && !spec->repeatable) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " given more than once"));
    }
    std::string value;
    if (spec->takes_value) {
      if (inline_value.has_value()) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
    } else if (inline_value.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " takes no value"));
    }
    if (spec->repeatable) parsed.repeated_[name].push_back(value);
    parsed.flags_.emplace(name, std::move(value));
  }
  return parsed;
}

bool WantsHelp(absl::Span<const std::string> args) {
  for (const std::string& word : args) {
    if (word == "--") return false;
    if (word == "--help" || word == "-h") return true;
  }
  return false;
}

absl::StatusOr<uint64_t> ParseUint(absl::string_view flag,
                                   absl::string_view text, uint64_t max) {
  uint64_t value = 0;
  bool ok = false;
  // SimpleAtoi tolerates surrounding spaces and a '+'; a flag value should
  // be just digits, so check the characters first.
  if (absl::StartsWithIgnoreCase(text, "0x") && text.size() > 2) {
    absl::string_view hex = text.substr(2);
    ok = std::all_of(hex.begin(), hex.end(),
                     [](char c) { return absl::ascii_isxdigit(c); }) &&
         absl::SimpleHexAtoi(hex, &value);
  } else if (!text.empty()) {
    ok = std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isdigit(c); }) &&
         absl::SimpleAtoi(text, &value);
  }
  if (!ok || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": expected an integer in 0..", max,
                     ", got \"", text, "\""));
  }
  return value;
}

}  // namespace chunkd::cli
