#include "service/auth.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "index/fingerprint_index.h"
#include "platform/error_reason.h"

namespace chunkd::service {
namespace {

constexpr absl::string_view kBearer = "bearer ";
// Tokens shorter than this are too easy to guess.
constexpr size_t kMinTokenBytes = 16;

}  // namespace

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", line_number, ": expected 'TOKEN NAMESPACES' (namespaces "
          "comma-separated, or * for all), found ", fields.size(), " fields"));
    }
    const absl::string_view token = fields[0];
    if (token.size() < kMinTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", line_number, ": the token has ", token.size(),
          " characters; use at least ", kMinTokenBytes));
    }
    if (table.tokens_.contains(token)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", line_number, ": the token repeats an earlier line's"));
    }
    Grant grant;
    grant.token = std::string(token);
    if (fields[1] == "*") {
      grant.all = true;
    } else {
      for (absl::string_view ns : absl::StrSplit(fields[1], ',')) {
        absl::Status valid = index::ValidateNamespace(ns);
        if (!valid.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("line ", line_number, ": ", valid.message()));
        }
        grant.namespaces.emplace_back(ns);
      }
    }
    table.tokens_.emplace(token, std::move(grant));
  }
  if (table.tokens_.empty()) {
    return absl::InvalidArgumentError(
        "no tokens: every client would be refused; add lines 'TOKEN "
        "NAMESPACES' or drop --auth_tokens");
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_tokens ", path, ": cannot open the file"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto table = Parse(text.str());
  if (!table.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth_tokens ", path, ": ", table.status().message()));
  }
  return table;
}

const TokenTable::Grant* TokenTable::Find(absl::string_view authorization,
                                          absl::Status* status) const {
  if (authorization.empty()) {
    *status = absl::UnauthenticatedError(
        "this chunkd requires a token: send metadata 'authorization: Bearer "
        "<token>'");
    return nullptr;
  }
  if (authorization.size() <= kBearer.size() ||
      !absl::StartsWithIgnoreCase(authorization, kBearer)) {
    *status = absl::UnauthenticatedError(
        "the authorization metadata must be 'Bearer <token>'");
    return nullptr;
  }
  const absl::string_view token =
      absl::StripLeadingAsciiWhitespace(authorization.substr(kBearer.size()));
  auto it = tokens_.find(token);
  if (it == tokens_.end()) {
    *status = absl::UnauthenticatedError(
        "the bearer token is not known to this chunkd; check the token (it "
        "may have been revoked)");
    return nullptr;
  }
  return &it->second;
}

absl::Status TokenTable::Authenticate(absl::string_view authorization) const {
  return Identify(authorization).status();
}

absl::StatusOr<absl::string_view> TokenTable::Identify(
    absl::string_view authorization) const {
  absl::Status status;
  const Grant* grant = Find(authorization, &status);
  if (grant == nullptr) return WithReason(status, ErrorReason::kUnauthenticated);
  return absl::string_view(grant->token);
}

absl::Status TokenTable::Authorize(absl::string_view authorization,
                                   absl::string_view ns) const {
  absl::Status status;
  const Grant* grant = Find(authorization, &status);
  if (grant == nullptr) return WithReason(status, ErrorReason::kUnauthenticated);
  if (grant->all || std::find(grant->namespaces.begin(), grant->namespaces.end(),
                              ns) != grant->namespaces.end()) {
    return absl::OkStatus();
  }
  return WithReason(absl::PermissionDeniedError(absl::StrCat(
                        "the token may not use namespace '", ns,
                        "'; ask for a token that grants it")),
                    ErrorReason::kPermissionDenied);
}

}  // namespace chunkd::service
