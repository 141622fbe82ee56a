#include "index/redis_layout.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chunkd::index {

BucketLayout::BucketLayout(int bits)
    : bits_(bits),
      bucket_bytes_((static_cast<size_t>(bits) + 7) / 8),
      field_offset_(static_cast<size_t>(bits) / 8) {}

std::string BucketLayout::KeyPrefix(absl::string_view ns) const {
  return absl::StrCat("chunkd-b", bits_, ":", ns, ":");
}

std::string BucketLayout::BucketKey(absl::string_view ns,
                                    absl::string_view fp) const {
  std::string key = KeyPrefix(ns);
  if (short_fingerprint(fp)) return key;
  const size_t start = key.size();
  key.append(fp.data(), bucket_bytes_);
  const int spare = static_cast<int>(bucket_bytes_ * 8) - bits_;
  if (spare > 0) {
    key[start + bucket_bytes_ - 1] = static_cast<char>(
        static_cast<unsigned char>(key[start + bucket_bytes_ - 1]) &
        (0xff << spare));
  }
  return key;
}

std::string BucketLayout::Fingerprint(absl::string_view bucket,
                                      absl::string_view field) const {
  if (bucket.empty()) return std::string(field);
  return absl::StrCat(bucket.substr(0, field_offset_), field);
}

absl::Status BucketLayout::ValidFingerprint(absl::string_view fp) const {
  if (!fp.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "the redis index takes no empty fingerprint");
}

std::string HintTag(absl::string_view params_key) {
  uint32_t h = 2166136261u;
  for (char c : params_key) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  std::string tag(4, '\0');
  for (int i = 0; i < 4; ++i) tag[i] = static_cast<char>(h >> (24 - 8 * i));
  return tag;
}

void AppendUvarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

namespace {

bool ReadUvarint(absl::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const auto b = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

bool ReadSizes(absl::string_view* in, int count, std::vector<uint32_t>* out) {
  for (int i = 0; i < count; ++i) {
    uint64_t v = 0;
    if (!ReadUvarint(in, &v) || v > UINT32_MAX) return false;
    out->push_back(static_cast<uint32_t>(v));
  }
  return true;
}

std::string EncodeRecord(const HintRecord& r) {
  const size_t list = std::min<size_t>(r.sizes.size(), 15);
  const size_t run = std::min<size_t>(r.run.size(), 15);
  std::string out = r.tag;
  out.resize(4, '\0');
  out.push_back(static_cast<char>(16 * list + run));
  for (size_t i = 0; i < list; ++i) AppendUvarint(r.sizes[i], &out);
  for (size_t i = 0; i < run; ++i) AppendUvarint(r.run[i], &out);
  return out;
}

}  // namespace

bool DecodeEntryValue(absl::string_view value, EntryValue* out) {
  *out = EntryValue();
  uint64_t size = 0;
  if (!ReadUvarint(&value, &out->refs) || !ReadUvarint(&value, &size) ||
      size > UINT32_MAX) {
    return false;
  }
  out->size = static_cast<uint32_t>(size);
  while (!value.empty()) {
    if (value.size() < 5) return false;
    HintRecord r;
    r.tag = std::string(value.substr(0, 4));
    const auto count = static_cast<unsigned char>(value[4]);
    value.remove_prefix(5);
    if (!ReadSizes(&value, count >> 4, &r.sizes) ||
        !ReadSizes(&value, count & 15, &r.run)) {
      return false;
    }
    out->hints.push_back(std::move(r));
  }
  return true;
}

std::string EncodeEntryValue(const EntryValue& value) {
  std::string out;
  AppendUvarint(value.refs, &out);
  AppendUvarint(value.size, &out);
  for (const HintRecord& r : value.hints) {
    std::string record = EncodeRecord(r);
    if (out.size() + record.size() > kMaxValueBytes) break;
    out += record;
  }
  return out;
}

absl::StatusOr<LayoutRecord> ParseLayoutRecord(
    const std::vector<std::string>& fields) {
  LayoutRecord record;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& name = fields[i];
    const std::string& value = fields[i + 1];
    bool ok = true;
    if (name == "version") {
      ok = absl::SimpleAtoi(value, &record.version);
    } else if (name == "bucket_bits") {
      ok = absl::SimpleAtoi(value, &record.bucket_bits) &&
           record.bucket_bits >= kMinBucketBits &&
           record.bucket_bits <= kMaxBucketBits;
    } else if (name == "migrating") {
      record.migrating = true;
      record.migrating_from = value;
    }
    if (!ok) {
      return absl::FailedPreconditionError(
          absl::StrCat("the redis key ", kLayoutKey, " has a malformed ",
                       name, " '", absl::CHexEscape(value), "'"));
    }
  }
  return record;
}

bool ParseLegacySizes(absl::string_view text, std::vector<uint32_t>* out) {
  for (absl::string_view s : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    uint32_t v = 0;
    if (!absl::SimpleAtoi(s, &v)) return false;
    out->push_back(v);
  }
  return true;
}

std::string LegacyEntryKey(absl::string_view ns, absl::string_view fp) {
  return absl::StrCat("chunkd:", ns, ":", fp);
}

std::string LegacyHintListField(absl::string_view params_key) {
  return absl::StrCat("h:", params_key);
}

std::string LegacyHintRunField(absl::string_view params_key) {
  return absl::StrCat("r:", params_key);
}

}  // namespace chunkd::index
