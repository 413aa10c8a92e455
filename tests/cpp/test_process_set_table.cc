// The process-set table and the agreement on changes: ids, membership, the checks on
// ranks, and the verdict every rank derives from the allgathered proposals.
#include <gtest/gtest.h>

#include <functional>

#include "engine/process_set_table.h"

namespace lockstep {
namespace {

using Kind = ProcessSetChange::Kind;

ProcessSetChange Add(std::vector<int> ranks) {
  ProcessSetChange change;
  change.kind = Kind::kAdd;
  change.ranks = std::move(ranks);
  return change;
}

ProcessSetChange Remove(int32_t id) {
  ProcessSetChange change;
  change.kind = Kind::kRemove;
  change.id = id;
  return change;
}

// What the allgather of every rank's EncodeChange yields: the proposals back to back.
std::vector<int32_t> Gathered(const std::vector<ProcessSetChange>& proposals) {
  std::vector<int32_t> words;
  for (const ProcessSetChange& change : proposals) {
    std::vector<int32_t> encoded = EncodeChange(change);
    words.insert(words.end(), encoded.begin(), encoded.end());
  }
  return words;
}

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

TEST(ProcessSetAgreementTest, AgreeingProposalsYieldTheChange) {
  const std::vector<int32_t> words = Gathered({Add({0, 2}), Add({0, 2}), Add({0, 2})});
  const ProcessSetChange change = AgreedChange(words.data(), words.size(), 3);
  EXPECT_EQ(change.kind, Kind::kAdd);
  EXPECT_EQ(change.ranks, (std::vector<int>{0, 2}));

  const std::vector<int32_t> removal = Gathered({Remove(5), Remove(5)});
  EXPECT_EQ(AgreedChange(removal.data(), removal.size(), 2).id, 5);
}

TEST(ProcessSetAgreementTest, DisagreementNamesTheRankAndBothCalls) {
  const std::vector<int32_t> words = Gathered({Add({0, 1}), Add({0, 1}), Add({0, 2})});
  try {
    AgreedChange(words.data(), words.size(), 3);
    FAIL() << "disagreeing proposals were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::Code::kPrecondition);
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 2 called add_process_set([0, 2])"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 0 called add_process_set([0, 1])"), std::string::npos) << message;
  }
  const std::vector<int32_t> mixed = Gathered({Add({0, 1}), Remove(1)});
  EXPECT_EQ(CodeOf([&] { AgreedChange(mixed.data(), mixed.size(), 2); }),
            Status::Code::kPrecondition);
}

TEST(ProcessSetAgreementTest, MalformedInputIsAnInternalError) {
  const std::vector<int32_t> words = Gathered({Add({0, 1})});
  EXPECT_EQ(CodeOf([&] { AgreedChange(words.data(), words.size(), 2); }),
            Status::Code::kInternal);  // one proposal for two ranks
  EXPECT_EQ(CodeOf([&] { AgreedChange(words.data(), words.size() - 1, 1); }),
            Status::Code::kInternal);  // truncated
}

}  // namespace
}  // namespace lockstep
