#include "fingerprint/content_key.h"

#include <openssl/evp.h>
#include <stdlib.h>

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace chunkd::fingerprint {
namespace {

using Key = std::array<uint8_t, 16>;
using Iv = std::array<uint8_t, 12>;

// The reference, written here independently of content_key.cc: OpenSSL's
// AES-128-GCM with `aad` and no plaintext, a fresh context per call.
ContentKey ReferenceGmac(const Key& key, const Iv& iv, absl::string_view aad) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  EXPECT_NE(ctx, nullptr);
  int len = 0;
  ContentKey tag{};
  unsigned char none[16];
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, nullptr,
                               nullptr), 1);
  EXPECT_EQ(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, 12, nullptr), 1);
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, nullptr, nullptr, key.data(), iv.data()),
            1);
  if (!aad.empty()) {
    EXPECT_EQ(EVP_EncryptUpdate(
                  ctx, nullptr, &len,
                  reinterpret_cast<const unsigned char*>(aad.data()),
                  static_cast<int>(aad.size())),
              1);
  }
  EXPECT_EQ(EVP_EncryptFinal_ex(ctx, none, &len), 1);
  EXPECT_EQ(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag.data()), 1);
  EVP_CIPHER_CTX_free(ctx);
  return tag;
}

std::string Hex(const ContentKey& k) {
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(k.data()), k.size()));
}

template <size_t N>
std::array<uint8_t, N> FromHex(absl::string_view hex) {
  const std::string bytes = absl::HexStringToBytes(hex);
  std::array<uint8_t, N> out{};
  EXPECT_EQ(bytes.size(), N);
  for (size_t i = 0; i < N && i < bytes.size(); ++i) {
    out[i] = static_cast<uint8_t>(bytes[i]);
  }
  return out;
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

Key RandomKey(std::mt19937_64& rng) {
  Key k;
  for (uint8_t& b : k) b = static_cast<uint8_t>(rng());
  return k;
}

// The implementations this CPU runs; every test runs each of them.
std::vector<ContentKeyImpl> Runnable() {
  std::vector<ContentKeyImpl> out;
  for (ContentKeyImpl b :
       {ContentKeyImpl::kOpenSsl, ContentKeyImpl::kVpclmulqdq}) {
    if (FindContentKeyImpl(ContentKeyImplName(b)).ok()) out.push_back(b);
  }
  return out;
}

class ContentKeyTest : public ::testing::TestWithParam<ContentKeyImpl> {};

// NIST CAVP gcmEncryptExtIV128.rsp, [PTlen = 0] [AADlen = 128], counts 0
// and 1: the tag of AES-128-GCM with AAD only.
TEST_P(ContentKeyTest, NistGmacVectors) {
  struct Vector {
    const char* key;
    const char* iv;
    const char* aad;
    const char* tag;
  };
  const Vector vectors[] = {
      {"77be63708971c4e240d1cb79e8d77feb", "e0e00f19fed7ba0136a797f3",
       "7a43ec1d9c0a5a78a0b16533a6213cab", "209fcc8d3675ed938e9c7166709dd946"},
      {"7680c5d3ca6154758e510f4d25b98820", "f8f105f9c3df4965780321f8",
       "c94c410194c765e3dcc7964379758ed3", "94dca8edfcf90bb74b153c8d48a17930"},
  };
  for (const Vector& v : vectors) {
    const Key key = FromHex<16>(v.key);
    const Iv iv = FromHex<12>(v.iv);
    const std::string aad = absl::HexStringToBytes(v.aad);
    EXPECT_EQ(Hex(ReferenceGmac(key, iv, aad)), v.tag);
    EXPECT_EQ(Hex(ContentKeyer::Gmac(key, iv, aad, GetParam())), v.tag);
  }
}

TEST_P(ContentKeyTest, EqualsOpenSslForEveryLengthUpTo1100) {
  std::mt19937_64 rng(11);
  const std::string data = RandomBytes(rng, 1100 + 64);
  for (int k = 0; k < 3; ++k) {
    const Key key = RandomKey(rng);
    const ContentKeyer keyer(key, GetParam());
    for (size_t n = 0; n <= 1100; ++n) {
      // Start at varying offsets, so most inputs are unaligned.
      const absl::string_view in(data.data() + (n + k) % 61, n);
      ASSERT_EQ(Hex(keyer.Of(in)), Hex(ReferenceGmac(key, Iv{}, in)))
          << "length " << n << " key " << k;
    }
  }
}

TEST_P(ContentKeyTest, EqualsOpenSslForRandomLengthsUpTo256KiB) {
  std::mt19937_64 rng(29);
  const std::string data = RandomBytes(rng, (256 << 10) + 64);
  for (int k = 0; k < 4; ++k) {
    const Key key = RandomKey(rng);
    const ContentKeyer keyer(key, GetParam());
    std::vector<size_t> lengths = {256 << 10, 4096, 16384, 65536, 65535};
    for (int i = 0; i < 40; ++i) lengths.push_back(rng() % ((256 << 10) + 1));
    for (size_t n : lengths) {
      const absl::string_view in(data.data() + rng() % 64, n);
      ASSERT_EQ(Hex(keyer.Of(in)), Hex(ReferenceGmac(key, Iv{}, in)))
          << "length " << n << " key " << k;
    }
  }
}

TEST_P(ContentKeyTest, KeyAndContentChangeTheTag) {
  std::mt19937_64 rng(5);
  std::string data = RandomBytes(rng, 5000);
  const ContentKeyer a(RandomKey(rng), GetParam());
  const ContentKeyer b(RandomKey(rng), GetParam());
  EXPECT_NE(a.Of(data), b.Of(data));
  const ContentKey before = a.Of(data);
  data[4321] ^= 1;
  EXPECT_NE(a.Of(data), before);
  // Trailing zero bytes count (the length block).
  EXPECT_NE(a.Of(absl::string_view("\0", 1)), a.Of(absl::string_view()));
  EXPECT_STREQ(a.impl(), ContentKeyImplName(GetParam()));
}

// Two keyers taking turns on one thread, and one keyer on several threads
// at once: each tag is still OpenSSL's for its own key.
TEST_P(ContentKeyTest, InterleavedKeyersAndThreads) {
  std::mt19937_64 rng(7);
  const std::string data = RandomBytes(rng, 70000);
  const Key ka = RandomKey(rng), kb = RandomKey(rng);
  const ContentKeyer a(ka, GetParam()), b(kb, GetParam());
  for (size_t n : {0, 1, 100, 4096, 65536, 69999}) {
    const absl::string_view in(data.data() + 1, n);
    EXPECT_EQ(a.Of(in), ReferenceGmac(ka, Iv{}, in)) << n;
    EXPECT_EQ(b.Of(in), ReferenceGmac(kb, Iv{}, in)) << n;
  }
  std::vector<ContentKey> want(64);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = ReferenceGmac(ka, Iv{}, absl::string_view(data).substr(i, 1000 * i));
  }
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < want.size(); ++i) {
          const absl::string_view in =
              absl::string_view(data).substr(i, 1000 * i);
          if (a.Of(in) != want[i]) ++wrong[t];
          if (b.Of(in) == want[i]) ++wrong[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

INSTANTIATE_TEST_SUITE_P(
    Impls, ContentKeyTest, ::testing::ValuesIn(Runnable()),
    [](const ::testing::TestParamInfo<ContentKeyImpl>& info) {
      return std::string(ContentKeyImplName(info.param));
    });

TEST(ContentKeyImplTest, Names) {
  EXPECT_EQ(FindContentKeyImpl("openssl").value(), ContentKeyImpl::kOpenSsl);
  const absl::StatusOr<ContentKeyImpl> bad = FindContentKeyImpl("aesni");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'aesni' is not one of: vpclmulqdq, "
                                        "openssl"),
            absl::string_view::npos)
      << bad.status();
  // vpclmulqdq is either runnable or refused naming what is missing.
  const absl::StatusOr<ContentKeyImpl> fast = FindContentKeyImpl("vpclmulqdq");
  if (fast.ok()) {
    EXPECT_EQ(BestContentKeyImpl(), ContentKeyImpl::kVpclmulqdq);
  } else {
    EXPECT_EQ(fast.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(fast.status().message().find("missing"),
              absl::string_view::npos);
    EXPECT_EQ(BestContentKeyImpl(), ContentKeyImpl::kOpenSsl);
  }
}

TEST(ContentKeyImplTest, EnvironmentVariable) {
  ASSERT_EQ(setenv(kContentKeyEnvVar, "openssl", 1), 0);
  EXPECT_STREQ(ContentKeyer(Key{}).impl(), "openssl");
  EXPECT_STREQ(ContentKeyer::Random()->impl(), "openssl");
  ASSERT_EQ(setenv(kContentKeyEnvVar, "md5", 1), 0);
  const absl::StatusOr<ContentKeyImpl> bad = DefaultContentKeyImpl();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(
      bad.status().message(),
      "CHUNKD_CONTENT_KEY: content key implementation 'md5' is not one of: "
      "vpclmulqdq, openssl");
  EXPECT_DEATH(ContentKeyer(Key{}).impl(),
               "CHUNKD_CONTENT_KEY: content key implementation 'md5'");
  ASSERT_EQ(unsetenv(kContentKeyEnvVar), 0);
  EXPECT_STREQ(ContentKeyer(Key{}).impl(),
               ContentKeyImplName(BestContentKeyImpl()));
}

TEST(ContentKeyImplTest, RandomKeysDiffer) {
  const auto a = ContentKeyer::Random();
  const auto b = ContentKeyer::Random();
  EXPECT_NE(a->Of("chunkd"), b->Of("chunkd"));
}

}  // namespace
}  // namespace chunkd::fingerprint
