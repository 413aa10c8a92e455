// The process-set table: ids, membership and the checks on ranks. (Agreement on
// changes is the coordinator's: test_coordinator.cc.)
#include <gtest/gtest.h>

#include <functional>

#include "engine/process_set_table.h"

namespace lockstep {
namespace {

Status::Code CodeOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.code();
  }
  return Status::Code::kOk;
}

TEST(ProcessSetTableTest, GlobalSetHoldsEveryRank) {
  ProcessSetTable table(4);
  EXPECT_EQ(table.Ids(), (std::vector<int32_t>{0}));
  EXPECT_EQ(*table.Ranks(0), (std::vector<int>{0, 1, 2, 3}));
}

TEST(ProcessSetTableTest, IdsCountUpAndAreNeverReused) {
  ProcessSetTable table(4);
  EXPECT_EQ(table.Add({0, 2}), 1);
  EXPECT_EQ(table.Add({1, 3}), 2);
  table.Remove(1);
  EXPECT_FALSE(table.Ranks(1).has_value());
  EXPECT_EQ(table.Add({0, 2}), 3);  // the same ranks again get a fresh id
  EXPECT_EQ(table.Ids(), (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(table.RanksOrThrow(3), (std::vector<int>{0, 2}));
}

TEST(ProcessSetTableTest, RejectsDuplicatesUnknownIdsAndTheGlobalSet) {
  ProcessSetTable table(3);
  table.Add({0, 1});
  EXPECT_EQ(CodeOf([&] { table.Add({0, 1}); }), Status::Code::kInvalidArgument);
  EXPECT_EQ(CodeOf([&] { table.Add({0, 1, 2}); }), Status::Code::kInvalidArgument);  // = global
  EXPECT_EQ(CodeOf([&] { table.Remove(0); }), Status::Code::kInvalidArgument);
  EXPECT_EQ(CodeOf([&] { table.Remove(7); }), Status::Code::kInvalidArgument);
  EXPECT_EQ(CodeOf([&] { table.RanksOrThrow(7); }), Status::Code::kInvalidArgument);
}

TEST(ProcessSetTableTest, NormalizeRanksSortsAndChecks) {
  EXPECT_EQ(NormalizeRanks({3, 0, 2}, 4), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(CodeOf([] { NormalizeRanks({}, 4); }), Status::Code::kInvalidArgument);
  EXPECT_EQ(CodeOf([] { NormalizeRanks({1, 1}, 4); }), Status::Code::kInvalidArgument);
  EXPECT_EQ(CodeOf([] { NormalizeRanks({0, 4}, 4); }), Status::Code::kInvalidArgument);
  EXPECT_EQ(CodeOf([] { NormalizeRanks({-1, 0}, 4); }), Status::Code::kInvalidArgument);
}

TEST(ProcessSetTableTest, SetTopologyNumbersMembersFromZero) {
  const Topology member = SetTopology({1, 3, 4}, 3);
  EXPECT_EQ(member.rank, 1);
  EXPECT_EQ(member.size, 3);
  EXPECT_EQ(SetTopology({1, 3, 4}, 2).rank, -1);
}

}  // namespace
}  // namespace lockstep
