// Bearer-token authorization for ChunkService (docs/design.md, "API and authorization").
//
// `chunkd --auth_tokens FILE` turns authorization on. The file has one token
// per line, followed by the namespaces that token may use:
//
//   # comment
//   s3cr3t-token-for-team-a   team-a,team-a-staging
//   admin-token               *
//
// A client sends `authorization: Bearer <token>` metadata. Every
// ChunkService RPC needs a known token (UNAUTHENTICATED otherwise); RPCs that
// name a namespace (Dedup, FindMissing, Release, an Estimate with one) also
// need the token to allow it (PERMISSION_DENIED otherwise). The gRPC health
// and reflection services are not ChunkService and stay open.
//
// Thread safety: immutable after Load; safe to share.
#ifndef CHUNKD_SERVICE_AUTH_H_
#define CHUNKD_SERVICE_AUTH_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace chunkd::service {

class TokenTable {
 public:
  // Parses the file's text; errors name the line and what is wrong with it.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text);
  // Reads and parses `path`; errors name the file.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The value of the client's `authorization` metadata (empty when absent):
  // OK if it carries a known token, else UNAUTHENTICATED with a message
  // saying what to send. Never echoes the token.
  absl::Status Authenticate(absl::string_view authorization) const;

  // Authenticate, returning the token itself (a view valid as long as the
  // table): the key under which per-token limits count streams.
  absl::StatusOr<absl::string_view> Identify(
      absl::string_view authorization) const;

  // Authenticate, and the token may use `ns`, else PERMISSION_DENIED naming
  // the namespace.
  absl::Status Authorize(absl::string_view authorization,
                         absl::string_view ns) const;

  size_t size() const { return tokens_.size(); }

 private:
  struct Grant {
    std::string token;
    bool all = false;
    std::vector<std::string> namespaces;
  };
  // Null with `status` set when the metadata carries no known token.
  const Grant* Find(absl::string_view authorization, absl::Status* status) const;

  absl::flat_hash_map<std::string, Grant> tokens_;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_AUTH_H_
