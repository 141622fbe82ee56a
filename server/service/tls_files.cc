#include "service/tls_files.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "openssl/bio.h"
#include "openssl/err.h"
#include "openssl/evp.h"
#include "openssl/pem.h"
#include "openssl/x509.h"

namespace chunkd::service {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

// OpenSSL's reason for the last failure, and the error queue emptied.
std::string OpenSslReason() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "no details";
  const char* reason = ERR_reason_error_string(code);
  return reason == nullptr ? absl::StrCat("error ", code) : reason;
}

absl::Status Bad(const char* flag, const std::string& path,
                 const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " ", path, ": ", problem));
}

absl::StatusOr<std::string> ReadFile(const char* flag,
                                     const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Bad(flag, path,
               absl::StrCat("cannot read the file (", std::strerror(errno),
                            ")"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return Bad(flag, path, "the file is empty");
  return text.str();
}

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The first PEM certificate of `pem`.
absl::StatusOr<Cert> FirstCertificate(const char* flag, const std::string& path,
                                      const std::string& pem) {
  Bio bio = MemoryBio(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return Bad(flag, path,
               absl::StrCat("no PEM certificate in the file (expected a "
                            "-----BEGIN CERTIFICATE----- block; OpenSSL: ",
                            OpenSslReason(), ")"));
  }
  return cert;
}

// Never asks for a passphrase: an encrypted key is refused.
int NoPassphrase(char*, int, int, void*) { return 0; }

}  // namespace

absl::StatusOr<TlsFiles> LoadTlsFiles(const std::string& cert_path,
                                      const std::string& key_path,
                                      const std::string& client_ca_path) {
  TlsFiles files;
  auto cert_pem = ReadFile("tls_cert", cert_path);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ReadFile("tls_key", key_path);
  if (!key_pem.ok()) return key_pem.status();
  auto cert = FirstCertificate("tls_cert", cert_path, *cert_pem);
  if (!cert.ok()) return cert.status();

  Bio key_bio = MemoryBio(*key_pem);
  Key key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase,
                                  nullptr));
  if (key == nullptr) {
    return Bad("tls_key", key_path,
               absl::StrCat("no unencrypted PEM private key in the file "
                            "(expected a -----BEGIN PRIVATE KEY----- block; "
                            "OpenSSL: ",
                            OpenSslReason(), ")"));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return Bad("tls_key", key_path,
               absl::StrCat("the key does not match the certificate of "
                            "--tls_cert ",
                            cert_path,
                            " (a key and certificate from different pairs?)"));
  }
  files.cert_chain = *std::move(cert_pem);
  files.private_key = *std::move(key_pem);
  if (!client_ca_path.empty()) {
    auto ca_pem = ReadFile("tls_client_ca", client_ca_path);
    if (!ca_pem.ok()) return ca_pem.status();
    auto ca = FirstCertificate("tls_client_ca", client_ca_path, *ca_pem);
    if (!ca.ok()) return ca.status();
    files.client_ca = *std::move(ca_pem);
  }
  return files;
}

}  // namespace chunkd::service
