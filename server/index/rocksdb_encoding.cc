#include "index/rocksdb_encoding.h"

#include <algorithm>

namespace chunkd::index::rocksdb_format {
namespace {

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(absl::string_view* in, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && !in->empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

bool GetSizes(absl::string_view* in, size_t most, std::vector<uint32_t>* out) {
  uint64_t n = 0;
  if (!GetVarint(in, &n) || n > most) return false;
  out->resize(n);
  for (uint32_t& size : *out) {
    uint64_t v = 0;
    if (!GetVarint(in, &v) || v > UINT32_MAX) return false;
    size = static_cast<uint32_t>(v);
  }
  return true;
}

void PutSizes(std::string* out, const std::vector<uint32_t>& sizes) {
  PutVarint(out, sizes.size());
  for (uint32_t size : sizes) PutVarint(out, size);
}

void PutShortString(std::string* out, absl::string_view s) {
  out->push_back(static_cast<char>(s.size()));
  out->append(s.data(), s.size());
}

}  // namespace

std::string EntryKey(absl::string_view ns, absl::string_view fingerprint) {
  std::string key;
  key.reserve(1 + ns.size() + fingerprint.size());
  PutShortString(&key, ns);
  key.append(fingerprint.data(), fingerprint.size());
  return key;
}

std::string EncodeEntry(const EntryValue& entry) {
  std::string out;
  PutVarint(&out, entry.refs);
  PutVarint(&out, entry.size);
  PutVarint(&out, entry.hints.size());
  for (const HintList& list : entry.hints) {
    PutVarint(&out, list.params_key.size());
    out += list.params_key;
    PutSizes(&out, list.hints.sizes);
    PutSizes(&out, list.hints.run);
  }
  return out;
}

bool DecodeEntry(absl::string_view bytes, EntryValue* entry) {
  uint64_t size = 0;
  uint64_t lists = 0;
  if (!GetVarint(&bytes, &entry->refs) || !GetVarint(&bytes, &size) ||
      size > UINT32_MAX || !GetVarint(&bytes, &lists) ||
      lists > bytes.size()) {
    return false;
  }
  entry->size = static_cast<uint32_t>(size);
  entry->hints.resize(lists);
  for (HintList& list : entry->hints) {
    uint64_t length = 0;
    if (!GetVarint(&bytes, &length) || length > bytes.size()) return false;
    list.params_key = std::string(bytes.substr(0, length));
    bytes.remove_prefix(length);
    if (!GetSizes(&bytes, kMaxNextSizesLength, &list.hints.sizes) ||
        !GetSizes(&bytes, kHintRunLength, &list.hints.run)) {
      return false;
    }
  }
  return bytes.empty();
}

bool AddHint(EntryValue* entry, absl::string_view params_key,
             const NextSize& hint, size_t max_sizes) {
  auto list = std::find_if(
      entry->hints.begin(), entry->hints.end(),
      [&](const HintList& l) { return l.params_key == params_key; });
  if (list == entry->hints.end()) {
    entry->hints.push_back({std::string(params_key), {}});
    list = entry->hints.end() - 1;
  }
  const NextHints before = list->hints;
  std::vector<uint32_t>& sizes = list->hints.sizes;
  auto at = std::find(sizes.begin(), sizes.end(), hint.next_size);
  if (at != sizes.end()) sizes.erase(at);
  sizes.insert(sizes.begin(), hint.next_size);
  if (sizes.size() > max_sizes) sizes.resize(max_sizes);
  list->hints.run.assign(
      hint.run.begin(),
      hint.run.begin() + static_cast<std::ptrdiff_t>(
                             std::min(hint.run.size(), kHintRunLength)));
  return list->hints.sizes != before.sizes || list->hints.run != before.run;
}

std::string TokenPrefix(absl::string_view ns, absl::string_view stream_id,
                        char op) {
  std::string prefix;
  PutShortString(&prefix, ns);
  PutShortString(&prefix, stream_id);
  prefix.push_back(op);
  return prefix;
}

std::string TokenKey(absl::string_view prefix, uint64_t position) {
  std::string key(prefix);
  for (int shift = 56; shift >= 0; shift -= 8) {
    key.push_back(static_cast<char>((position >> shift) & 0xff));
  }
  return key;
}

std::string EncodeTokenValue(absl::Time written,
                             const std::vector<uint64_t>& results) {
  std::string out =
      EncodeFixed64(static_cast<uint64_t>(absl::ToUnixMicros(written)));
  PutVarint(&out, results.size());
  for (uint64_t r : results) PutVarint(&out, r);
  return out;
}

bool TokenExpired(absl::string_view value, absl::Time now, absl::Duration ttl) {
  if (value.size() < 8) return true;
  const absl::Time written =
      absl::FromUnixMicros(static_cast<int64_t>(DecodeFixed64(value)));
  return now - written > ttl;
}

bool DecodeTokenRecord(absl::string_view key, absl::string_view value,
                       size_t prefix_length, TokenRecord* record) {
  if (key.size() != prefix_length + 8 || value.size() < 8) return false;
  record->first = 0;
  for (size_t i = prefix_length; i < key.size(); ++i) {
    record->first = (record->first << 8) | static_cast<unsigned char>(key[i]);
  }
  value.remove_prefix(8);
  uint64_t n = 0;
  if (!GetVarint(&value, &n) || n > value.size()) return false;
  record->results.resize(n);
  for (uint64_t& r : record->results) {
    if (!GetVarint(&value, &r)) return false;
  }
  return value.empty();
}

std::string EncodeFixed64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) {
    out[static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
  return out;
}

uint64_t DecodeFixed64(absl::string_view bytes) {
  if (bytes.size() < 8) return 0;
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  }
  return value;
}

}  // namespace chunkd::index::rocksdb_format
