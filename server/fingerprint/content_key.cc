#include "fingerprint/content_key.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/isa.h"

#ifdef CHUNKD_CONTENT_KEY_VPCLMUL
#include "fingerprint/vpclmul/ghash_vpclmul.h"
#endif

namespace chunkd::fingerprint {
namespace {

#ifdef CHUNKD_CONTENT_KEY_VPCLMUL
static_assert(vpclmul::kKeyWords == 64, "ContentKeyer::powers_ size");
// Exactly the instruction sets ghash_vpclmul.cc is compiled for, and the
// ZMM state they need.
constexpr uint32_t kVpclmulFeatures = platform::kAvx512F | platform::kAvx512Bw |
                                      platform::kAvx512Vl | platform::kPclmul |
                                      platform::kVpclmulqdq | platform::kOsZmm;
#endif

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "chunkd: %s\n", message.c_str());
  std::abort();
}

std::vector<std::string> Missing(ContentKeyImpl impl) {
  if (impl == ContentKeyImpl::kOpenSsl) return {};
#ifdef CHUNKD_CONTENT_KEY_VPCLMUL
  return platform::MissingFeatures(kVpclmulFeatures, platform::CpuFeatures());
#else
  return {"not built for this architecture"};
#endif
}

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using CtxPtr = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

// One AES-128 block encryption: out = AES_K(in).
void EncryptBlock(const std::array<uint8_t, 16>& key, const uint8_t* in,
                  uint8_t* out) {
  CtxPtr ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (ctx == nullptr ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_ecb(), nullptr, key.data(),
                         nullptr) != 1 ||
      EVP_CIPHER_CTX_set_padding(ctx.get(), 0) != 1 ||
      EVP_EncryptUpdate(ctx.get(), out, &len, in, 16) != 1 || len != 16) {
    Die("content key: OpenSSL AES-128-ECB failed");
  }
}

// AES-128-GCM of an empty plaintext with `aad`: the tag. One context per
// thread, so calls never share state; it keeps the key schedule (and
// OpenSSL's GHASH table) of the ContentKeyer that used it last, identified
// by `owner`, and only resets the IV while the same keyer calls again.
ContentKey OpenSslGmac(uint64_t owner, const std::array<uint8_t, 16>& key,
                       const std::array<uint8_t, 12>& iv,
                       absl::string_view aad) {
  struct ThreadContext {
    uint64_t owner = 0;
    CtxPtr ctx{EVP_CIPHER_CTX_new()};
  };
  thread_local ThreadContext t;
  bool ok = t.ctx != nullptr;
  if (ok && t.owner == owner) {
    ok = EVP_EncryptInit_ex(t.ctx.get(), nullptr, nullptr, nullptr,
                            iv.data()) == 1;
  } else if (ok) {
    ok = EVP_EncryptInit_ex(t.ctx.get(), EVP_aes_128_gcm(), nullptr,
                            key.data(), iv.data()) == 1;
    t.owner = ok ? owner : 0;
  }
  if (!ok) Die("content key: OpenSSL AES-128-GCM init failed");
  EVP_CIPHER_CTX* ctx = t.ctx.get();
  const auto* p = reinterpret_cast<const unsigned char*>(aad.data());
  size_t left = aad.size();
  while (left > 0) {
    // EVP lengths are int: at most 1 GiB per call (a multiple of 16, so
    // OpenSSL takes each piece whole).
    const size_t piece = left < (size_t{1} << 30) ? left : (size_t{1} << 30);
    int len = 0;
    if (EVP_EncryptUpdate(ctx, nullptr, &len, p,
                          static_cast<int>(piece)) != 1) {
      Die("content key: OpenSSL AES-128-GCM update failed");
    }
    p += piece;
    left -= piece;
  }
  unsigned char none[16];
  int len = 0;
  ContentKey tag;
  if (EVP_EncryptFinal_ex(ctx, none, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag.data()) != 1) {
    Die("content key: OpenSSL AES-128-GCM tag failed");
  }
  return tag;
}

}  // namespace

const char* ContentKeyImplName(ContentKeyImpl impl) {
  return impl == ContentKeyImpl::kVpclmulqdq ? "vpclmulqdq" : "openssl";
}

absl::StatusOr<ContentKeyImpl> FindContentKeyImpl(absl::string_view name) {
  for (ContentKeyImpl impl :
       {ContentKeyImpl::kVpclmulqdq, ContentKeyImpl::kOpenSsl}) {
    if (name != ContentKeyImplName(impl)) continue;
    std::vector<std::string> missing = Missing(impl);
    if (!missing.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "content key implementation '", name, "' cannot run on this CPU: ",
          absl::StrJoin(missing, ", "), " missing"));
    }
    return impl;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("content key implementation '", name,
                   "' is not one of: vpclmulqdq, openssl"));
}

ContentKeyImpl BestContentKeyImpl() {
  return Missing(ContentKeyImpl::kVpclmulqdq).empty()
             ? ContentKeyImpl::kVpclmulqdq
             : ContentKeyImpl::kOpenSsl;
}

absl::StatusOr<ContentKeyImpl> DefaultContentKeyImpl() {
  const char* forced = std::getenv(kContentKeyEnvVar);
  if (forced == nullptr || *forced == '\0') return BestContentKeyImpl();
  absl::StatusOr<ContentKeyImpl> impl = FindContentKeyImpl(forced);
  if (!impl.ok()) {
    return absl::Status(
        impl.status().code(),
        absl::StrCat(kContentKeyEnvVar, ": ", impl.status().message()));
  }
  return impl;
}

std::unique_ptr<ContentKeyer> ContentKeyer::Random() {
  std::array<uint8_t, 16> key;
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    Die("content key: OpenSSL RAND_bytes failed to draw a random key");
  }
  return std::make_unique<ContentKeyer>(key);
}

namespace {
// ContentKeyer ids for OpenSslGmac's per-thread contexts; 0 is none.
std::atomic<uint64_t> next_id{1};

ContentKeyImpl DefaultOrDie() {
  absl::StatusOr<ContentKeyImpl> impl = DefaultContentKeyImpl();
  if (!impl.ok()) Die(std::string(impl.status().message()));
  return *impl;
}
}  // namespace

ContentKeyer::ContentKeyer(const std::array<uint8_t, 16>& aes_key)
    : ContentKeyer(aes_key, std::array<uint8_t, 12>{}, DefaultOrDie()) {}

ContentKeyer::ContentKeyer(const std::array<uint8_t, 16>& aes_key,
                           ContentKeyImpl impl)
    : ContentKeyer(aes_key, std::array<uint8_t, 12>{}, impl) {}

ContentKeyer::ContentKeyer(const std::array<uint8_t, 16>& aes_key,
                           const std::array<uint8_t, 12>& iv,
                           ContentKeyImpl impl)
    : aes_key_(aes_key),
      iv_(iv),
      impl_(impl),
      id_(next_id.fetch_add(1, std::memory_order_relaxed)) {
  std::vector<std::string> missing = Missing(impl);
  if (!missing.empty()) {
    Die(absl::StrCat("content key implementation '", ContentKeyImplName(impl),
                     "' cannot run on this CPU: ", absl::StrJoin(missing, ", "),
                     " missing"));
  }
  if (impl_ != ContentKeyImpl::kVpclmulqdq) return;
#ifdef CHUNKD_CONTENT_KEY_VPCLMUL
  uint8_t j0[16] = {};
  for (size_t i = 0; i < iv_.size(); ++i) j0[i] = iv_[i];
  j0[15] = 1;
  EncryptBlock(aes_key_, j0, tag_mask_.data());
  const uint8_t zero[16] = {};
  uint8_t h[16];
  EncryptBlock(aes_key_, zero, h);
  vpclmul::PrepareKey(h, powers_.data());
#endif
}

ContentKey ContentKeyer::Of(absl::string_view bytes) const {
#ifdef CHUNKD_CONTENT_KEY_VPCLMUL
  if (impl_ == ContentKeyImpl::kVpclmulqdq) {
    ContentKey tag;
    vpclmul::GhashAad(powers_.data(),
                      reinterpret_cast<const unsigned char*>(bytes.data()),
                      bytes.size(), tag.data());
    for (size_t i = 0; i < tag.size(); ++i) tag[i] ^= tag_mask_[i];
    return tag;
  }
#endif
  return OpenSslGmac(id_, aes_key_, iv_, bytes);
}

const char* ContentKeyer::impl() const { return ContentKeyImplName(impl_); }

ContentKey ContentKeyer::Gmac(const std::array<uint8_t, 16>& aes_key,
                              const std::array<uint8_t, 12>& iv,
                              absl::string_view aad, ContentKeyImpl impl) {
  return ContentKeyer(aes_key, iv, impl).Of(aad);
}

}  // namespace chunkd::fingerprint
