// Chunk fingerprints (DESIGN.md §4): the digest of a chunk's bytes.
//
//   sha256  the default; OpenSSL, which uses the CPU's SHA extensions.
//   xxh128  XXH3-128 in its canonical (big-endian) form; not cryptographic, for
//           trusted single-tenant use only.
//
// Thread safety: every function is thread-safe.
#ifndef CHUNKD_FINGERPRINT_FINGERPRINT_H_
#define CHUNKD_FINGERPRINT_FINGERPRINT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chunkd::fingerprint {

enum class Kind : int {
  kNone = 0,
  kSha256 = 1,
  kXxh128 = 2,
};

// "none", "sha256", "xxh128".
absl::string_view KindName(Kind kind);

// Parses a name as returned by KindName; INVALID_ARGUMENT lists the names.
absl::StatusOr<Kind> ParseKind(absl::string_view name);

// Digest length in bytes: 0, 32, 16.
size_t DigestSize(Kind kind);

// The binary digest of `data`; empty for kNone.
std::string Digest(Kind kind, absl::string_view data);

// Writes the digest to `out`, which has room for DigestSize(kind) bytes.
void DigestTo(Kind kind, absl::string_view data, unsigned char* out);

// Lower-case hex of a binary string.
std::string ToHex(absl::string_view bytes);

}  // namespace chunkd::fingerprint

#endif  // CHUNKD_FINGERPRINT_FINGERPRINT_H_
