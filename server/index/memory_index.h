// MemoryIndex: the embedded, in-process FingerprintIndex, lost on restart.
// docs/design.md, "The memory backend", gives its layout (64 shards of flat
// tables, compact_table.h; namespaces and parameter keys held once each by
// id, name_ids.h) and its measured footprint.
//
// What it promises beyond FingerprintIndex's contract:
// - IndexOptions::max_entries (0 = unlimited) is never passed, however many
//   threads insert: a new entry is counted under its shard's lock before it
//   is created. At the limit an Insert that would create an entry fails
//   with RESOURCE_EXHAUSTED (EntryLimitMessage()): the fingerprints before
//   it in the batch are applied (and recorded under its WriteToken), it and
//   those after it are not. Everything else works (lookups, hints,
//   releases, inserts of known fingerprints); Health() says the same; a
//   Release that removes an entry makes room at once.
// - At most kMaxNamespaceId namespaces have entries at once; an Insert that
//   would add one more fails with RESOURCE_EXHAUSTED saying so.
// - Write-token positions are remembered token_ttl to 1.1 * token_ttl after
//   their block's last write (TokenPositions() counts them, about 9 bytes
//   each). With max_entries set they are bounded by TokenPositionLimit(): a
//   token-carrying Insert that needs more fails as at the entry limit
//   (TokenLimitMessage()) until blocks expire. Releases are never refused.
// - Memory: at most 61 bytes per SHA-256 entry, 144 with next-size hints,
//   plus the write-token records.
//
// Thread safety: thread-safe. A batch holds a shard's lock for one
// fingerprint at a time; token-carrying batches of one stream serialize on
// that stream's record, not with other streams.
#ifndef CHUNKD_INDEX_MEMORY_INDEX_H_
#define CHUNKD_INDEX_MEMORY_INDEX_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "index/compact_table.h"
#include "index/fingerprint_index.h"
#include "index/name_ids.h"

namespace chunkd::index {

class MemoryIndex final : public FingerprintIndex {
 public:
  // Positions per block of a write-token record.
  static constexpr uint64_t kTokenBlockPositions = 64;
  // Write-token positions allowed per entry of max_entries...
  static constexpr uint64_t kTokenPositionsPerEntry = 4;
  // ...but never fewer than this many (1024 blocks, about 560 KiB).
  static constexpr uint64_t kMinTokenPositions = 1024 * kTokenBlockPositions;

  // What the index reads the time from (write-token expiry): absl::Now,
  // or a test's clock.
  using Clock = std::function<absl::Time()>;

  // Uses options.max_entries, options.next_sizes_length and
  // options.token_ttl.
  // REQUIRES: 1 <= options.next_sizes_length <= kMaxNextSizesLength.
  explicit MemoryIndex(const IndexOptions& options)
      : MemoryIndex(options, absl::Now) {}
  MemoryIndex(const IndexOptions& options, Clock clock);
  MemoryIndex() : MemoryIndex(IndexOptions()) {}
  MemoryIndex(const MemoryIndex&) = delete;
  MemoryIndex& operator=(const MemoryIndex&) = delete;

  absl::string_view backend() const override { return "memory"; }
  // RESOURCE_EXHAUSTED while the index holds max_entries entries
  // (EntryLimitMessage()) or its write-token records hold
  // TokenPositionLimit() positions (TokenLimitMessage()); OK otherwise.
  // Also forgets expired write-token blocks (at most every token_ttl / 10).
  absl::Status Health() override;
  // The exact number of entries over all namespaces.
  std::optional<uint64_t> EntryCount() override;

  using FingerprintIndex::Insert;
  using FingerprintIndex::Release;

  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns,
      absl::Span<const std::string> fingerprints) override;
  absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries,
      const WriteToken* token) override;
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints,
      const WriteToken* token) override;
  absl::Status RecordNextSizes(absl::string_view ns,
                               absl::string_view params_key,
                               absl::Span<const NextSize> hints) override;
  absl::StatusOr<std::vector<NextHints>> NextHintsOf(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const std::string> fingerprints) override;

  // Number of entries over all namespaces, counted map by map (for tests;
  // equals EntryCount() whenever no write is under way).
  size_t size() const;
  // Namespaces the index knows (those with entries, and those a call is
  // using), for tests.
  size_t NamespaceCount() const;
  // Chunking-parameter keys with ids (those of hint lists kept in slots,
  // and those a call is using), for tests.
  size_t ParamsKeyCount() const { return params_.size(); }
  // IndexOptions::max_entries (0: unlimited).
  uint64_t max_entries() const { return max_entries_; }

  // Write-token positions held (see above), and their limit (0: none).
  uint64_t TokenPositions() const { return token_positions_.load(); }
  uint64_t TokenPositionLimit() const { return token_position_limit_; }

  // "the memory index holds its limit of <N> entries (--index_max_entries)
  // ...": what an Insert refused at the limit and Health() say.
  std::string EntryLimitMessage() const;
  // What a token-carrying Insert refused at TokenPositionLimit() says.
  std::string TokenLimitMessage() const;

 private:
  using Name = NameIds::Name;
  // Keeps a name (and so its id) while a call uses it.
  class Pin {
   public:
    Pin(NameIds* ids, Name* name) : ids_(ids), name_(name) {}
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin() {
      if (name_ != nullptr) ids_->Unpin(name_);
    }
    Name* get() const { return name_; }

   private:
    NameIds* ids_;
    Name* name_;
  };
  // A parameter key's hints; an entry has a handful of keys at most.
  struct HintList {
    std::string params_key;
    NextHints hints;
  };
  using HintLists = std::vector<HintList>;
  // A hint slot whose entry's lists are all in Shard::hints.
  static constexpr uint32_t kSideHints = uint32_t{1} << 30;
  struct Shard {
    mutable std::mutex mu;
    // By fingerprint length: SHA-256, xxh128, any other.
    CompactTable<32> sha256;  // guarded by mu
    CompactTable<16> xxh128;  // guarded by mu
    StringKeyTable other;     // guarded by mu
    // Next-size hints of the entries flagged to have them: for 32- and
    // 16-byte fingerprints a slot each, holding the one list of up to
    // kInlineHintSizes sizes an entry has under one parameter key, or
    // flagged kSideHints; otherwise (other lengths, longer lists, more
    // than one key, more keys than ids) the lists in `hints`, by
    // "<ns id><fingerprint>".
    SlotArray<32, InlineHints> sha256_hints;            // guarded by mu
    SlotArray<16, InlineHints> xxh128_hints;            // guarded by mu
    absl::flat_hash_map<std::string, HintLists> hints;  // guarded by mu
  };
  static constexpr size_t kShards = 64;
  // Most chunking-parameter keys with ids (hint lists in slots) at once;
  // the lists of more go to Shard::hints.
  static constexpr uint32_t kMaxParamsIds = 4095;
  static constexpr uint32_t kParamsIdMask = 0xffff;
  static constexpr int kParamsCountShift = 16;
  static constexpr int kParamsRunShift = 20;
  static constexpr uint32_t kParamsFieldMask = 0xf;  // each count's bits

  // What one stream wrote at kTokenBlockPositions consecutive positions:
  // per position the result returned then plus one (0: not written). An
  // InsertResult is encoded as 2 * ref_count + is_new.
  struct TokenBlock {
    absl::Time written;
    std::array<uint64_t, kTokenBlockPositions> results{};
  };
  // What one (namespace, stream id, operation) has written, by block
  // (position / kTokenBlockPositions).
  struct TokenRecord {
    std::mutex mu;
    // Swept (every block expired) and no longer in tokens_: whoever finds
    // a record dead takes a new one.
    bool dead = false;  // guarded by mu
    absl::flat_hash_map<uint64_t, std::unique_ptr<TokenBlock>>
        blocks;  // guarded by mu
  };
  // A TokenRecord, locked.
  struct LockedRecord {
    std::shared_ptr<TokenRecord> record;
    std::unique_lock<std::mutex> lock;
  };

  // `fingerprint` in namespace `ns`, with its hash.
  static TableKey KeyOf(const Name& ns, absl::string_view fingerprint);
  Shard& ShardFor(const TableKey& key) { return shards_[key.hash % kShards]; }
  // Calls `f` with the shard's table for the key's length.
  template <typename F>
  static decltype(auto) WithTable(Shard& shard, const TableKey& key, F f) {
    switch (key.bytes.size()) {
      case 32:
        return f(shard.sha256);
      case 16:
        return f(shard.xxh128);
      default:
        return f(shard.other);
    }
  }
  // Calls `f` with the shard's hint slots for the key's length (32 or 16),
  // or returns `otherwise` for other lengths.
  template <typename R, typename F>
  static R WithHintSlots(Shard& shard, const TableKey& key, R otherwise, F f) {
    switch (key.bytes.size()) {
      case 32:
        return f(shard.sha256_hints);
      case 16:
        return f(shard.xxh128_hints);
      default:
        return otherwise;
    }
  }
  static std::string HintsKey(const TableKey& key);
  // Adds `hint` to the list of `key` (present, flagged) under `params`
  // (pinned; null when no id was left for it). REQUIRES: shard.mu held.
  void RecordHint(Shard& shard, const TableKey& key, Name* params,
                  absl::string_view params_key, const NextSize& hint);
  // The hints of `key` under `params_key` (`params`: its pinned name, null
  // when it has none). REQUIRES: shard.mu held.
  NextHints HintsOf(Shard& shard, const TableKey& key, const Name* params,
                    absl::string_view params_key);
  // Drops the hints of the removed entry `key`. REQUIRES: shard.mu held.
  void DropHints(Shard& shard, const TableKey& key);
  // Drops a use of parameter-key id `id` (not pinned by the caller).
  void DropParamsUse(uint32_t id);

  // Counts a reference, creating the entry if needed; nullopt (nothing
  // done) when that would exceed max_entries.
  std::optional<InsertResult> InsertOne(Name& ns, const TableKey& key,
                                        uint32_t size);
  uint64_t ReleaseOne(Name& ns, const TableKey& key);

  // Takes `n` write-token positions; false (nothing taken) when `bounded`
  // and that would pass the limit.
  bool TakeTokenPositions(uint64_t n, bool bounded);
  // The record of (ns, op, token.stream_id), created if needed (false when
  // that is refused by the limit), locked.
  bool LockRecord(absl::string_view ns, char op, const WriteToken& token,
                  bool bounded, LockedRecord* out);
  // Drops expired blocks and the records left empty, at most every
  // token_ttl / 10. REQUIRES: tokens_mu_ held, no record's lock held.
  void SweepTokensLocked(absl::Time now);
  // Applies `apply(i)` (nullopt: refused at the entry limit) to positions
  // token.first_position + i, i < n, not recorded yet, and records what it
  // returned; the recorded results go to `results`.
  template <typename Apply>
  absl::Status WriteRecorded(absl::string_view ns, char op,
                             const WriteToken& token, size_t n, bool bounded,
                             Apply apply, std::vector<uint64_t>* results);

  const uint64_t max_entries_;
  const uint64_t token_position_limit_;
  const size_t next_sizes_length_;
  const absl::Duration token_ttl_;
  const Clock clock_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> entries_{0};

  // Namespaces by id; an entry is a use.
  NameIds namespaces_{kMaxNamespaceId, /*by_id=*/false};
  // Chunking-parameter keys by id (kMaxParamsIds at once); an inline hint
  // list is a use.
  NameIds params_{kMaxParamsIds, /*by_id=*/true};
  // Whether hint lists fit a slot (next_sizes_length_ <= kInlineHintSizes).
  const bool inline_hints_;
  std::atomic<uint64_t> token_positions_{0};

  std::mutex tokens_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<TokenRecord>>
      tokens_;                   // guarded by tokens_mu_
  absl::Time last_token_sweep_;  // guarded by tokens_mu_
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_MEMORY_INDEX_H_
