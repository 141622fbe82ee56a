#include "index/redis_config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "index/redis_layout.h"

namespace chunkd::index {
namespace {

constexpr absl::string_view kRedisScheme = "redis://";
constexpr absl::string_view kClusterScheme = "redis-cluster://";
constexpr int64_t kMaxTimeoutMs = 3600 * 1000;

absl::Status Bad(absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--index '", RedactIndexSpec(spec), "': ", why));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(static_cast<unsigned char>(c));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// RFC 3986 percent-decoding, so that a password may hold ':', '@' or '/'.
bool PercentDecode(absl::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = HexValue(in[i + 1]);
    const int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// `source` names where the path came from, for the error message.
absl::Status ReadPasswordFile(absl::string_view source,
                              const std::string& path, std::string* password) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": cannot read the Redis password file ", path,
                     ": ", std::strerror(errno)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": cannot read the Redis password file ", path,
                     ": ", std::strerror(errno)));
  }
  // The newline that editors and `echo` add (and a CR before it) is not
  // part of the password; anything else is.
  std::string text = buffer.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": the Redis password file ", path, " is empty"));
  }
  *password = std::move(text);
  return absl::OkStatus();
}

// `min_ms` is 0 or 1.
absl::Status ParseMillis(absl::string_view spec, absl::string_view name,
                         absl::string_view value, absl::Duration* out,
                         int64_t min_ms = 1) {
  int64_t ms = 0;
  if (!absl::SimpleAtoi(value, &ms) || ms < min_ms || ms > kMaxTimeoutMs) {
    return Bad(spec, absl::StrCat(name, " must be ", min_ms, "..",
                                  kMaxTimeoutMs, " milliseconds"));
  }
  *out = absl::Milliseconds(ms);
  return absl::OkStatus();
}

absl::Status ValidateOptions(absl::string_view spec, const IndexOptions& o,
                             bool cluster) {
  auto positive = [](absl::Duration d) {
    return d > absl::ZeroDuration() && d <= absl::Hours(1);
  };
  if (!positive(o.connect_timeout)) {
    return Bad(spec, "the connect timeout must be in (0, 1h]");
  }
  if (!positive(o.command_timeout)) {
    return Bad(spec, "the command timeout must be in (0, 1h]");
  }
  if (o.pool_size < 1 || o.pool_size > kMaxPoolSize) {
    return Bad(spec, absl::StrCat("pool_size must be 1..", kMaxPoolSize));
  }
  if (!positive(o.reconnect_backoff_min) ||
      o.reconnect_backoff_max < o.reconnect_backoff_min ||
      o.reconnect_backoff_max > absl::Hours(1)) {
    return Bad(spec, "the reconnect backoff must satisfy 0 < min <= max <= 1h");
  }
  if (o.failover_wait < absl::ZeroDuration() ||
      o.failover_wait > absl::Hours(1)) {
    return Bad(spec,
               "the failover wait (--redis_failover_wait, failover_wait_ms) "
               "must be in [0, 1h]");
  }
  if (o.cluster_wait_replicas < 0 || o.cluster_wait_replicas > 16) {
    return Bad(spec, "cluster_wait_replicas must be 0..16");
  }
  if (cluster && o.cluster_wait_replicas > 0 &&
      (!positive(o.cluster_wait_timeout) ||
       o.cluster_wait_timeout >= o.command_timeout)) {
    return Bad(spec,
               "the cluster WAIT timeout must be positive and shorter than "
               "the command timeout");
  }
  if (o.next_sizes_length < 1 || o.next_sizes_length > kMaxNextSizesLength) {
    return Bad(spec, absl::StrCat("next_sizes_length must be 1..",
                                  kMaxNextSizesLength));
  }
  if (o.token_ttl < absl::Seconds(1) || o.token_ttl > absl::Hours(24 * 7)) {
    return Bad(spec, "token_ttl must be 1 s..7 days");
  }
  return absl::OkStatus();
}

// `userinfo` is the URL's "[user]:password", percent-encoded.
absl::Status ParseCredentials(absl::string_view spec,
                              absl::string_view userinfo, std::string* username,
                              std::string* password) {
  const size_t colon = userinfo.find(':');
  if (colon == absl::string_view::npos) {
    return Bad(spec, "credentials must be written [user]:password@");
  }
  if (!PercentDecode(userinfo.substr(0, colon), username) ||
      !PercentDecode(userinfo.substr(colon + 1), password)) {
    return Bad(spec, "credentials have a malformed %-escape");
  }
  return absl::OkStatus();
}

// `rest` is the URL's "host:port[,host:port...][/db]".
absl::Status ParseServers(absl::string_view spec, absl::string_view rest,
                          RedisConfig* config) {
  absl::string_view hosts = rest;
  if (const size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    hosts = rest.substr(0, slash);
    absl::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      if (config->cluster && db != "0") {
        return Bad(spec, "a Redis Cluster has only database 0");
      }
      if (!absl::SimpleAtoi(db, &config->db) || config->db < 0 ||
          config->db > 15) {
        return Bad(spec, "the database must be a number 0..15");
      }
    }
  }
  if (hosts.empty()) return Bad(spec, "no host:port");
  for (absl::string_view host : absl::StrSplit(hosts, ',')) {
    auto address = ParseRedisAddress(host);
    if (!address.ok()) return Bad(spec, address.status().message());
    config->servers.push_back(*std::move(address));
  }
  if (!config->cluster && config->servers.size() != 1) {
    return Bad(
        spec, "redis:// takes one host:port; use redis-cluster:// for several");
  }
  return absl::OkStatus();
}

// One option of the URL's query, its value percent-decoded.
absl::Status ParseQueryOption(absl::string_view spec, absl::string_view name,
                              const std::string& value, IndexOptions* options,
                              std::string* password_file) {
  if (name == "password_file") {
    *password_file = value;
    return absl::OkStatus();
  }
  if (name == "connect_timeout_ms") {
    return ParseMillis(spec, name, value, &options->connect_timeout);
  }
  if (name == "command_timeout_ms") {
    return ParseMillis(spec, name, value, &options->command_timeout);
  }
  if (name == "failover_wait_ms") {
    return ParseMillis(spec, name, value, &options->failover_wait, 0);
  }
  if (name == "pool_size") {
    if (!absl::SimpleAtoi(value, &options->pool_size)) {
      return Bad(spec, absl::StrCat("pool_size must be 1..", kMaxPoolSize));
    }
    return absl::OkStatus();
  }
  if (name == "bucket_bits") {
    if (!absl::SimpleAtoi(value, &options->redis_bucket_bits) ||
        options->redis_bucket_bits < kMinBucketBits ||
        options->redis_bucket_bits > kMaxBucketBits) {
      return Bad(spec, absl::StrCat("bucket_bits must be ", kMinBucketBits,
                                    "..", kMaxBucketBits));
    }
    return absl::OkStatus();
  }
  return Bad(spec, absl::StrCat("unknown option '", name,
                                "'; known: password_file, connect_timeout_ms, "
                                "command_timeout_ms, pool_size, "
                                "failover_wait_ms, bucket_bits"));
}

// `query` is the URL's "name=value&...", after the '?'.
absl::Status ParseQuery(absl::string_view spec, absl::string_view query,
                        IndexOptions* options, std::string* password_file) {
  if (query.empty()) return absl::OkStatus();
  for (absl::string_view pair : absl::StrSplit(query, '&')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    std::string value;
    if (!PercentDecode(kv.second, &value)) {
      return Bad(spec, absl::StrCat(kv.first, " has a malformed %-escape"));
    }
    absl::Status s =
        ParseQueryOption(spec, kv.first, value, options, password_file);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The first source that is set wins: the URL's password, its
// password_file, --redis_password, --redis_password_file, the environment.
absl::Status ResolvePassword(absl::string_view spec,
                             const IndexOptions& options,
                             std::string url_password,
                             const std::string& url_password_file,
                             std::string* password) {
  if (!url_password.empty()) {
    *password = std::move(url_password);
  } else if (!url_password_file.empty()) {
    return ReadPasswordFile(
        absl::StrCat("--index '", RedactIndexSpec(spec), "'"),
        url_password_file, password);
  } else if (!options.redis_password.empty()) {
    *password = options.redis_password;
  } else if (!options.redis_password_file.empty()) {
    return ReadPasswordFile("--redis_password_file",
                            options.redis_password_file, password);
  } else if (const char* env = std::getenv(kRedisPasswordEnv); env != nullptr) {
    *password = env;
  }
  return absl::OkStatus();
}

}  // namespace

std::string RedisAddress::ToString() const {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<RedisAddress> ParseRedisAddress(absl::string_view text) {
  RedisAddress address;
  absl::string_view port;
  if (absl::ConsumePrefix(&text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() ||
        text[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("'[", text, "' is not [address]:port"));
    }
    address.host = std::string(text.substr(0, close));
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' is not host:port"));
    }
    address.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  if (!absl::SimpleAtoi(port, &address.port) || address.port < 1 ||
      address.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' has no port in 1..65535"));
  }
  for (char c : address.host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '-' && c != '_' && c != ':') {
      return absl::InvalidArgumentError(absl::StrCat(
          "host '", address.host, "' has a character 0x",
          absl::Hex(static_cast<unsigned char>(c)), " that is not allowed"));
    }
  }
  return address;
}

absl::StatusOr<RedisConfig> ParseRedisSpec(absl::string_view spec,
                                           const IndexOptions& options) {
  RedisConfig config;
  config.options = options;
  absl::string_view rest = spec;
  if (absl::ConsumePrefix(&rest, kClusterScheme)) {
    config.cluster = true;
  } else if (!absl::ConsumePrefix(&rest, kRedisScheme)) {
    return Bad(spec, "expected redis:// or redis-cluster://");
  }

  absl::string_view query;
  if (const size_t q = rest.find('?'); q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }

  std::string url_password;
  if (const size_t at = rest.rfind('@'); at != absl::string_view::npos) {
    absl::Status s = ParseCredentials(spec, rest.substr(0, at),
                                      &config.username, &url_password);
    if (!s.ok()) return s;
    rest = rest.substr(at + 1);
  }
  if (absl::Status s = ParseServers(spec, rest, &config); !s.ok()) return s;

  std::string url_password_file;
  if (absl::Status s =
          ParseQuery(spec, query, &config.options, &url_password_file);
      !s.ok()) {
    return s;
  }
  absl::Status valid = ValidateOptions(spec, config.options, config.cluster);
  if (!valid.ok()) return valid;

  if (absl::Status s = ResolvePassword(spec, options, std::move(url_password),
                                       url_password_file, &config.password);
      !s.ok()) {
    return s;
  }
  if (!config.username.empty() && config.password.empty()) {
    return Bad(spec, "a user name needs a password");
  }
  return config;
}

}  // namespace chunkd::index
