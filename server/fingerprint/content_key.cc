#include "fingerprint/content_key.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>

namespace chunkd::fingerprint {

std::unique_ptr<ContentKeyer> ContentKeyer::Random() {
  std::array<uint8_t, 16> key;
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    std::fprintf(stderr, "chunkd: RAND_bytes failed\n");
    std::abort();
  }
  return std::make_unique<ContentKeyer>(key);
}

ContentKeyer::ContentKeyer(const std::array<uint8_t, 16>& aes_key)
    : key_(aes_key) {}

ContentKey ContentKeyer::Of(absl::string_view bytes) const {
  static const unsigned char iv[12] = {};
  // One context per thread, set up for the last keyer it served.
  struct Ctx {
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    const ContentKeyer* keyer = nullptr;
    ~Ctx() { EVP_CIPHER_CTX_free(ctx); }
  };
  thread_local Ctx t;
  if (t.keyer != this) {
    EVP_EncryptInit_ex(t.ctx, EVP_aes_128_gcm(), nullptr, key_.data(), iv);
    t.keyer = this;
  } else {
    EVP_EncryptInit_ex(t.ctx, nullptr, nullptr, nullptr, iv);
  }
  int len = 0;
  EVP_EncryptUpdate(t.ctx, nullptr, &len,
                    reinterpret_cast<const unsigned char*>(bytes.data()),
                    static_cast<int>(bytes.size()));
  EVP_EncryptFinal_ex(t.ctx, nullptr, &len);
  ContentKey tag;
  EVP_CIPHER_CTX_ctrl(t.ctx, EVP_CTRL_GCM_GET_TAG, 16, tag.data());
  return tag;
}

}  // namespace chunkd::fingerprint
