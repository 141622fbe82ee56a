#include "clients/cli/estimate_output.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chunkd/tables.h"
#include "clients/cli/json_output.h"
#include "clients/cli/remote.h"

namespace chunkd::cli {
namespace {

using Table = std::vector<std::vector<std::string>>;

// `rows` with each column padded to its widest cell, the first left-aligned
// and the others right-aligned, two spaces apart, no trailing space.
std::string FormatTable(const Table& rows) {
  std::vector<size_t> widths;
  for (const std::vector<std::string>& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const std::vector<std::string>& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(widths[i] - row[i].size(), ' ');
      if (i > 0) line += "  ";
      absl::StrAppend(&line, i == 0 ? row[i] + pad : pad + row[i]);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

// The bytes of the index backend `backend` ("-" when the result has none).
std::string IndexBytes(const estimate::SetResult& set,
                       absl::string_view backend) {
  for (const estimate::IndexCostEstimate& cost : set.index_costs) {
    if (cost.backend == backend) return absl::StrCat(cost.bytes);
  }
  return "-";
}

std::string SizesTable(const EstimateReport& report) {
  Table rows = {{"set", "bytes", "chunks", "unique_chunks", "unique_bytes",
                 "dedup_ratio", "ratio_interval", "mean_size", "p50", "p90",
                 "p99"}};
  if (report.with_namespace) rows[0].push_back("namespace_bytes");
  for (const EstimateSetReport& set : report.sets) {
    const estimate::SetResult& r = set.result;
    std::vector<std::string> row = {
        r.label,
        absl::StrCat(r.bytes),
        absl::StrCat(r.chunks),
        absl::StrCat(r.unique_chunks),
        absl::StrCat(r.unique_bytes),
        absl::StrFormat("%.3f", r.dedup_ratio),
        r.has_interval
            ? absl::StrFormat("%.3f-%.3f", r.ratio_low, r.ratio_high)
            : "-",
        absl::StrFormat("%.0f", r.mean_chunk_size),
        absl::StrCat(r.p50_chunk_size),
        absl::StrCat(r.p90_chunk_size),
        absl::StrCat(r.p99_chunk_size)};
    if (report.with_namespace) {
      row.push_back(set.namespace_bytes.has_value()
                        ? absl::StrCat(*set.namespace_bytes)
                        : "-");
    }
    rows.push_back(std::move(row));
  }
  return FormatTable(rows);
}

std::string IndexTable(const EstimateReport& report) {
  Table rows = {{"set", "index_entries", "memory_bytes", "rocksdb_disk_bytes",
                 "redis_memory_bytes"}};
  for (const EstimateSetReport& set : report.sets) {
    const estimate::SetResult& r = set.result;
    rows.push_back({r.label, absl::StrCat(r.unique_chunks),
                    IndexBytes(r, "memory"), IndexBytes(r, "rocksdb"),
                    IndexBytes(r, "redis")});
  }
  return FormatTable(rows);
}

// "name": value pairs, as Python's json.dumps spaces them.
std::string Pair(absl::string_view key, absl::string_view value) {
  return absl::StrCat(JsonString(key), ": ", value);
}

std::string Object(const std::vector<std::string>& pairs) {
  return absl::StrCat("{", absl::StrJoin(pairs, ", "), "}");
}

std::string List(const std::vector<std::string>& items) {
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::string OptionalCount(const std::optional<uint64_t>& value) {
  return value.has_value() ? absl::StrCat(*value) : "null";
}

std::string ParametersJson(const chunking::ChunkerOptions& options) {
  std::vector<std::string> pairs;
  for (absl::string_view name : chunking::ParametersOf(options.algorithm)) {
    const bool decreasing = options.seq_mode == chunking::SeqMode::kDecreasing;
    pairs.push_back(Pair(
        name, name == "seq_mode"
                  ? JsonString(decreasing ? "decreasing" : "increasing")
                  : absl::StrCat(ParameterValue(options, name))));
  }
  return Object(pairs);
}

// [[lower_bound, chunks or bytes], ...].
std::string HistogramJson(const std::vector<estimate::SizeBucket>& histogram,
                          bool bytes) {
  std::vector<std::string> buckets;
  for (const estimate::SizeBucket& b : histogram) {
    buckets.push_back(absl::StrCat("[", b.lower_bound, ", ",
                                   bytes ? b.bytes : b.chunks, "]"));
  }
  return List(buckets);
}

std::string IndexJson(const std::vector<estimate::IndexCostEstimate>& costs) {
  std::vector<std::string> items;
  for (const estimate::IndexCostEstimate& cost : costs) {
    items.push_back(Object({Pair("backend", JsonString(cost.backend)),
                            Pair("medium", JsonString(cost.medium)),
                            Pair("entries", absl::StrCat(cost.entries)),
                            Pair("bytes", absl::StrCat(cost.bytes))}));
  }
  return List(items);
}

std::string SetJson(const EstimateSetReport& set) {
  const estimate::SetResult& r = set.result;
  return Object({
      Pair("set", JsonString(r.label)),
      Pair("algorithm",
           JsonString(chunking::AlgorithmName(r.options.algorithm))),
      Pair("parameters", ParametersJson(r.options)),
      Pair("bytes", absl::StrCat(r.bytes)),
      Pair("chunks", absl::StrCat(r.chunks)),
      Pair("unique_bytes", absl::StrCat(r.unique_bytes)),
      Pair("unique_chunks", absl::StrCat(r.unique_chunks)),
      Pair("dedup_ratio", JsonNumber(r.dedup_ratio)),
      Pair("ratio_interval",
           r.has_interval ? List({JsonNumber(r.ratio_low),
                                  JsonNumber(r.ratio_high)})
                          : "null"),
      Pair("sampled", r.sampled ? "true" : "false"),
      Pair("sampled_unique_chunks", absl::StrCat(r.sampled_unique_chunks)),
      Pair("histogram", HistogramJson(r.histogram, false)),
      Pair("histogram_bytes", HistogramJson(r.histogram, true)),
      Pair("mean_chunk_size", JsonNumber(r.mean_chunk_size)),
      Pair("chunk_sizes",
           Object({Pair("min", absl::StrCat(r.min_chunk_size)),
                   Pair("p50", absl::StrCat(r.p50_chunk_size)),
                   Pair("p90", absl::StrCat(r.p90_chunk_size)),
                   Pair("p99", absl::StrCat(r.p99_chunk_size)),
                   Pair("max", absl::StrCat(r.max_chunk_size))})),
      Pair("namespace_bytes", OptionalCount(set.namespace_bytes)),
      Pair("namespace_chunks", OptionalCount(set.namespace_chunks)),
      Pair("index", IndexJson(r.index_costs)),
  });
}

absl::Status BadResult(absl::string_view what) {
  return ClientFound(absl::InternalError(
      absl::StrCat("protocol error: the estimate's result ", what)));
}

// One SetEstimate as the Estimator's SetResult.
absl::StatusOr<EstimateSetReport> SetFromProto(
    const chunkd::v1::SetEstimate& s) {
  EstimateSetReport set;
  estimate::SetResult& r = set.result;
  absl::StatusOr<chunking::ChunkerOptions> options =
      OptionsFromProto(s.chunking());
  if (!options.ok()) return options.status();
  r.label = s.label();
  r.options = *options;
  r.bytes = s.bytes();
  r.chunks = s.chunks();
  r.unique_chunks = s.unique_chunks();
  r.unique_bytes = s.unique_bytes();
  r.dedup_ratio = s.dedup_ratio();
  for (const chunkd::v1::SizeBucket& b : s.histogram()) {
    r.histogram.push_back({b.lower_bound(), b.chunks(), b.bytes()});
  }
  r.mean_chunk_size = s.mean_chunk_size();
  r.min_chunk_size = s.min_chunk_size();
  r.p50_chunk_size = s.p50_chunk_size();
  r.p90_chunk_size = s.p90_chunk_size();
  r.p99_chunk_size = s.p99_chunk_size();
  r.max_chunk_size = s.max_chunk_size();
  r.sampled = s.sampled();
  r.sampled_unique_chunks = s.sampled_unique_chunks();
  // The proto has no flag for it: an interval is there when its ends are.
  r.has_interval = s.ratio_low() != 0 || s.ratio_high() != 0;
  r.ratio_low = s.ratio_low();
  r.ratio_high = s.ratio_high();
  for (const chunkd::v1::IndexCost& cost : s.index_costs()) {
    r.index_costs.push_back(
        {cost.backend(), cost.medium(), cost.entries(), cost.bytes()});
  }
  if (s.has_namespace_bytes()) set.namespace_bytes = s.namespace_bytes();
  if (s.has_namespace_chunks()) set.namespace_chunks = s.namespace_chunks();
  return set;
}

}  // namespace

absl::StatusOr<chunking::ChunkerOptions> OptionsFromProto(
    const chunkd::v1::ChunkingParams& p) {
  // The API numbers the algorithms as the library does (the table).
  chunking::Algorithm algorithm = chunking::Algorithm::kFastCdc;
  if (p.algorithm() != chunkd::v1::ALGORITHM_UNSPECIFIED) {
    algorithm = static_cast<chunking::Algorithm>(p.algorithm());
  }
  if (chunking::AlgorithmName(algorithm) == "unknown") {
    return BadResult(absl::StrCat("names algorithm ",
                                  static_cast<int>(p.algorithm()),
                                  ", which this chunkctl does not know"));
  }
  chunking::ChunkerOptions o = chunking::DefaultOptions(algorithm);
  o.algorithm = algorithm;
  if (p.has_min_size()) o.min_size = p.min_size();
  if (p.has_avg_size()) o.avg_size = p.avg_size();
  if (p.has_max_size()) o.max_size = p.max_size();
  if (p.has_normalization_level()) {
    o.normalization_level = p.normalization_level();
  }
  if (p.seed() != 0) o.seed = p.seed();
  if (p.seq_mode() == chunkd::v1::SEQ_CDC_MODE_DECREASING) {
    o.seq_mode = chunking::SeqMode::kDecreasing;
  }
  if (p.has_seq_length()) o.seq_length = p.seq_length();
  if (p.has_skip_trigger()) o.skip_trigger = p.skip_trigger();
  if (p.has_skip_size()) o.skip_size = p.skip_size();
  if (p.has_horizon_size()) o.horizon_size = p.horizon_size();
  if (p.has_polynomial()) o.polynomial = p.polynomial();
  return o;
}

uint64_t ParameterValue(const chunking::ChunkerOptions& o,
                        absl::string_view parameter) {
  const std::pair<absl::string_view, uint64_t> values[] = {
      {"min_size", o.min_size},
      {"avg_size", o.avg_size},
      {"max_size", o.max_size},
      {"normalization_level", o.normalization_level},
      {"seed", o.seed},
      {"seq_mode", static_cast<uint64_t>(o.seq_mode)},
      {"seq_length", o.seq_length},
      {"skip_trigger", o.skip_trigger},
      {"skip_size", o.skip_size},
      {"horizon_size", o.horizon_size},
      {"polynomial", o.polynomial}};
  for (const auto& [name, value] : values) {
    if (name == parameter) return value;
  }
  return 0;
}

absl::StatusOr<EstimateReport> ReportFromProto(
    const chunkd::v1::EstimateResult& result, bool with_namespace) {
  EstimateReport report;
  for (const chunkd::v1::SetEstimate& s : result.sets()) {
    absl::StatusOr<EstimateSetReport> set = SetFromProto(s);
    if (!set.ok()) return set.status();
    report.sets.push_back(*std::move(set));
  }
  report.total_bytes = result.total_bytes();
  report.files = result.files();
  report.sample_rate = std::max<uint32_t>(result.sample_rate(), 1);
  switch (result.fingerprint()) {
    case chunkd::v1::FINGERPRINT_ALGORITHM_XXH128:
      report.fingerprint = fingerprint::Kind::kXxh128;
      break;
    case chunkd::v1::FINGERPRINT_ALGORITHM_SHA256:
      report.fingerprint = fingerprint::Kind::kSha256;
      break;
    default:
      return BadResult(absl::StrCat("names fingerprint ",
                                    FingerprintName(result.fingerprint())));
  }
  report.with_namespace = with_namespace;
  return report;
}

std::string EstimateText(const EstimateReport& report) {
  return absl::StrCat(
      SizesTable(report), "\n", IndexTable(report), "\n",
      absl::StrFormat("%d bytes in %d files; sample 1 in %d; fingerprint %s\n",
                      report.total_bytes, report.files, report.sample_rate,
                      fingerprint::KindName(report.fingerprint)));
}

std::string EstimateJson(const EstimateReport& report) {
  std::vector<std::string> sets;
  for (const EstimateSetReport& set : report.sets) {
    sets.push_back(SetJson(set));
  }
  return Object({Pair("sets", List(sets)),
                 Pair("total_bytes", absl::StrCat(report.total_bytes)),
                 Pair("files", absl::StrCat(report.files)),
                 Pair("sample_rate", absl::StrCat(report.sample_rate)),
                 Pair("fingerprint",
                      JsonString(fingerprint::KindName(report.fingerprint)))}) +
         "\n";
}

}  // namespace chunkd::cli
