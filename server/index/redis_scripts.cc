#include "index/redis_scripts.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace chunkd::index {
namespace {

// The scripts take many entry keys, so that one call amortizes the cost of
// running a script over a whole batch. In a cluster one call carries the
// keys of one slot only (mostly one key); on one server, up to
// kMaxKeysPerCall. A call is atomic as a whole.
//
// What a key costs the server decides the speed (Redis runs one command at
// a time): per entry a script makes one redis.call where it can, passes its
// arguments as strings (a Lua number argument is formatted with sprintf),
// and takes its per-entry arguments packed into one string, unpacked only
// when needed (each argument of a command costs Redis a parse and a Lua
// string).
//
// KEYS: [record] entry...    record: the idempotency record, unless
//                             ARGV[1] = '0'
//   ARGV[1] the record's form: '0' none; 's' a string of 8 bytes per
//           position (a big-endian result, zero when not recorded), this
//           call's positions contiguous from byte ARGV[3]; 'h' a hash,
//           position -> result, this call's positions in ARGV[3]
//           (comma-separated decimals, one per entry)
//   ARGV[2] record TTL in ms
//   ARGV[3] record argument ('' for none)

// Both scripts below are kEntryPrologue, then their per-entry functions
// `apply(j)` and `admit(j, pending)` with the constant `bias`, and
// kRecordedCall: the per-entry results of a call, recorded under the
// stream's positions when a record is given. A string record stores
// result + bias per position (zero means "not recorded", so a result that
// can be 0 needs bias 1); a hash record stores the result itself. Positions
// already recorded are answered from the record and not applied again.
//
// A full Redis. While used memory is over maxmemory (policy noeviction),
// Redis refuses a script's first write of a command that may grow memory
// (HINCRBY, HSET, SETRANGE) with "OOM command not allowed ...", and lets a
// script that has written anything finish (so that scripts stay atomic).
// So the first entry j a call applies goes through admit(j, pending)
// (pending(k): whether entry k > j is to be applied too, i.e. is not
// recorded), which makes that first write with redis.pcall and returns
// apply's result, or the refusal as an error table when the call must
// fail: nothing was written, the call is refused as a whole. A call that
// only counts entries that exist (duplicates; any release) is not refused:
// admit first deletes a hash field no entry has (HDEL: never refused, as it
// cannot grow memory), and the rest of the call then runs, its record
// included. A full Redis thus refuses new entries only, and grows past
// maxmemory by no more than the write-token records of the positions
// written meanwhile.
constexpr char kEntryPrologue[] = R"lua(
local call = redis.call
local mode = ARGV[1]
local m = 1
if mode == '0' then m = 0 end
local n = #KEYS - m
-- Whether a redis.pcall reply is Redis refusing a write for lack of memory.
local function oom(reply)
  return type(reply) == 'table' and reply.err ~= nil and
         string.sub(reply.err, 1, 4) == 'OOM '
end
)lua";

constexpr char kRecordedCall[] = R"lua(
local out = {}
if m == 0 then
  local first = admit(1, function() return true end)
  if type(first) == 'table' then return first end
  out[1] = first
  for j = 2, n do out[j] = apply(j) end
  return out
end
local rec = KEYS[1]
local applied = false
if mode == 's' then
  -- One unpack and one pack per call: no Lua string per entry.
  local off = tonumber(ARGV[3])
  local fmt = '>' .. string.rep('I8', n)
  local prev = call('GETRANGE', rec, off, off + 8 * n - 1)
  local was = {struct.unpack(fmt, prev .. string.rep('\0', 8 * n - #prev))}
  for j = 1, n do
    if was[j] == 0 then
      if applied then
        was[j] = apply(j) + bias
      else
        local v = admit(j, function(k) return was[k] == 0 end)
        if type(v) == 'table' then return v end
        was[j] = v + bias
        applied = true
      end
    end
    out[j] = was[j] - bias
  end
  if applied then
    call('SETRANGE', rec, off, struct.pack(fmt, unpack(was, 1, n)))
  end
else
  local pos = {}
  for p in string.gmatch(ARGV[3], '%d+') do pos[#pos + 1] = p end
  local prev = call('HMGET', rec, unpack(pos))
  local set = {}
  for j = 1, n do
    if prev[j] then
      out[j] = tonumber(prev[j])
    else
      local v
      if applied then
        v = apply(j)
      else
        v = admit(j, function(k) return not prev[k] end)
        if type(v) == 'table' then return v end
        applied = true
      end
      out[j] = v
      set[#set + 1] = pos[j]
      set[#set + 1] = tostring(v)
    end
  end
  if applied then call('HSET', rec, unpack(set)) end
end
if applied then call('PEXPIRE', rec, ARGV[2]) end
return out
)lua";

// The key-per-entry layout (see redis_scripts.h). Insert-if-absent and
// count a reference.
//   ARGV[4] sizes of the entries, comma-separated decimals
// Returns, per entry, 2 * count + (1 if this call created the entry): never
// 0, so bias 0.
constexpr char kLegacyInsertEntry[] = R"lua(-- chunkd insert v7
local bias = 0
local sizes
-- HINCRBY creates a new entry (count 1); only then is its size stored.
-- c: the count after HINCRBY when admit made it already.
local function apply(j, c)
  local key = KEYS[m + j]
  c = c or call('HINCRBY', key, 'r', '1')
  if c ~= 1 then return c * 2 end
  if not sizes then
    sizes = {}
    for s in string.gmatch(ARGV[4], '%d+') do sizes[#sizes + 1] = s end
  end
  call('HSET', key, 's', sizes[j])
  return 3
end
-- When full, a call of entries that all exist still counts them.
local function admit(j, pending)
  local key = KEYS[m + j]
  local c = redis.pcall('HINCRBY', key, 'r', '1')
  if not oom(c) then
    if type(c) == 'table' then return c end
    return apply(j, c)
  end
  for k = j, n do
    if (k == j or pending(k)) and call('EXISTS', KEYS[m + k]) == 0 then
      return c
    end
  end
  call('HDEL', key, '')
  return apply(j)
end
)lua";

// Drop a reference; delete the entry at zero.
// Returns, per entry, the count left (0 for a removed or absent entry), so
// bias 1.
constexpr char kLegacyReleaseEntry[] = R"lua(-- chunkd release v6
local bias = 1
-- One HINCRBY for an entry that exists (the common case); an absent one is
-- created by it and deleted again at once, invisibly (a script is atomic).
-- left: the count after HINCRBY when admit made it already.
local function apply(j, left)
  local key = KEYS[m + j]
  left = left or call('HINCRBY', key, 'r', '-1')
  if left > 0 then return left end
  call('DEL', key)
  return 0
end
-- When full, releases still run: they free memory.
local function admit(j, pending)
  local key = KEYS[m + j]
  local left = redis.pcall('HINCRBY', key, 'r', '-1')
  if not oom(left) then
    if type(left) == 'table' then return left end
    return apply(j, left)
  end
  call('HDEL', key, '')
  return apply(j)
end
)lua";

// Move a next-chunk size to the front of each entry's MRU list and set the
// run recorded with it.
//   ARGV[1] field "h:<params>" (the list), ARGV[2] field "r:<params>" (the
//   run), ARGV[3] list length, ARGV[3+j] size for entry j (canonical
//   decimal), ARGV[3+n+j] its run ("s,s,s" or empty)
// The run has a field of its own, so that a server that knows no runs
// reads the list as before. Absent entries are skipped; fields that would
// not change are not written again (a duplicate stream mostly sees the
// sizes it saw before, and a write costs Redis more than the read).
// Returns the number recorded, or -1 when Redis refused the call's first
// write for lack of memory: then nothing was recorded (hints only save
// work; a full Redis keeps its memory for entries).
constexpr char kLegacyRecordNextScript[] = R"lua(-- chunkd next size v5
local max = tonumber(ARGV[3])
local n = #KEYS
local done = 0
local wrote = false
local function write(key, ...)
  if wrote then
    redis.call('HSET', key, ...)
    return nil
  end
  local r = redis.pcall('HSET', key, ...)
  if type(r) == 'table' then
    if r.err ~= nil and string.sub(r.err, 1, 4) == 'OOM ' then
      return -1
    end
    return r
  end
  wrote = true
  return nil
end
for j = 1, n do
  local size = ARGV[3 + j]
  local run = ARGV[3 + n + j]
  local cur = redis.call('HMGET', KEYS[j], ARGV[1], ARGV[2])
  if cur[1] or redis.call('EXISTS', KEYS[j]) == 1 then
    local out = {size}
    if cur[1] then
      for s in string.gmatch(cur[1], '%d+') do
        if #out >= max then break end
        if s ~= size then out[#out + 1] = s end
      end
    end
    local list = table.concat(out, ',')
    local failed = nil
    if list ~= cur[1] and run ~= (cur[2] or '') then
      failed = write(KEYS[j], ARGV[1], list, ARGV[2], run)
    elseif list ~= cur[1] then
      failed = write(KEYS[j], ARGV[1], list)
    elseif run ~= (cur[2] or '') then
      failed = write(KEYS[j], ARGV[2], run)
    end
    if failed ~= nil then return failed end
    done = done + 1
  end
end
return done
)lua";


// The bucket layout. KEYS name buckets; an entry is its bucket's field.
// uvarint(s, i): the number at byte i of s and the index after it;
// uv(v): its encoding.
constexpr char kVarint[] = R"lua(
local byte, sub, char, floor = string.byte, string.sub, string.char, math.floor
local function uvarint(s, i)
  local v, mul = 0, 1
  while true do
    local b = byte(s, i)
    i = i + 1
    if b < 128 then return v + b * mul, i end
    v = v + (b - 128) * mul
    mul = mul * 128
  end
end
local function uv(v)
  local t = {}
  while v >= 128 do
    t[#t + 1] = v % 128 + 128
    v = floor(v / 128)
  end
  t[#t + 1] = v
  return char(unpack(t))
end
)lua";

// Insert-if-absent and count a reference.
//   ARGV[4] sizes of the entries, comma-separated decimals
//   ARGV[4+j] entry j's field
// Returns, per entry, 2 * count + (1 if this call created the entry): never
// 0, so bias 0.
constexpr char kInsertBucket[] = R"lua(-- chunkd insert buckets v2
local bias = 0
local sizes
-- `first`: the call's first write, made with pcall; returns its error.
-- A count below 127 is one byte that stays one byte (most entries): it is
-- incremented without decoding and encoding a varint.
local function apply(j, first)
  local key, f = KEYS[m + j], ARGV[4 + j]
  local v = call('HGET', key, f)
  local nv, res
  local b = v and byte(v, 1)
  if b and b < 127 then
    nv = char(b + 1) .. sub(v, 2)
    res = b * 2 + 2
  elseif v then
    local c, i = uvarint(v, 1)
    nv = uv(c + 1) .. sub(v, i)
    res = c * 2 + 2
  else
    if not sizes then
      sizes = {}
      for s in string.gmatch(ARGV[4], '%d+') do sizes[#sizes + 1] = s end
    end
    nv = uv(1) .. uv(tonumber(sizes[j]))
    res = 3
  end
  if first then
    local r = redis.pcall('HSET', key, f, nv)
    if type(r) == 'table' then return r end
  else
    call('HSET', key, f, nv)
  end
  return res
end
-- When full, a call of entries that all exist still counts them.
local function admit(j, pending)
  local r = apply(j, true)
  if not oom(r) then return r end
  for k = j, n do
    if (k == j or pending(k)) and
       call('HEXISTS', KEYS[m + k], ARGV[4 + k]) == 0 then
      return r
    end
  end
  call('HDEL', KEYS[m + j], '')
  return apply(j)
end
)lua";

// Drop a reference; delete the entry at zero.
//   ARGV[3+j] entry j's field
// Returns, per entry, the count left (0 for a removed or absent entry), so
// bias 1.
constexpr char kReleaseBucket[] = R"lua(-- chunkd release buckets v2
local bias = 1
local function apply(j)
  local key, f = KEYS[m + j], ARGV[3 + j]
  local v = call('HGET', key, f)
  if not v then return 0 end
  local b = byte(v, 1)
  if b > 1 and b < 128 then
    call('HSET', key, f, char(b - 1) .. sub(v, 2))
    return b - 1
  end
  local c, i = uvarint(v, 1)
  if c > 1 then
    call('HSET', key, f, uv(c - 1) .. sub(v, i))
    return c - 1
  end
  call('HDEL', key, f)
  return 0
end
-- Releases run when full too: they free memory. HDEL of the field no entry
-- has is a write Redis never refuses, after which the script may write.
local function admit(j, pending)
  call('HDEL', KEYS[m + j], '')
  return apply(j)
end
)lua";

// Move a next-chunk size to the front of an entry's hint list under one
// parameter key and set the run recorded with it.
//   ARGV[1] the key's tag (4 bytes), ARGV[2] list length, then per entry
//   j of n: ARGV[2+j] field, ARGV[2+n+j] size (decimal), ARGV[2+2n+j] run
//   (a byte with its length, then its sizes as uvarints)
// Absent entries are skipped; values that would not change are not written
// (a duplicate stream mostly sees the sizes it saw before). Records of
// other keys follow, most recent first, as long as the value stays within
// 64 bytes. Returns the number recorded, or -1 when Redis refused the
// call's first write for lack of memory: nothing was recorded.
constexpr char kRecordNextBucket[] = R"lua(-- chunkd next size buckets v1
local tag, max, n = ARGV[1], tonumber(ARGV[2]), #KEYS
local wrote = false
local function write(key, f, v)
  if wrote then
    call('HSET', key, f, v)
    return nil
  end
  local r = redis.pcall('HSET', key, f, v)
  if type(r) == 'table' then
    if r.err ~= nil and sub(r.err, 1, 4) == 'OOM ' then return -1 end
    return r
  end
  wrote = true
  return nil
end
-- The value v with size and run recorded under tag; nil if unchanged.
local function merged(v, size, run)
  local _, i = uvarint(v, 1)
  _, i = uvarint(v, i)
  local head, others, old, oldrun = sub(v, 1, i - 1), {}, nil, nil
  while i <= #v do
    local t, c = sub(v, i, i + 3), byte(v, i + 4)
    local k, list = i + 5, {}
    for x = 1, floor(c / 16) do list[x], k = uvarint(v, k) end
    local runstart = k
    for x = 1, c % 16 do _, k = uvarint(v, k) end
    if t == tag then
      old, oldrun = list, char(c % 16) .. sub(v, runstart, k - 1)
    else
      others[#others + 1] = sub(v, i, k - 1)
    end
    i = k
  end
  local out = {size}
  for _, s in ipairs(old or {}) do
    if #out >= max then break end
    if s ~= size then out[#out + 1] = s end
  end
  if old and run == oldrun and #out == #old then
    local same = true
    for x = 1, #out do same = same and out[x] == old[x] end
    if same then return nil end
  end
  local parts = {head, tag, char(16 * #out + byte(run, 1))}
  for x = 1, #out do parts[#parts + 1] = uv(out[x]) end
  parts[#parts + 1] = sub(run, 2)
  local nv = table.concat(parts)
  for _, o in ipairs(others) do
    if #nv + #o > 64 then break end
    nv = nv .. o
  end
  return nv
end
local done = 0
for j = 1, n do
  local key, f = KEYS[j], ARGV[2 + j]
  local v = call('HGET', key, f)
  if v then
    local nv = merged(v, tonumber(ARGV[2 + n + j]), ARGV[2 + 2 * n + j])
    if nv then
      local failed = write(key, f, nv)
      if failed ~= nil then return failed end
    end
    done = done + 1
  end
end
return done
)lua";

std::string Sha1Hex(absl::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha1(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace

const std::vector<std::string>& RedisScripts() {
  static const auto* scripts = new std::vector<std::string>{
      absl::StrCat(kEntryPrologue, kVarint, kInsertBucket, kRecordedCall),
      absl::StrCat(kEntryPrologue, kVarint, kReleaseBucket, kRecordedCall),
      absl::StrCat("local call = redis.call", kVarint, kRecordNextBucket),
      absl::StrCat(kEntryPrologue, kLegacyInsertEntry, kRecordedCall),
      absl::StrCat(kEntryPrologue, kLegacyReleaseEntry, kRecordedCall),
      kLegacyRecordNextScript};
  return *scripts;
}

const std::vector<std::string>& RedisScriptShas() {
  static const auto* shas = [] {
    auto* s = new std::vector<std::string>();
    for (const std::string& script : RedisScripts()) {
      s->push_back(Sha1Hex(script));
    }
    return s;
  }();
  return *shas;
}

}  // namespace chunkd::index
