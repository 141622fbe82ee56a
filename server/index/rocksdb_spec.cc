// ParseRocksDbSpec (rocksdb_index.h): the rocksdb:/// URL of --index.
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "index/rocksdb_index.h"

namespace chunkd::index {
namespace {

absl::StatusOr<uint64_t> ParseNumber(absl::string_view spec,
                                     absl::string_view name,
                                     absl::string_view value) {
  uint64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--index '", spec, "': ", name, "='", value,
                     "' is not a non-negative whole number"));
  }
  return n;
}

absl::Status ParseRocksDbOption(absl::string_view spec, absl::string_view name,
                                absl::string_view value,
                                RocksDbOptions* options) {
  if (name == "sync") {
    if (value == "always") {
      options->sync = RocksDbSync::kAlways;
    } else if (value == "batch") {
      options->sync = RocksDbSync::kBatch;
    } else if (value == "none") {
      options->sync = RocksDbSync::kNone;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--index '", spec, "': sync='", value,
                       "' is not one of always, batch, none"));
    }
    return absl::OkStatus();
  }
  if (name == "checkpoint_dir") {
    if (!absl::StartsWith(value, "/")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--index '", spec, "': checkpoint_dir must be an absolute path"));
    }
    options->checkpoint_dir = std::string(value);
    return absl::OkStatus();
  }
  if (name != "sync_interval_ms" && name != "cache_mib") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--index '", spec, "': unknown option '", name,
        "'; rocksdb takes sync, sync_interval_ms, cache_mib, checkpoint_dir"));
  }
  auto n = ParseNumber(spec, name, value);
  if (!n.ok()) return n.status();
  if (*n == 0 || *n > (uint64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--index '", spec, "': ", name, " must be 1..1048576"));
  }
  if (name == "sync_interval_ms") {
    options->sync_interval = absl::Milliseconds(static_cast<int64_t>(*n));
  } else {
    options->cache_bytes = *n << 20;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RocksDbOptions> ParseRocksDbSpec(absl::string_view spec) {
  constexpr absl::string_view kScheme = "rocksdb://";
  if (!absl::StartsWith(spec, kScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--index '", spec, "' is not a rocksdb:///path URL"));
  }
  absl::string_view rest = spec.substr(kScheme.size());
  absl::string_view query;
  if (size_t q = rest.find('?'); q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (!absl::StartsWith(rest, "/") || rest.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--index '", spec,
        "': the path must be absolute, e.g. rocksdb:///var/lib/chunkd/index"));
  }
  RocksDbOptions options;
  options.path = std::string(rest);
  while (options.path.size() > 1 && options.path.back() == '/') {
    options.path.pop_back();
  }
  options.cache_bytes = 0;  // unset: IndexOptions or the default decides
  if (query.empty()) return options;
  for (absl::string_view pair : absl::StrSplit(query, '&')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (absl::Status s = ParseRocksDbOption(spec, kv.first, kv.second,
                                            &options);
        !s.ok()) {
      return s;
    }
  }
  return options;
}

}  // namespace chunkd::index
