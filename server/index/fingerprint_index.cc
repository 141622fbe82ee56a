#include "index/fingerprint_index.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "index/memory_index.h"
#ifdef CHUNKD_WITH_ROCKSDB
#include "index/rocksdb_index.h"
#endif

#ifdef CHUNKD_WITH_REDIS
#include "index/redis_config.h"
#include "index/redis_index.h"
#endif

namespace chunkd::index {
namespace {

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
         c == '_' || c == '-';
}

absl::Status ValidateName(absl::string_view field, absl::string_view value,
                          size_t max_length) {
  if (value.empty() || value.size() > max_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be 1..", max_length,
        " characters of [A-Za-z0-9._-], got ", value.size(), " characters"));
  }
  for (char c : value) {
    if (!IsNameChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " may contain only [A-Za-z0-9._-]; character 0x",
          absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2),
          " is not allowed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateNamespace(absl::string_view ns) {
  return ValidateName("namespace", ns, kMaxNamespaceLength);
}

absl::Status ValidateWriteToken(const WriteToken& token) {
  return ValidateName("stream_id", token.stream_id, kMaxStreamIdLength);
}

absl::Status ValidateParamsKey(absl::string_view params_key) {
  if (params_key.empty() || params_key.size() > kMaxParamsKeyLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("params_key must be 1..", kMaxParamsKeyLength,
                     " printable characters, got ", params_key.size()));
  }
  for (char c : params_key) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          "params_key may contain only printable ASCII without spaces; "
          "character 0x",
          absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2),
          " is not allowed"));
    }
  }
  return absl::OkStatus();
}

absl::string_view BackendOfSpec(absl::string_view spec) {
  if (spec == "memory") return "memory";
  if (absl::StartsWith(spec, "rocksdb://")) return "rocksdb";
  if (absl::StartsWith(spec, "redis://")) return "redis";
  if (absl::StartsWith(spec, "redis-cluster://")) return "redis-cluster";
  return "";
}

namespace {

// A spec of no known scheme.
absl::Status UnsupportedSpec(absl::string_view spec) {
  return absl::InvalidArgumentError(
      absl::StrCat("--index '", RedactIndexSpec(spec),
                   "' is not supported; use 'memory', 'rocksdb:///path', "
                   "'redis://[[user]:password@]host:port[/db]' or "
                   "'redis-cluster://host:port[,host:port...]'"));
}

}  // namespace

absl::StatusOr<IndexPlacement> PlacementOfSpec(absl::string_view spec) {
  IndexPlacement placement;
  placement.backend = BackendOfSpec(spec);
  if (placement.backend.empty()) return UnsupportedSpec(spec);
  placement.in_process_memory = placement.backend == "memory";
  placement.block_cache = placement.backend == "rocksdb";
  placement.embedded = placement.in_process_memory || placement.block_cache;
  placement.persistent = !placement.in_process_memory;
  return placement;
}

std::string RedactIndexSpec(absl::string_view spec) {
  const size_t scheme = spec.find("://");
  if (scheme == absl::string_view::npos) return std::string(spec);
  const size_t authority = scheme + 3;
  size_t end = spec.find('?', authority);
  if (end == absl::string_view::npos) end = spec.size();
  const size_t at = spec.substr(0, end).rfind('@');
  if (at == absl::string_view::npos || at < authority) {
    return std::string(spec);
  }
  const size_t colon = spec.substr(0, at).find(':', authority);
  if (colon == absl::string_view::npos) {
    return absl::StrCat(spec.substr(0, authority), "***", spec.substr(at));
  }
  return absl::StrCat(spec.substr(0, colon + 1), "***", spec.substr(at));
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> FingerprintIndex::NextSizes(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints) {
  auto hints = NextHintsOf(ns, params_key, fingerprints);
  if (!hints.ok()) return hints.status();
  std::vector<std::vector<uint32_t>> sizes;
  sizes.reserve(hints->size());
  for (NextHints& h : *hints) sizes.push_back(std::move(h.sizes));
  return sizes;
}

bool RedisSupported() {
#ifdef CHUNKD_WITH_REDIS
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateIndex(
    absl::string_view spec, const IndexOptions& options) {
  if (spec == "memory") {
    if (options.next_sizes_length < 1 ||
        options.next_sizes_length > kMaxNextSizesLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("--index memory: next_sizes_length must be 1..",
                       kMaxNextSizesLength));
    }
    return std::make_unique<MemoryIndex>(options);
  }
  const absl::string_view backend = BackendOfSpec(spec);
  if (backend == "rocksdb") {
#ifdef CHUNKD_WITH_ROCKSDB
    auto rocksdb = ParseRocksDbSpec(spec);
    if (!rocksdb.ok()) return rocksdb.status();
    return OpenRocksDbIndex(*rocksdb, options);
#else
    return absl::InvalidArgumentError(absl::StrCat(
        "--index '", spec,
        "': this chunkd was built without RocksDB (CHUNKD_WITH_ROCKSDB=OFF)"));
#endif
  }
  const bool redis = backend == "redis" || backend == "redis-cluster";
#ifdef CHUNKD_WITH_REDIS
  if (redis) {
    auto config = ParseRedisSpec(spec, options);
    if (!config.ok()) return config.status();
    return CreateRedisIndex(*std::move(config));
  }
#else
  if (redis) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--index '", RedactIndexSpec(spec),
        "': this chunkd was built without Redis (CHUNKD_WITH_REDIS=OFF)"));
  }
#endif
  return UnsupportedSpec(spec);
}

absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateIndex(
    absl::string_view spec) {
  return CreateIndex(spec, IndexOptions());
}

}  // namespace chunkd::index
