// Chunk fingerprints (docs/design.md, "Fingerprints"): the digest of a chunk's bytes.
//
//   sha256  the default. One message: OpenSSL, which uses the CPU's SHA
//           extensions. Many (DigestMany): several messages at once per core
//           where the CPU has the SHA extensions (sha256_mb.h), else OpenSSL.
//   xxh128  XXH3-128 in its canonical (big-endian) form; not cryptographic, for
//           trusted single-tenant use only.
//
// Thread safety: every function is thread-safe.
#ifndef CHUNKD_FINGERPRINT_FINGERPRINT_H_
#define CHUNKD_FINGERPRINT_FINGERPRINT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

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

// The digests of many messages, in order: element i is
// Digest(kind, messages[i]). Faster than one Digest per message for sha256
// (several messages hashed at once; sha256_mb.h).
std::vector<std::string> DigestMany(Kind kind,
                                    absl::Span<const absl::string_view> messages);

// The same written one after another to `out`, which has room for
// messages.size() * DigestSize(kind) bytes.
void DigestManyTo(Kind kind, absl::Span<const absl::string_view> messages,
                  unsigned char* out);

// Lower-case hex of a binary string.
std::string ToHex(absl::string_view bytes);

}  // namespace chunkd::fingerprint

#endif  // CHUNKD_FINGERPRINT_FINGERPRINT_H_
