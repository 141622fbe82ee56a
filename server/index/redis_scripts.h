// The Lua scripts of the Redis index, for both layouts: the bucket layout
// (redis_layout.h) that chunkd writes, and the key-per-entry layout of
// chunkd 0.3 and before, which `chunkctl index migrate` reads and the
// benchmark measures side by side (RedisConfig::legacy_layout).
//
// Thread safety: constants.
#ifndef CHUNKD_INDEX_REDIS_SCRIPTS_H_
#define CHUNKD_INDEX_REDIS_SCRIPTS_H_

#include <string>
#include <vector>

namespace chunkd::index {

enum ScriptId {
  kInsert = 0,
  kRelease = 1,
  kRecordNext = 2,
  kLegacyInsert = 3,
  kLegacyRelease = 4,
  kLegacyRecordNext = 5,
};

// Every script, by ScriptId, and the SHA-1 of each (for EVALSHA).
const std::vector<std::string>& RedisScripts();
const std::vector<std::string>& RedisScriptShas();

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_SCRIPTS_H_
