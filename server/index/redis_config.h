// RedisConfig: what a redis:// or redis-cluster:// --index spec says, with
// the password resolved from the URL, the options, a file or the
// environment (see CreateIndex in fingerprint_index.h for the formats).
//
// Thread safety: plain values.
#ifndef CHUNKD_INDEX_REDIS_CONFIG_H_
#define CHUNKD_INDEX_REDIS_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "index/fingerprint_index.h"

namespace chunkd::index {

// Environment variable consulted for the Redis password last.
inline constexpr char kRedisPasswordEnv[] = "CHUNKD_REDIS_PASSWORD";
// Bounds of the pool size.
inline constexpr int kMaxPoolSize = 1024;

struct RedisAddress {
  std::string host;  // name or address; IPv6 without brackets
  int port = 0;

  // "host:port", "[v6]:port" for IPv6.
  std::string ToString() const;
};

struct RedisConfig {
  bool cluster = false;               // redis-cluster://
  std::vector<RedisAddress> servers;  // one for redis://; the seeds otherwise
  std::string username;               // empty: AUTH <password> alone
  std::string password;               // empty: no AUTH
  int db = 0;                         // redis:// only
  IndexOptions options;               // with the URL's query applied
  // The key-per-entry layout of chunkd 0.3 and before instead of buckets
  // (redis_layout.h): for the benchmark and the migration tests only; never
  // set by a spec.
  bool legacy_layout = false;
};

// Parses `spec` (which starts with redis:// or redis-cluster://).
// INVALID_ARGUMENT naming --index for anything malformed; the message never
// repeats a password.
absl::StatusOr<RedisConfig> ParseRedisSpec(absl::string_view spec,
                                           const IndexOptions& options);

// Parses "host:port" or "[v6]:port" (as in MOVED replies).
absl::StatusOr<RedisAddress> ParseRedisAddress(absl::string_view text);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_CONFIG_H_
