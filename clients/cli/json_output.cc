#include "clients/cli/json_output.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace chunkd::cli {
namespace {

// The length of the UTF-8 sequence at the start of `text`, 0 when it is not
// one (a stray continuation byte, a truncated or overlong sequence, a
// surrogate or a code point past U+10FFFF).
size_t Utf8SequenceLength(absl::string_view text) {
  const auto byte = [&text](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t code = 0;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < smallest[length] || code > 0x10FFFF ||
      (code >= 0xD800 && code <= 0xDFFF)) {
    return 0;
  }
  return length;
}

// A ParamRange as {"min":..,"max":..,"default":..}.
std::string RangeJson(const chunkd::v1::ParamRange& range) {
  return absl::StrCat("{\"min\":", range.min(), ",\"max\":", range.max(),
                      ",\"default\":", range.default_value(), "}");
}

// A range the algorithm may not take: null when it does not (max 0).
std::string OptionalRangeJson(const chunkd::v1::ParamRange& range) {
  return range.max() == 0 ? "null" : RangeJson(range);
}

std::string AlgorithmJson(const chunkd::v1::AlgorithmInfo& a) {
  return absl::StrCat(
      "{\"name\":", JsonString(AlgorithmInfoName(a)),
      ",\"backend\":", JsonString(a.backend()),
      ",\"backend_threads\":", a.backend_threads(),
      ",\"min_size\":", RangeJson(a.min_size()),
      ",\"avg_size\":", RangeJson(a.avg_size()),
      ",\"max_size\":", RangeJson(a.max_size()), ",\"avg_size_power_of_two\":",
      a.avg_size_power_of_two() ? "true" : "false",
      ",\"normalization_level\":", OptionalRangeJson(a.normalization_level()),
      ",\"horizon_size\":", OptionalRangeJson(a.horizon_size()),
      ",\"polynomial\":", OptionalRangeJson(a.polynomial()), "}");
}

}  // namespace

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  while (!text.empty()) {
    const unsigned char c = static_cast<unsigned char>(text[0]);
    size_t length = 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else if ((length = Utf8SequenceLength(text)) == 0) {
          out += "\\ufffd";
          length = 1;
        } else {
          out.append(text.data(), length);
        }
    }
    text.remove_prefix(length);
  }
  return out + "\"";
}

std::string JsonNumber(double value) {
  std::string text = absl::StrFormat("%.6f", value);
  // "2.000000" is 2.0, "1.500000" is 1.5: a number, as short as it goes.
  while (text.back() == '0' && text[text.size() - 2] != '.') text.pop_back();
  // "-0.0" from a tiny negative value is 0.
  if (text == "-0.0") text = "0.0";
  return text;
}

std::string JsonRatio(uint64_t bytes, uint64_t unique_bytes) {
  if (unique_bytes == 0) return "null";
  return JsonNumber(static_cast<double>(bytes) /
                    static_cast<double>(unique_bytes));
}

std::string DedupJsonLine(const std::optional<std::string>& file,
                          const DedupTotals& totals,
                          const DedupTotals& running) {
  return absl::StrCat(
      file.has_value() ? absl::StrCat("{\"file\":", JsonString(*file))
                       : std::string("{\"total\":true"),
      ",\"bytes\":", totals.bytes, ",\"unique_bytes\":", totals.unique_bytes,
      ",\"chunks\":", totals.chunks,
      ",\"unique_chunks\":", totals.unique_chunks,
      ",\"ratio\":", JsonRatio(running.bytes, running.unique_bytes),
      ",\"hints_tried\":", totals.hints_tried,
      ",\"hints_accepted\":", totals.hints_accepted,
      ",\"hints_rejected\":", totals.hints_rejected,
      ",\"hint_skipped_bytes\":", totals.hint_skipped_bytes, "}");
}

std::string ServerInfoJson(const chunkd::v1::GetServerInfoResponse& info) {
  std::vector<std::string> fingerprints;
  for (int value : info.fingerprints()) {
    fingerprints.push_back(JsonString(FingerprintName(value)));
  }
  std::vector<std::string> algorithms;
  for (const chunkd::v1::AlgorithmInfo& algorithm : info.algorithms()) {
    algorithms.push_back(AlgorithmJson(algorithm));
  }
  return absl::StrCat(
      "{\n  \"version\": ", JsonString(info.version()),
      ",\n  \"chunking_backend\": ", JsonString(info.chunking_backend()),
      ",\n  \"index_backend\": ", JsonString(info.index_backend()),
      ",\n  \"max_message_bytes\": ", info.max_message_bytes(),
      ",\n  \"max_inflight_bytes\": ", info.max_inflight_bytes(),
      ",\n  \"fingerprints\": [", absl::StrJoin(fingerprints, ", "), "]",
      ",\n  \"algorithms\": [",
      algorithms.empty()
          ? std::string()
          : absl::StrCat("\n    ", absl::StrJoin(algorithms, ",\n    "),
                         "\n  "),
      "]\n}\n");
}

}  // namespace chunkd::cli
