// A keyed 128-bit content hash: AES-128-GMAC under a secret key.
//
// With a secret random key, two different contents of at most n 16-byte
// blocks get the same ContentKey with probability at most about
// (n + 1) / 2^128 (GHASH is a universal hash), so a value cached under a
// ContentKey can be trusted without re-checking the content. Unlike SHA-256
// it is not a public fingerprint: it means nothing outside the process that
// drew the key.
//
// Implementations (the output never depends on them):
//   vpclmulqdq  GHASH with VPCLMULQDQ on 512-bit registers, 32 blocks per
//               reduction (fingerprint/vpclmul/); needs avx512f/bw/vl,
//               pclmulqdq, vpclmulqdq and the OS saving ZMM state
//   openssl     OpenSSL's EVP AES-128-GCM with the content as AAD
// The best the CPU runs is the default; $CHUNKD_CONTENT_KEY (kContentKeyEnvVar)
// forces one. An unknown or unsupported value stops the process with a
// message naming it, never a silent fallback.
//
// Thread safety: a ContentKeyer is immutable after construction; Of() may be
// called from any number of threads at once.
#ifndef CHUNKD_FINGERPRINT_CONTENT_KEY_H_
#define CHUNKD_FINGERPRINT_CONTENT_KEY_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chunkd::fingerprint {

using ContentKey = std::array<uint8_t, 16>;

enum class ContentKeyImpl { kOpenSsl, kVpclmulqdq };

inline constexpr char kContentKeyEnvVar[] = "CHUNKD_CONTENT_KEY";

// "openssl" or "vpclmulqdq".
const char* ContentKeyImplName(ContentKeyImpl impl);

// The implementation called `name`: InvalidArgument for an unknown name,
// FailedPrecondition (naming the missing CPU features) for one this CPU
// cannot run.
absl::StatusOr<ContentKeyImpl> FindContentKeyImpl(absl::string_view name);

// The fastest implementation this CPU runs.
ContentKeyImpl BestContentKeyImpl();

// $CHUNKD_CONTENT_KEY when set and non-empty (an error prefixed with the
// variable's name when it is not a usable implementation), else the best.
absl::StatusOr<ContentKeyImpl> DefaultContentKeyImpl();

// AES-128-GMAC of content under a secret key: IV = 12 zero bytes, the
// content as AAD, the 16-byte tag.
class ContentKeyer {
 public:
  // A fresh key from OpenSSL's RAND_bytes (aborts with a clear message if
  // that fails), with the default implementation.
  static std::unique_ptr<ContentKeyer> Random();

  // The default implementation (DefaultContentKeyImpl(); aborts with its
  // message when $CHUNKD_CONTENT_KEY names no usable implementation).
  explicit ContentKeyer(const std::array<uint8_t, 16>& aes_key);
  // A given implementation; the caller has checked it runs here
  // (FindContentKeyImpl), else this aborts.
  ContentKeyer(const std::array<uint8_t, 16>& aes_key, ContentKeyImpl impl);

  ContentKey Of(absl::string_view bytes) const;

  const char* impl() const;  // "vpclmulqdq" or "openssl"

  // GMAC with any 12-byte IV (the tag of AES-128-GCM with `aad` and an empty
  // plaintext), for known-answer tests of both implementations.
  static ContentKey Gmac(const std::array<uint8_t, 16>& aes_key,
                         const std::array<uint8_t, 12>& iv,
                         absl::string_view aad, ContentKeyImpl impl);

 private:
  ContentKeyer(const std::array<uint8_t, 16>& aes_key,
               const std::array<uint8_t, 12>& iv, ContentKeyImpl impl);

  std::array<uint8_t, 16> aes_key_;
  std::array<uint8_t, 12> iv_;
  ContentKeyImpl impl_;
  // Unique per constructed keyer (a copy shares it: same key and IV): the
  // openssl implementation's per-thread context knows whose key it holds.
  uint64_t id_;
  // AES_K(J0), J0 = IV || 0x00000001: XORed onto GHASH for the tag.
  std::array<uint8_t, 16> tag_mask_{};
  // The vpclmulqdq implementation's powers of H (vpclmul::PrepareKey).
  std::array<uint64_t, 64> powers_{};
};

}  // namespace chunkd::fingerprint

#endif  // CHUNKD_FINGERPRINT_CONTENT_KEY_H_
