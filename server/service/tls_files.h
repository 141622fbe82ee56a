// The TLS files of --tls_cert, --tls_key and --tls_client_ca, read and
// checked at start-up so that a bad file stops chunkd with a message naming
// the file and the problem (unreadable, not PEM, key and certificate do not
// match), not with gRPC's "cannot listen".
#ifndef CHUNKD_SERVICE_TLS_FILES_H_
#define CHUNKD_SERVICE_TLS_FILES_H_

#include <string>

#include "absl/status/statusor.h"

namespace chunkd::service {

struct TlsFiles {
  std::string cert_chain;   // PEM, one or more certificates
  std::string private_key;  // PEM
  std::string client_ca;    // PEM bundle; empty without mutual TLS
};

// Reads and checks the files: the certificate chain must hold at least one
// PEM certificate, the key an unencrypted PEM private key that belongs to
// the chain's first certificate, and the client CA bundle (when
// `client_ca_path` is not empty) at least one PEM certificate.
// INVALID_ARGUMENT naming the flag, the path and what is wrong.
absl::StatusOr<TlsFiles> LoadTlsFiles(const std::string& cert_path,
                                      const std::string& key_path,
                                      const std::string& client_ca_path);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_TLS_FILES_H_
