#include "fingerprint/fingerprint.h"

#include <openssl/sha.h>
#include <xxhash.h>

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fingerprint/sha256_mb.h"

namespace chunkd::fingerprint {

absl::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kSha256:
      return "sha256";
    case Kind::kXxh128:
      return "xxh128";
  }
  return "unknown";
}

absl::StatusOr<Kind> ParseKind(absl::string_view name) {
  for (Kind kind : {Kind::kSha256, Kind::kXxh128, Kind::kNone}) {
    if (name == KindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("fingerprint '", name,
                   "' is not one of: sha256, xxh128, none"));
}

size_t DigestSize(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return 0;
    case Kind::kSha256:
      return SHA256_DIGEST_LENGTH;
    case Kind::kXxh128:
      return sizeof(XXH128_canonical_t);
  }
  return 0;
}

void DigestTo(Kind kind, absl::string_view data, unsigned char* out) {
  switch (kind) {
    case Kind::kNone:
      return;
    case Kind::kSha256:
      SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
             out);
      return;
    case Kind::kXxh128: {
      XXH128_canonical_t canonical;
      XXH128_canonicalFromHash(&canonical, XXH3_128bits(data.data(), data.size()));
      std::copy(std::begin(canonical.digest), std::end(canonical.digest), out);
      return;
    }
  }
}

std::string Digest(Kind kind, absl::string_view data) {
  std::string out(DigestSize(kind), '\0');
  DigestTo(kind, data, reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

void DigestManyTo(Kind kind, absl::Span<const absl::string_view> messages,
                  unsigned char* out) {
  if (kind == Kind::kSha256) {
    Sha256Many(messages, out);
    return;
  }
  const size_t size = DigestSize(kind);
  for (size_t i = 0; i < messages.size(); ++i) {
    DigestTo(kind, messages[i], out + size * i);
  }
}

std::vector<std::string> DigestMany(
    Kind kind, absl::Span<const absl::string_view> messages) {
  const size_t size = DigestSize(kind);
  std::string all(size * messages.size(), '\0');
  DigestManyTo(kind, messages, reinterpret_cast<unsigned char*>(all.data()));
  std::vector<std::string> digests;
  digests.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    digests.push_back(all.substr(size * i, size));
  }
  return digests;
}

std::string ToHex(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    hex[2 * i] = kDigits[b >> 4];
    hex[2 * i + 1] = kDigits[b & 0xf];
  }
  return hex;
}

}  // namespace chunkd::fingerprint
