// NameIds: ids given, kept while pinned or used, reused after, and none
// past the limit.
#include "index/name_ids.h"

#include "gtest/gtest.h"

namespace chunkd::index {
namespace {

TEST(NameIdsTest, IdsAreKeptWhilePinnedOrUsedThenReused) {
  NameIds ids(/*max_id=*/2, /*by_id=*/true);
  EXPECT_EQ(ids.Pin("a", /*create=*/false), nullptr);
  NameIds::Name* a = ids.Pin("a", /*create=*/true);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->id, 1u);
  EXPECT_EQ(ids.ById(1), a);
  // The same name, pinned again, is the same record.
  EXPECT_EQ(ids.Pin("a", /*create=*/false), a);
  ids.Unpin(a);
  NameIds::Name* b = ids.Pin("b", /*create=*/true);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->id, 2u);
  // Every id taken: a third name gets none, and is not remembered.
  EXPECT_EQ(ids.Pin("c", /*create=*/true), nullptr);
  EXPECT_EQ(ids.size(), 2u);
  // "a" used: unpinned, it stays.
  a->uses.fetch_add(1);
  ids.Unpin(a);
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids.ById(1), a);
  // Its last use dropped without a pin: forgotten, its id free for "c".
  a->uses.fetch_sub(1);
  ids.ReleaseIfUnused(1);
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids.ById(1), nullptr);
  NameIds::Name* c = ids.Pin("c", /*create=*/true);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->id, 1u);
  // ReleaseIfUnused of a pinned name does nothing.
  ids.ReleaseIfUnused(1);
  EXPECT_EQ(ids.ById(1), c);
  ids.Unpin(c);
  ids.Unpin(b);
  EXPECT_EQ(ids.size(), 0u);
  // Unknown ids are ignored.
  ids.ReleaseIfUnused(2);
  EXPECT_EQ(ids.size(), 0u);
}

}  // namespace
}  // namespace chunkd::index
