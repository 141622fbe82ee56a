#include "index/redis_cluster.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace chunkd::index {
namespace {

TEST(Crc16Test, XmodemCheckValue) {
  // The standard check value of CRC-16/XMODEM, and Redis' own test vector.
  EXPECT_EQ(Crc16Xmodem("123456789"), 0x31C3);
  EXPECT_EQ(Crc16Xmodem(""), 0);
}

TEST(KeySlotTest, MatchesRedis) {
  // Values from CLUSTER KEYSLOT of a real server.
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("somekey"), 11058);
  // The hash tag rule: the first {...} that is not empty.
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), Crc16Xmodem("foo{}{bar}") & 16383);
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
  EXPECT_EQ(KeySlot("{"), Crc16Xmodem("{") & 16383);
  EXPECT_EQ(KeySlot(std::string("a\0{b}", 5)), KeySlot("b"));
}

TEST(SlotTagTest, EveryTagLandsInItsSlot) {
  std::set<std::string> tags;
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    const std::string& tag = SlotTag(slot);
    ASSERT_EQ(KeySlot(tag), slot);
    ASSERT_EQ(KeySlot("chunkd-tok:ns:i:stream:{" + tag + "}"), slot);
    tags.insert(tag);
  }
  EXPECT_EQ(tags.size(), static_cast<size_t>(kClusterSlots));
}

}  // namespace
}  // namespace chunkd::index
