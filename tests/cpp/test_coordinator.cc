// Rank 0's negotiation logic, driven round by round with hand-made RequestLists:
// readiness, ordering, groups, join, process-set changes, cache eviction and stall
// cancellation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "negotiation/coordinator.h"
#include "wire/process_set_change.h"

namespace lockstep {
namespace {

using Clock = Coordinator::Clock;
using std::chrono::seconds;

Request MakeRequest(int rank, const std::string& name, OpType op = OpType::kAllreduce) {
  Request r;
  r.rank = rank;
  r.op = op;
  r.name = name;
  r.reduce_op = ReduceOp::kSum;
  r.shape = {4};
  return r;
}

Request Grouped(int rank, const std::string& name, int64_t group_id, int32_t group_size) {
  Request r = MakeRequest(rank, name);
  r.group_id = group_id;
  r.group_size = group_size;
  return r;
}

Request Join(int rank) {
  Request r = MakeRequest(rank, "join", OpType::kJoin);
  r.shape = {};
  return r;
}

// A proposal to add a set of `ranks`, named as a tensor might be: the name is no key.
Request Proposal(int rank, std::vector<int> ranks, const std::string& name = "change") {
  ProcessSetChange change;
  change.ranks = std::move(ranks);
  Request r = MakeRequest(rank, name, OpType::kProcessSetChange);
  r.shape = {};
  r.change = EncodeChange(change);
  return r;
}

Response CachedAllreduce(const std::string& name) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.reduce_op = ReduceOp::kSum;
  r.names = {name};
  r.sizes = {4};
  r.shape = {4};
  return r;
}

std::vector<std::string> NamesOf(const ResponseList& list) {
  std::vector<std::string> names;
  for (const Response& r : list.responses) names.push_back(r.names.at(0));
  return names;
}

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not in: " << text;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  using Names = std::vector<std::string>;

  void SetUp() override { Start(2, Config{}); }
  void TearDown() override {
    if (log_ != nullptr) std::fclose(log_);
  }

  void Start(int size, const Config& config) {
    size_ = size;
    config_ = config;
    if (log_ == nullptr) log_ = std::tmpfile();
    ASSERT_NE(log_, nullptr);
    logger_ = std::make_unique<Logger>(LogLevel::kWarning, 0, log_);
    inspector_ = std::make_unique<StallInspector>(config_, *logger_);
    coordinator_ = std::make_unique<Coordinator>(size, *inspector_);
  }

  // One round at t0 + `at`: by_rank[r] is what rank r submits.
  ResponseList Round(const std::vector<std::vector<Request>>& by_rank, seconds at = seconds(0)) {
    std::vector<RequestList> lists(size_);
    for (size_t r = 0; r < by_rank.size(); ++r) lists[r].requests = by_rank[r];
    return RoundWithLists(lists, at);
  }

  ResponseList RoundWithLists(const std::vector<RequestList>& lists, seconds at) {
    return coordinator_->Process(lists, cache_, partial_since_, t0_ + at);
  }

  std::string LogText() {
    std::fflush(log_);
    std::fseek(log_, 0, SEEK_SET);
    std::string text;
    char chunk[512];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof(chunk), log_)) > 0) text.append(chunk, n);
    std::fseek(log_, 0, SEEK_END);
    return text;
  }

  int size_ = 0;
  Config config_;
  std::FILE* log_ = nullptr;
  std::unique_ptr<Logger> logger_;
  std::unique_ptr<StallInspector> inspector_;
  std::unique_ptr<Coordinator> coordinator_;
  ResponseCache cache_{16};
  std::map<int32_t, Clock::time_point> partial_since_;
  const Clock::time_point t0_ = Clock::now();
};

TEST_F(CoordinatorTest, RespondsOnlyOnceEveryRankSubmitted) {
  Start(3, Config{});
  EXPECT_TRUE(Round({{MakeRequest(0, "a")}, {MakeRequest(1, "a")}, {}}).responses.empty());
  EXPECT_TRUE(Round({{}, {}, {}}).responses.empty());
  ResponseList out = Round({{}, {}, {MakeRequest(2, "a")}});
  ASSERT_EQ(NamesOf(out), (Names{"a"}));
  EXPECT_EQ(out.responses[0].type, ResponseType::kAllreduce);
  EXPECT_EQ(out.responses[0].sizes, (std::vector<int64_t>{4}));
  EXPECT_TRUE(out.evict_cache_ids.empty());
  // Done and forgotten: nothing is emitted again.
  EXPECT_TRUE(Round({{}, {}, {}}).responses.empty());
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_ + seconds(1)), 0.0);
}

TEST_F(CoordinatorTest, MismatchedRequestsBecomeAnErrorResponse) {
  Request odd = MakeRequest(1, "a");
  odd.dtype = DataType::kInt32;
  ResponseList out = Round({{MakeRequest(0, "a")}, {odd}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, ResponseType::kError);
  EXPECT_TRUE(
      Contains(out.responses[0].error_message, "rank 0 sent float32 but rank 1 sent int32"));
}

TEST_F(CoordinatorTest, ResponsesFollowFirstArrivalOrder) {
  Round({{MakeRequest(0, "c"), MakeRequest(0, "a"), MakeRequest(0, "b")}, {}});
  ResponseList out = Round({{}, {MakeRequest(1, "b"), MakeRequest(1, "a"), MakeRequest(1, "c")}});
  EXPECT_EQ(NamesOf(out), (Names{"c", "a", "b"}));

  // Within one round, rank 0's list is read before rank 1's.
  Round({{MakeRequest(0, "x")}, {MakeRequest(1, "y")}});
  out = Round({{MakeRequest(0, "y")}, {MakeRequest(1, "x")}});
  EXPECT_EQ(NamesOf(out), (Names{"x", "y"}));
}

TEST_F(CoordinatorTest, GroupReleasedOnlyWhenAllMembersReadyEverywhere) {
  ResponseList out = Round({{Grouped(0, "g1", 5, 2), Grouped(0, "g2", 5, 2), MakeRequest(0, "u")},
                            {Grouped(1, "g1", 5, 2), MakeRequest(1, "u")}});
  EXPECT_EQ(NamesOf(out), (Names{"u"}));  // g1 is ready, but g2 is not

  out = Round({{}, {Grouped(1, "g2", 5, 2)}});
  ASSERT_EQ(NamesOf(out), (Names{"g1", "g2"}));
  EXPECT_EQ(out.responses[0].group_id, 5);
  EXPECT_EQ(out.responses[1].group_id, 5);
  EXPECT_TRUE(Round({{}, {}}).responses.empty());
}

TEST_F(CoordinatorTest, JoinedRanksCountAsSubmittedForAllreduce) {
  Start(3, Config{});
  ResponseList out = Round({{MakeRequest(0, "a")}, {MakeRequest(1, "a")}, {Join(2)}});
  ASSERT_EQ(NamesOf(out), (Names{"a"}));
  EXPECT_EQ(out.responses[0].type, ResponseType::kAllreduce);

  Request average = MakeRequest(1, "b");
  average.reduce_op = ReduceOp::kAverage;
  out = Round({{Join(0)}, {average}, {}});
  ASSERT_EQ(NamesOf(out), (Names{"b"}));
  EXPECT_EQ(out.responses[0].type, ResponseType::kAllreduce);
  EXPECT_EQ(out.responses[0].reduce_op, ReduceOp::kAverage);

  // An allgather cannot run with joined ranks: it fails, naming them.
  out = Round({{}, {MakeRequest(1, "g", OpType::kAllgather)}, {}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, ResponseType::kError);
  EXPECT_TRUE(Contains(out.responses[0].error_message, "rank(s) 0 2 have joined"));
}

TEST_F(CoordinatorTest, JoinResponseOnceAllJoinedThenStateResets) {
  Start(3, Config{});
  EXPECT_TRUE(Round({{}, {}, {Join(2)}}).responses.empty());
  EXPECT_TRUE(Round({{Join(0)}, {}, {}}).responses.empty());
  ResponseList out = Round({{}, {Join(1)}, {}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, ResponseType::kJoin);
  EXPECT_EQ(out.responses[0].names, (Names{"join"}));
  EXPECT_EQ(out.responses[0].last_joined_rank, 1);

  // After the reset no rank counts as joined any more.
  EXPECT_TRUE(Round({{MakeRequest(0, "c")}, {}, {}}).responses.empty());
  EXPECT_TRUE(Round({{}, {MakeRequest(1, "c")}, {}}).responses.empty());
  EXPECT_EQ(NamesOf(Round({{}, {}, {MakeRequest(2, "c")}})), (Names{"c"}));

  // The count restarts too: two ranks joining is not enough.
  EXPECT_TRUE(Round({{Join(0)}, {Join(1)}, {}}).responses.empty());
  out = Round({{}, {}, {Join(2)}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, ResponseType::kJoin);
  EXPECT_EQ(out.responses[0].last_joined_rank, 2);

  // When several join in the final round, the last one read (highest rank) is last.
  EXPECT_TRUE(Round({{}, {}, {Join(2)}}).responses.empty());
  out = Round({{Join(0)}, {Join(1)}, {}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].last_joined_rank, 1);
}

TEST_F(CoordinatorTest, RepeatedJoinFromOneRankCountsOnce) {
  Start(3, Config{});
  EXPECT_TRUE(Round({{Join(0)}, {}, {}}).responses.empty());
  EXPECT_TRUE(Round({{Join(0)}, {Join(1)}, {}}).responses.empty());
  EXPECT_EQ(Round({{}, {}, {Join(2)}}).responses.size(), 1u);
}

TEST_F(CoordinatorTest, FullRequestForACachedNameEvictsItsSlotOnce) {
  cache_.Put(CachedAllreduce("filler"));
  cache_.Put(CachedAllreduce("w"));
  ASSERT_EQ(cache_.IdOf("w"), 1);

  ResponseList out = Round({{MakeRequest(0, "w")}, {MakeRequest(1, "w")}});
  EXPECT_EQ(out.evict_cache_ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(NamesOf(out), (Names{"w"}));

  out = Round({{MakeRequest(0, "w"), MakeRequest(0, "new")}, {}});
  EXPECT_EQ(out.evict_cache_ids, (std::vector<int32_t>{1}));
  EXPECT_TRUE(out.responses.empty());

  out = Round({{}, {MakeRequest(1, "new")}});
  EXPECT_TRUE(out.evict_cache_ids.empty());
}

TEST_F(CoordinatorTest, StalledTensorFailsNamingTheMissingRankAndIsRemoved) {
  Config config;
  config.stall_check_seconds = 1;
  config.stall_shutdown_seconds = 5;
  Start(3, config);
  EXPECT_TRUE(Round({{MakeRequest(0, "s")}, {}, {MakeRequest(2, "s")}}).responses.empty());

  // Past the warning time but before the shutdown time: a warning, no failure.
  EXPECT_TRUE(Round({{}, {}, {}}, seconds(2)).responses.empty());
  EXPECT_TRUE(Contains(LogText(), "'s' (missing ranks: 1)"));

  ResponseList out = Round({{}, {}, {}}, seconds(100));
  ASSERT_EQ(out.responses.size(), 1u);
  const Response& error = out.responses[0];
  EXPECT_EQ(error.type, ResponseType::kError);
  EXPECT_EQ(error.names, (Names{"s"}));
  EXPECT_TRUE(Contains(error.error_message, "tensor 's' stalled: rank(s) 1 did not submit"));
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_ + seconds(100)), 0.0);

  // The late rank's request now starts a fresh wait instead of completing the old one.
  EXPECT_TRUE(Round({{}, {MakeRequest(1, "s")}, {}}, seconds(101)).responses.empty());
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_ + seconds(103)), 2.0);
}

TEST_F(CoordinatorTest, JoinedRanksAreNotReportedAsMissing) {
  Config config;
  config.stall_shutdown_seconds = 5;
  Start(4, config);
  EXPECT_TRUE(Round({{MakeRequest(0, "s")}, {}, {Join(2)}, {}}).responses.empty());
  ResponseList out = Round({{}, {}, {}, {}}, seconds(10));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(Contains(out.responses[0].error_message, "tensor 's' stalled: rank(s) 1 3 did"));
}

TEST_F(CoordinatorTest, PartialCacheSlotsNameTheRanksWithoutThem) {
  Config config;
  config.stall_shutdown_seconds = 5;
  Start(3, config);
  cache_.Put(CachedAllreduce("filler"));
  cache_.Put(CachedAllreduce("p"));
  const int32_t id = cache_.IdOf("p");
  partial_since_[id] = t0_;
  partial_since_[9] = t0_;  // a slot no longer cached is ignored

  std::vector<RequestList> lists(3);
  lists[0].pending_cache_ids = {0, id};
  lists[2].pending_cache_ids = {id};
  EXPECT_TRUE(RoundWithLists(lists, seconds(4)).responses.empty());  // not yet

  ResponseList out = RoundWithLists(lists, seconds(6));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, ResponseType::kError);
  EXPECT_EQ(out.responses[0].names, (Names{"p"}));
  EXPECT_TRUE(Contains(out.responses[0].error_message, "tensor 'p' stalled: rank(s) 1 did"));

  // Pending on every rank means nobody is missing.
  lists[1].pending_cache_ids = {id};
  EXPECT_TRUE(RoundWithLists(lists, seconds(7)).responses.empty());
}

TEST_F(CoordinatorTest, OldestWaitSeconds) {
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_), 0.0);
  Round({{MakeRequest(0, "a")}, {}}, seconds(0));
  Round({{MakeRequest(0, "b")}, {MakeRequest(1, "a")}}, seconds(2));  // a completes
  Round({{MakeRequest(0, "c")}, {}}, seconds(3));
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_ + seconds(5)), 3.0);  // b, since t0 + 2
  Round({{}, {MakeRequest(1, "b")}}, seconds(6));
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_ + seconds(7)), 4.0);  // c, since t0 + 3
}

TEST_F(CoordinatorTest, IgnoresRequestsFromRanksOutsideTheWorld) {
  EXPECT_TRUE(Round({{MakeRequest(0, "a"), MakeRequest(-1, "a")},
                     {MakeRequest(2, "a"), MakeRequest(5, "a"), Join(2)}})
                  .responses.empty());
  EXPECT_EQ(NamesOf(Round({{}, {MakeRequest(1, "a")}})), (Names{"a"}));
}

TEST_F(CoordinatorTest, AgreedChangeIsAnsweredOnceEveryRankProposed) {
  Start(3, Config{});
  EXPECT_TRUE(Round({{Proposal(0, {0, 2})}, {}, {Proposal(2, {0, 2})}}).responses.empty());
  ResponseList out = Round({{}, {Proposal(1, {0, 2})}, {}});
  ASSERT_EQ(out.responses.size(), 1u);
  const Response& change = out.responses[0];
  EXPECT_EQ(change.type, ResponseType::kProcessSetChange);
  EXPECT_EQ(change.error_message, "");
  EXPECT_EQ(DecodeChange(change.change).ranks, (std::vector<int>{0, 2}));
  EXPECT_TRUE(change.names.empty());  // a change is no tensor
  EXPECT_TRUE(Round({{}, {}, {}}).responses.empty());
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_ + seconds(1)), 0.0);
}

TEST_F(CoordinatorTest, DisagreeingProposalsFailTheChangeOnEveryRank) {
  Start(3, Config{});
  ResponseList out =
      Round({{Proposal(0, {0, 1})}, {Proposal(1, {0, 1})}, {Proposal(2, {0, 2}, "other name")}});
  ASSERT_EQ(out.responses.size(), 1u);
  const Response& error = out.responses[0];
  EXPECT_EQ(error.type, ResponseType::kProcessSetChange);
  EXPECT_TRUE(error.change.empty());
  EXPECT_TRUE(Contains(error.error_message,
                       "process sets must be changed by every rank alike, in the same order: rank "
                       "0 called add_process_set([0, 1]) but rank 2 called add_process_set([0, "
                       "2])"));

  // An addition against a removal is a disagreement too; the next turn starts afresh.
  Request removal = MakeRequest(1, "change", OpType::kProcessSetChange);
  ProcessSetChange remove;
  remove.kind = ProcessSetChange::Kind::kRemove;
  remove.id = 4;
  removal.change = EncodeChange(remove);
  out = Round({{Proposal(0, {1})}, {removal}, {Proposal(2, {1})}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(Contains(out.responses[0].error_message, "but rank 1 called remove_process_set(4)"));
}

TEST_F(CoordinatorTest, ProposalsAreMatchedInTheOrderEachRankMadeThem) {
  ResponseList out = Round({{Proposal(0, {0}), Proposal(0, {1})}, {Proposal(1, {0})}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(DecodeChange(out.responses[0].change).ranks, (std::vector<int>{0}));
  out = Round({{}, {Proposal(1, {1})}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(DecodeChange(out.responses[0].change).ranks, (std::vector<int>{1}));
}

TEST_F(CoordinatorTest, ChangesAndTensorsNeverMatchEachOtherWhateverTheirNames) {
  // Rank 0 submits a tensor and a change under the same name; rank 1 only the change.
  ResponseList out = Round({{MakeRequest(0, "__lockstep_process_set_change__.0"),
                             Proposal(0, {0}, "__lockstep_process_set_change__.0")},
                            {Proposal(1, {0}, "__lockstep_process_set_change__.0")}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, ResponseType::kProcessSetChange);
  EXPECT_EQ(out.responses[0].error_message, "");
  out = Round({{}, {MakeRequest(1, "__lockstep_process_set_change__.0")}});
  ASSERT_EQ(NamesOf(out), (Names{"__lockstep_process_set_change__.0"}));
  EXPECT_EQ(out.responses[0].type, ResponseType::kAllreduce);
}

TEST_F(CoordinatorTest, AChangeNamedLikeACachedTensorEvictsNothing) {
  cache_.Put(CachedAllreduce("w"));
  ResponseList out = Round({{Proposal(0, {0}, "w")}, {Proposal(1, {0}, "w")}});
  EXPECT_TRUE(out.evict_cache_ids.empty());
  EXPECT_EQ(cache_.IdOf("w"), 0);
}

TEST_F(CoordinatorTest, AChangeCannotRunWhileARankHasJoined) {
  Start(3, Config{});
  ResponseList out = Round({{Proposal(0, {0, 1})}, {Join(1)}, {Proposal(2, {0, 1})}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, ResponseType::kProcessSetChange);
  EXPECT_TRUE(Contains(out.responses[0].error_message,
                       "Cannot run add_process_set([0, 1]) because rank(s) 1 have joined"));
}

TEST_F(CoordinatorTest, StalledChangeFailsNamingTheMissingRank) {
  Config config;
  config.stall_check_seconds = 1;
  config.stall_shutdown_seconds = 5;
  Start(3, config);
  EXPECT_TRUE(Round({{Proposal(0, {0, 1})}, {}, {Proposal(2, {0, 1})}}).responses.empty());
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_ + seconds(3)), 3.0);
  EXPECT_TRUE(Round({{}, {}, {}}, seconds(2)).responses.empty());
  EXPECT_TRUE(Contains(LogText(), "'add_process_set([0, 1])' (missing ranks: 1)"));

  ResponseList out = Round({{}, {}, {}}, seconds(100));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, ResponseType::kProcessSetChange);
  EXPECT_TRUE(Contains(out.responses[0].error_message,
                       "Process set change add_process_set([0, 1]) stalled: rank(s) 1 did not "
                       "call it"));
  EXPECT_EQ(coordinator_->OldestWaitSeconds(t0_ + seconds(100)), 0.0);
}

}  // namespace
}  // namespace lockstep
