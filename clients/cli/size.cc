#include "clients/cli/size.h"

#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "clients/cli/common_flags.h"
#include "clients/cli/progress.h"
#include "service/memory_plan.h"

namespace chunkd::cli {
namespace {

// A Redis Cluster has at least this many masters.
constexpr uint64_t kMinClusterMasters = 3;

constexpr absl::string_view kSizeForms =
    "expected a size such as 500TB, 1.5PB or 64KiB: a number (decimals "
    "allowed) and B, KB, MB, GB, TB, PB (powers of 1000) or KiB, MiB, GiB, "
    "TiB, PiB (powers of 1024)";

struct Unit {
  absl::string_view name;
  uint64_t bytes;
};
constexpr Unit kUnits[] = {
    {"B", 1},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
    {"PB", 1'000'000'000'000'000},
    {"KiB", uint64_t{1} << 10},
    {"MiB", uint64_t{1} << 20},
    {"GiB", uint64_t{1} << 30},
    {"TiB", uint64_t{1} << 40},
    {"PiB", uint64_t{1} << 50},
};

// Most digits a size's number may have (10^19 fits in 64 bits).
constexpr int kMaxSizeDigits = 19;

absl::Status BadSize(absl::string_view text, absl::string_view why = "") {
  return absl::InvalidArgumentError(absl::StrCat(
      why.empty() ? "" : absl::StrCat(why, "; "), kSizeForms, ", got \"",
      text, "\""));
}

std::optional<uint64_t> UnitBytes(absl::string_view name) {
  if (name.empty()) return 1;
  for (const Unit& unit : kUnits) {
    if (absl::EqualsIgnoreCase(name, unit.name)) return unit.bytes;
  }
  return std::nullopt;
}

// 1234567 -> "1,234,567".
std::string Grouped(uint64_t n) {
  std::string digits = absl::StrCat(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

// "49", "37.2".
std::string Figure(double bytes) { return absl::StrFormat("%g", bytes); }

std::string HumanBytes(double bytes) { return Progress::HumanBytes(bytes); }

// What one index costs for the configuration's entries.
struct IndexEstimate {
  SizedIndex index = SizedIndex::kMemory;
  EntryCost cost;
  double per_entry = 0;  // the figure used: cost.bytes or cost.bytes_hints
  double total = 0;      // memory, or disk for rocksdb
  // redis and redis-cluster: entries one server holds, servers (masters)
  // needed, and the bucket bits.
  uint64_t entries_per_server = 0;
  uint64_t servers = 0;
  int bucket_bits = 0;
};

IndexEstimate Estimate(const SizeConfig& config, SizedIndex index,
                       uint64_t entries) {
  IndexEstimate e;
  e.index = index;
  e.cost = EntryCostFor(index, entries);
  e.per_entry = config.hints ? e.cost.bytes_hints : e.cost.bytes;
  e.total = static_cast<double>(entries) * e.per_entry;
  if (index == SizedIndex::kRedis || index == SizedIndex::kRedisCluster) {
    e.entries_per_server = static_cast<uint64_t>(std::floor(
        static_cast<double>(config.redis_master_memory) * kRedisDataShare /
        e.per_entry));
    e.servers = RedisServersFor(e.total, config.redis_master_memory);
    if (index == SizedIndex::kRedisCluster && e.servers < kMinClusterMasters) {
      e.servers = kMinClusterMasters;
    }
    e.bucket_bits = RedisBucketBits(entries);
  }
  return e;
}

// An index's first line: its name and the figure used.
std::string Heading(const IndexEstimate& e, absl::string_view what) {
  const uint64_t at = e.cost.measured_at;
  return absl::StrFormat(
      "%-14s %s bytes an entry %s (measured at %s entries)\n",
      SizedIndexName(e.index), Figure(e.per_entry), what,
      at % 1'000'000 == 0 ? absl::StrCat(at / 1'000'000, "M") : Grouped(at));
}

// Entries a bucket holds on average at `bucket_bits`.
double EntriesPerBucket(uint64_t entries, int bucket_bits) {
  return static_cast<double>(entries) / std::ldexp(1.0, bucket_bits);
}

std::string BucketLines(const IndexEstimate& e, uint64_t entries) {
  const double per_bucket = EntriesPerBucket(entries, e.bucket_bits);
  std::string out = absl::StrFormat(
      "  url          ?bucket_bits=%d (%.0f entries a bucket on average, in\n"
      "               one namespace of every entry)\n",
      e.bucket_bits, per_bucket);
  if (per_bucket > static_cast<double>(kRedisBucketEntries)) {
    absl::StrAppend(&out, "               more than ", kRedisBucketEntries,
                    " even at the most buckets: spread the data over\n"
                    "               namespaces of at most ",
                    Grouped(kRedisBucketEntries << kMaxRedisBucketBits),
                    " entries\n");
  }
  return out;
}

// One index's lines of the text output.
std::string IndexText(const SizeConfig& config, const IndexEstimate& e,
                      uint64_t entries) {
  const std::string servers = absl::StrCat(
      e.servers, " of ",
      HumanBytes(static_cast<double>(config.redis_master_memory)), " (",
      Grouped(e.entries_per_server), " entries each)");
  switch (e.index) {
    case SizedIndex::kMemory:
      return absl::StrCat(
          Heading(e, "resident"), "  memory       ", HumanBytes(e.total),
          e.total > static_cast<double>(kOneMachineMemory)
              ? ": more than 1 TiB, past one machine;\n"
                "               use redis-cluster\n"
              : ": fits one machine\n",
          "  chunkd       --index_max_entries ", entries,
          " or more; its memory bound\n               counts ",
          service::kIndexEntryBytes, " bytes an entry (",
          HumanBytes(static_cast<double>(entries) *
                     static_cast<double>(service::kIndexEntryBytes)),
          ")\n  restart      loses every entry: for tests and throwaway "
          "runs\n");
    case SizedIndex::kRocksDb:
      return absl::StrCat(
          Heading(e, "on disk"), "  disk         ", HumanBytes(e.total),
          "\n",
          "  memory       the block cache (--index_cache_mib, 256 MiB without "
          "a\n               memory limit) and a few dozen MiB, however many "
          "entries\n",
          "  cache        ", HumanBytes(e.total / 10),
          ", a tenth of the disk, kept lookups at about 0.9x\n"
          "               the rate of a cache that holds it all\n");
    case SizedIndex::kRedis:
      return absl::StrCat(
          Heading(e, "of used_memory"), "  memory       ",
          HumanBytes(e.total), "\n", "  servers      ", servers,
          e.servers > 1 ? ": use redis-cluster\n" : "\n",
          BucketLines(e, entries));
    case SizedIndex::kRedisCluster:
      return absl::StrCat(
          Heading(e, "of used_memory"), "  memory       ",
          HumanBytes(e.total), "\n", "  masters      ", servers, ", and ",
          e.servers, " more\n               for each replica of every master\n",
          BucketLines(e, entries));
  }
  return "";
}

std::string SizeText(const SizeConfig& config, uint64_t entries,
                     const std::vector<IndexEstimate>& estimates) {
  std::string out = absl::StrCat(
      "unique data    ", Grouped(config.data_bytes), " bytes (",
      HumanBytes(static_cast<double>(config.data_bytes)), ")\n",
      "average chunk  ", Grouped(config.avg_bytes), " bytes (",
      HumanBytes(static_cast<double>(config.avg_bytes)), ")\n",
      "entries        ", Grouped(entries),
      ", one per unique chunk (data / average chunk,\n"
      "               rounded up; duplicate data adds no entries)\n",
      "hints          ",
      config.hints ? "next-size hints and their runs on every entry"
                   : "none (--hints: next-size hints and their runs)",
      "\n\n");
  bool redis = false;
  for (const IndexEstimate& e : estimates) {
    absl::StrAppend(&out, IndexText(config, e, entries));
    redis = redis || e.servers > 0;
  }
  if (redis) {
    absl::StrAppend(&out, "\nRedis servers are counted ",
                    kRedisDataShare * 100,
                    " % full: the rest of their RAM is left for\n"
                    "fragmentation, replication buffers and the fork that "
                    "persists them.\n");
  }
  return out;
}

std::string IndexJson(const IndexEstimate& e, uint64_t entries) {
  std::string out = absl::StrFormat(
      "{\"index\":\"%s\",\"bytes_per_entry\":%s,\"measured_at_entries\":%d,",
      SizedIndexName(e.index), Figure(e.per_entry), e.cost.measured_at);
  switch (e.index) {
    case SizedIndex::kMemory:
      absl::StrAppendFormat(
          &out, "\"memory_bytes\":%.0f,\"fits_one_machine\":%s}",
          e.total,
          e.total > static_cast<double>(kOneMachineMemory) ? "false" : "true");
      break;
    case SizedIndex::kRocksDb:
      absl::StrAppendFormat(&out, "\"disk_bytes\":%.0f}", e.total);
      break;
    case SizedIndex::kRedis:
    case SizedIndex::kRedisCluster:
      absl::StrAppendFormat(
          &out,
          "\"memory_bytes\":%.0f,\"entries_per_server\":%d,\"%s\":%d,"
          "\"bucket_bits\":%d,\"entries_per_bucket\":%.1f}",
          e.total, e.entries_per_server,
          e.index == SizedIndex::kRedis ? "servers" : "masters", e.servers,
          e.bucket_bits, EntriesPerBucket(entries, e.bucket_bits));
      break;
  }
  return out;
}

std::string SizeJson(const SizeConfig& config, uint64_t entries,
                     const std::vector<IndexEstimate>& estimates) {
  std::string out = absl::StrFormat(
      "{\"data_bytes\":%d,\"avg_bytes\":%d,\"entries\":%d,\"hints\":%s,"
      "\"redis_master_memory_bytes\":%d,\"redis_data_share\":%g,"
      "\"indexes\":[",
      config.data_bytes, config.avg_bytes, entries,
      config.hints ? "true" : "false", config.redis_master_memory,
      kRedisDataShare);
  for (size_t i = 0; i < estimates.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? "," : "",
                    IndexJson(estimates[i], entries));
  }
  return out + "]}\n";
}

absl::StatusOr<std::vector<SizedIndex>> ParseSizedIndexes(
    absl::string_view name) {
  const std::vector<SizedIndex> all = {
      SizedIndex::kMemory, SizedIndex::kRocksDb, SizedIndex::kRedis,
      SizedIndex::kRedisCluster};
  if (name == "all") return all;
  for (SizedIndex index : all) {
    if (name == SizedIndexName(index)) return std::vector<SizedIndex>{index};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "expected memory, rocksdb, redis, redis-cluster or all, got \"", name,
      "\""));
}

}  // namespace

absl::string_view SizedIndexName(SizedIndex index) {
  switch (index) {
    case SizedIndex::kMemory:
      return "memory";
    case SizedIndex::kRocksDb:
      return "rocksdb";
    case SizedIndex::kRedis:
      return "redis";
    case SizedIndex::kRedisCluster:
      return "redis-cluster";
  }
  return "";
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  uint64_t mantissa = 0;
  int digits = 0;
  int decimals = -1;  // digits after the point; -1: no point
  for (; !rest.empty(); rest.remove_prefix(1)) {
    const char c = rest.front();
    if (c == '.' && decimals < 0) {
      decimals = 0;
      continue;
    }
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) break;
    if (++digits > kMaxSizeDigits) return BadSize(text, "too many digits");
    mantissa = mantissa * 10 + static_cast<uint64_t>(c - '0');
    if (decimals >= 0) ++decimals;
  }
  const std::optional<uint64_t> unit =
      UnitBytes(absl::StripAsciiWhitespace(rest));
  if (digits == 0 || !unit.has_value()) return BadSize(text);
  absl::uint128 scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  const absl::uint128 bytes =
      (absl::uint128(mantissa) * *unit + scale / 2) / scale;
  if (bytes == 0) return BadSize(text, "0 bytes");
  if (bytes > kMaxSizeBytes) return BadSize(text, "more than 10000PB");
  return absl::Uint128Low64(bytes);
}

std::vector<FlagSpec> SizeFlagSpecs() {
  return {{"data"},   {"avg"},         {"index"}, {"hints", false},
          {"redis-master-memory"}, {"format"}, {"json", false},
          {"help", false}};
}

absl::StatusOr<SizeConfig> SizeConfigFromArgs(const ParsedArgs& args) {
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", args.positional()[0], "\""));
  }
  SizeConfig config;
  if (!args.Has("data")) {
    return absl::InvalidArgumentError(
        "missing --data SIZE, the unique data to index (e.g. --data 500TB)");
  }
  config.indexes = *ParseSizedIndexes("all");
  for (absl::Status s : {
           ParseFlag(args, "data", &ParseByteSize, &config.data_bytes),
           ParseFlag(args, "avg", &ParseByteSize, &config.avg_bytes),
           ParseFlag(args, "redis-master-memory", &ParseByteSize,
                     &config.redis_master_memory),
           ParseFlag(args, "index", &ParseSizedIndexes, &config.indexes),
       }) {
    if (!s.ok()) return s;
  }
  config.hints = args.Has("hints");
  absl::StatusOr<OutputFormat> format = OutputFormatFromArgs(args);
  if (!format.ok()) return format.status();
  config.format = *format;
  return config;
}

uint64_t SizeEntries(uint64_t data_bytes, uint64_t avg_bytes) {
  return data_bytes / avg_bytes + (data_bytes % avg_bytes != 0 ? 1 : 0);
}

EntryCost EntryCostFor(SizedIndex index, uint64_t entries) {
  // redis-cluster uses the redis figures.
  switch (index) {
    case SizedIndex::kMemory:
      return index::EntryCostFor(index::CostedIndex::kMemory, entries);
    case SizedIndex::kRocksDb:
      return index::EntryCostFor(index::CostedIndex::kRocksDb, entries);
    case SizedIndex::kRedis:
    case SizedIndex::kRedisCluster:
      return index::EntryCostFor(index::CostedIndex::kRedis, entries);
  }
  return EntryCost{};
}

int RedisBucketBits(uint64_t entries) {
  // The fewest buckets, a power of two from 2^16 to 2^32, that hold the
  // entries at 256 a bucket on average (all 2^32 when they cannot).
  const uint64_t buckets = entries / kRedisBucketEntries +
                           (entries % kRedisBucketEntries != 0 ? 1 : 0);
  int bits = kMinRedisBucketBits;
  while (bits < kMaxRedisBucketBits && (uint64_t{1} << bits) < buckets) {
    ++bits;
  }
  return bits;
}

uint64_t RedisServersFor(double bytes, uint64_t server_memory) {
  const double servers = std::ceil(
      bytes / (static_cast<double>(server_memory) * kRedisDataShare));
  return servers < 1 ? 1 : static_cast<uint64_t>(servers);
}

std::string FormatSizeEstimate(const SizeConfig& config) {
  const uint64_t entries = SizeEntries(config.data_bytes, config.avg_bytes);
  std::vector<IndexEstimate> estimates;
  for (SizedIndex index : config.indexes) {
    estimates.push_back(Estimate(config, index, entries));
  }
  return config.format == OutputFormat::kJson
             ? SizeJson(config, entries, estimates)
             : SizeText(config, entries, estimates);
}

}  // namespace chunkd::cli
