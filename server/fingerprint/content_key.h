// ContentKeyer: a keyed 128-bit hash of content (AES-128-GMAC under a
// secret key). Placeholder with the OpenSSL backend only; the ghash branch
// brings the fast one.
#ifndef CHUNKD_FINGERPRINT_CONTENT_KEY_H_
#define CHUNKD_FINGERPRINT_CONTENT_KEY_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"

namespace chunkd::fingerprint {

using ContentKey = std::array<uint8_t, 16>;

class ContentKeyer {
 public:
  static std::unique_ptr<ContentKeyer> Random();
  explicit ContentKeyer(const std::array<uint8_t, 16>& aes_key);
  ContentKey Of(absl::string_view bytes) const;
  const char* backend() const { return "openssl"; }

 private:
  std::array<uint8_t, 16> key_;
};

}  // namespace chunkd::fingerprint

#endif  // CHUNKD_FINGERPRINT_CONTENT_KEY_H_
