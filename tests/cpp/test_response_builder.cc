// Building the response for one tensor from every rank's request: the sizes layout of
// each op kind, an error naming tensor, ranks and values for each kind of mismatch,
// and which ops may proceed while some ranks have joined.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "negotiation/response_builder.h"

namespace lockstep {
namespace {

Request MakeRequest(OpType op, int rank, std::vector<int64_t> shape) {
  Request r;
  r.rank = rank;
  r.op = op;
  r.name = "t";
  r.shape = std::move(shape);
  return r;
}

// One request per rank (copies of `base` with the rank set), as pointers.
class Ranks {
 public:
  Ranks(const Request& base, int size) : requests_(size, base) {
    for (int r = 0; r < size; ++r) requests_[r].rank = r;
  }
  Request& operator[](int rank) { return requests_[rank]; }
  std::vector<const Request*> Pointers() const {
    std::vector<const Request*> out;
    for (const Request& r : requests_) out.push_back(&r);
    return out;
  }
  Response Build() const { return BuildResponse(Pointers()); }

 private:
  std::vector<Request> requests_;
};

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not in: " << text;
}

TEST(BuildResponseTest, AllreduceCopiesParametersAndCountsElements) {
  Request base = MakeRequest(OpType::kAllreduce, 0, {2, 3});
  base.dtype = DataType::kFloat64;
  base.reduce_op = ReduceOp::kSum;
  base.prescale = 0.5;
  base.postscale = 2.0;
  base.device = 1;
  base.group_id = 7;
  base.group_size = 2;
  Response r = Ranks(base, 3).Build();
  EXPECT_EQ(r.type, ResponseType::kAllreduce);
  EXPECT_EQ(r.dtype, DataType::kFloat64);
  EXPECT_EQ(r.reduce_op, ReduceOp::kSum);
  EXPECT_EQ(r.prescale, 0.5);
  EXPECT_EQ(r.postscale, 2.0);
  EXPECT_EQ(r.device, 1);
  EXPECT_EQ(r.group_id, 7);
  EXPECT_EQ(r.names, (std::vector<std::string>{"t"}));
  EXPECT_EQ(r.sizes, (std::vector<int64_t>{6}));
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(r.error_message.empty());
}

TEST(BuildResponseTest, ReducescatterAndBroadcastCountElements) {
  Request scatter = MakeRequest(OpType::kReducescatter, 0, {4, 5});
  scatter.reduce_op = ReduceOp::kAverage;
  Response r = Ranks(scatter, 2).Build();
  EXPECT_EQ(r.type, ResponseType::kReducescatter);
  EXPECT_EQ(r.reduce_op, ReduceOp::kAverage);
  EXPECT_EQ(r.sizes, (std::vector<int64_t>{20}));
  EXPECT_EQ(r.shape, (std::vector<int64_t>{4, 5}));

  Request broadcast = MakeRequest(OpType::kBroadcast, 0, {7});
  broadcast.root_rank = 2;
  r = Ranks(broadcast, 3).Build();
  EXPECT_EQ(r.type, ResponseType::kBroadcast);
  EXPECT_EQ(r.root_rank, 2);
  EXPECT_EQ(r.sizes, (std::vector<int64_t>{7}));

  // A scalar has one element.
  r = Ranks(MakeRequest(OpType::kAllreduce, 0, {}), 2).Build();
  EXPECT_EQ(r.sizes, (std::vector<int64_t>{1}));
}

TEST(BuildResponseTest, AllgatherListsEachRanksFirstDimension) {
  Ranks ranks(MakeRequest(OpType::kAllgather, 0, {2, 3}), 3);
  ranks[1].shape = {0, 3};
  ranks[2].shape = {5, 3};
  Response r = ranks.Build();
  EXPECT_EQ(r.type, ResponseType::kAllgather);
  EXPECT_EQ(r.sizes, (std::vector<int64_t>{2, 0, 5}));
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
}

TEST(BuildResponseTest, ResultsLargerThanMemoryOrInt64AreRefusedForEveryRank) {
  // Each rank's part fits; together they exceed any host's memory.
  Ranks gather(MakeRequest(OpType::kAllgather, 0, {int64_t{1} << 40, 1024}), 3);
  Response r = gather.Build();
  ASSERT_EQ(r.type, ResponseType::kError);
  EXPECT_NE(r.error_message.find("allgather of tensor 't'"), std::string::npos) << r.error_message;
  EXPECT_NE(r.error_message.find("memory"), std::string::npos) << r.error_message;

  Ranks wraps(MakeRequest(OpType::kAllgather, 0, {int64_t{1} << 61, 2}), 3);
  r = wraps.Build();
  ASSERT_EQ(r.type, ResponseType::kError);
  EXPECT_NE(r.error_message.find("more than 2^63 bytes"), std::string::npos) << r.error_message;

  // Alltoall: what one rank receives counts, not what it sends.
  Ranks all(MakeRequest(OpType::kAlltoall, 0, {int64_t{1} << 40, 1024}), 2);
  all[0].splits = {int64_t{1} << 40, 0};
  all[1].splits = {int64_t{1} << 40, 0};
  r = all.Build();
  ASSERT_EQ(r.type, ResponseType::kError);
  EXPECT_NE(r.error_message.find("alltoall of tensor 't'"), std::string::npos) << r.error_message;

  Ranks small(MakeRequest(OpType::kAllgather, 0, {1000, 1024}), 3);
  EXPECT_EQ(small.Build().type, ResponseType::kAllgather);
}

TEST(BuildResponseTest, AlltoallBuildsTheSplitMatrix) {
  Ranks ranks(MakeRequest(OpType::kAlltoall, 0, {3, 2}), 2);
  ranks[0].splits = {1, 2};
  ranks[1].shape = {4, 2};
  ranks[1].splits = {4, 0};
  Response r = ranks.Build();
  EXPECT_EQ(r.type, ResponseType::kAlltoall);
  EXPECT_EQ(r.sizes, (std::vector<int64_t>{1, 2, 4, 0}));  // row = sender
}

TEST(BuildResponseTest, AlltoallWithoutSplitsSplitsEqually) {
  Ranks ranks(MakeRequest(OpType::kAlltoall, 0, {6}), 3);
  ranks[1].shape = {3};
  ranks[2].shape = {0};
  EXPECT_EQ(ranks.Build().sizes, (std::vector<int64_t>{2, 2, 2, 1, 1, 1, 0, 0, 0}));

  ranks[1].splits = {3, 0, 0};  // one explicit row among default ones
  EXPECT_EQ(ranks.Build().sizes, (std::vector<int64_t>{2, 2, 2, 3, 0, 0, 0, 0, 0}));
}

TEST(BuildResponseTest, BarrierHasNoSizes) {
  Request barrier = MakeRequest(OpType::kBarrier, 0, {});
  barrier.name = "barrier";
  Response r = Ranks(barrier, 2).Build();
  EXPECT_EQ(r.type, ResponseType::kBarrier);
  EXPECT_EQ(r.names, (std::vector<std::string>{"barrier"}));
  EXPECT_TRUE(r.sizes.empty());
}

struct MismatchCase {
  const char* what;
  OpType op;
  std::function<void(Request&)> reference;  // applied to every rank
  std::function<void(Request&)> odd;        // then to rank 2 only
  const char* expected;                     // "rank 0 sent ... but rank 2 sent ..."
};

void CheckMismatch(const MismatchCase& c) {
  SCOPED_TRACE(c.what);
  Request base = MakeRequest(c.op, 0, {2, 3});
  c.reference(base);
  Ranks ranks(base, 3);
  c.odd(ranks[2]);
  Response r = ranks.Build();
  EXPECT_EQ(r.type, ResponseType::kError);
  EXPECT_EQ(r.names, (std::vector<std::string>{"t"}));
  EXPECT_TRUE(Contains(r.error_message, "Mismatched " + std::string(c.what)));
  EXPECT_TRUE(Contains(r.error_message, "tensor 't'"));
  EXPECT_TRUE(Contains(r.error_message, c.expected));
}

void Nothing(Request&) {}

TEST(BuildResponseTest, EveryMismatchNamesTensorRanksAndValues) {
  const std::vector<MismatchCase> cases = {
      {"operations", OpType::kAllreduce, Nothing, [](Request& r) { r.op = OpType::kAllgather; },
       "rank 0 sent allreduce but rank 2 sent allgather"},
      {"data types", OpType::kAllgather, Nothing, [](Request& r) { r.dtype = DataType::kInt32; },
       "rank 0 sent float32 but rank 2 sent int32"},
      {"devices", OpType::kBroadcast, Nothing, [](Request& r) { r.device = 0; },
       "rank 0 sent host memory but rank 2 sent GPU memory"},
      {"reduce ops", OpType::kAllreduce, [](Request& r) { r.reduce_op = ReduceOp::kSum; },
       [](Request& r) { r.reduce_op = ReduceOp::kMax; }, "rank 0 sent Sum but rank 2 sent Max"},
      {"prescale factors", OpType::kReducescatter, [](Request& r) { r.prescale = 0.5; },
       [](Request& r) { r.prescale = 0.25; }, "rank 0 sent 0.5 but rank 2 sent 0.25"},
      {"postscale factors", OpType::kAllreduce, [](Request& r) { r.postscale = 2; },
       [](Request& r) { r.postscale = 3; }, "rank 0 sent 2 but rank 2 sent 3"},
      {"shapes", OpType::kAllreduce, Nothing,
       [](Request& r) {
         r.shape = {3, 2};
       },
       "rank 0 sent [2, 3] but rank 2 sent [3, 2]"},
      {"shapes", OpType::kReducescatter, Nothing,
       [](Request& r) {
         r.shape = {4, 3};
       },
       "rank 0 sent [2, 3] but rank 2 sent [4, 3]"},
      {"shapes", OpType::kBroadcast, Nothing, [](Request& r) { r.shape = {2}; },
       "rank 0 sent [2, 3] but rank 2 sent [2]"},
      {"root ranks", OpType::kBroadcast, Nothing, [](Request& r) { r.root_rank = 1; },
       "rank 0 sent 0 but rank 2 sent 1"},
      {"shapes beyond the first dimension", OpType::kAllgather, Nothing,
       [](Request& r) {
         r.shape = {5, 4};
       },
       "rank 0 sent [3] but rank 2 sent [4]"},
      {"shapes beyond the first dimension", OpType::kAlltoall, Nothing,
       [](Request& r) {
         r.shape = {2, 3, 1};
       },
       "rank 0 sent [3] but rank 2 sent [3, 1]"},
  };
  for (const MismatchCase& c : cases) CheckMismatch(c);
}

TEST(BuildResponseTest, ReferenceIsTheFirstRankThatHasNotJoined) {
  Request base = MakeRequest(OpType::kAllreduce, 0, {4});
  base.reduce_op = ReduceOp::kSum;
  Ranks ranks(base, 3);
  ranks[2].dtype = DataType::kInt64;
  std::vector<const Request*> by_rank = ranks.Pointers();
  by_rank[0] = nullptr;
  Response r = BuildResponse(by_rank);
  EXPECT_EQ(r.type, ResponseType::kError);
  EXPECT_TRUE(Contains(r.error_message, "rank 1 sent float32 but rank 2 sent int64"));
}

TEST(BuildResponseTest, JoinedRanksAllowedForAllreduceSumAndAverage) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    SCOPED_TRACE(ReduceOpName(op));
    Request base = MakeRequest(OpType::kAllreduce, 0, {2, 2});
    base.reduce_op = op;
    Ranks ranks(base, 3);
    std::vector<const Request*> by_rank = ranks.Pointers();
    by_rank[0] = nullptr;
    by_rank[2] = nullptr;
    Response r = BuildResponse(by_rank);
    EXPECT_EQ(r.type, ResponseType::kAllreduce);
    EXPECT_EQ(r.reduce_op, op);
    EXPECT_EQ(r.sizes, (std::vector<int64_t>{4}));
    EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 2}));
  }
}

Response BuildWithJoined(const Request& base, const std::vector<int>& joined) {
  Ranks ranks(base, 4);
  std::vector<const Request*> by_rank = ranks.Pointers();
  for (int r : joined) by_rank[r] = nullptr;
  return BuildResponse(by_rank);
}

TEST(BuildResponseTest, JoinedRanksRejectedForEverythingElse) {
  std::vector<Request> rejected;
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    rejected.push_back(MakeRequest(OpType::kAllreduce, 0, {4}));
    rejected.back().reduce_op = op;
  }
  for (OpType op : {OpType::kAllgather, OpType::kBroadcast, OpType::kAlltoall,
                    OpType::kReducescatter, OpType::kBarrier}) {
    rejected.push_back(MakeRequest(op, 0, {4}));
    rejected.back().reduce_op = ReduceOp::kSum;
  }
  for (const Request& base : rejected) {
    SCOPED_TRACE(std::string(OpTypeName(base.op)) + " " + ReduceOpName(base.reduce_op));
    Response r = BuildWithJoined(base, {1, 3});
    EXPECT_EQ(r.type, ResponseType::kError);
    EXPECT_EQ(r.names, (std::vector<std::string>{"t"}));
    EXPECT_TRUE(Contains(r.error_message, std::string("Cannot run ") + OpTypeName(base.op) +
                                              " of tensor 't' because rank(s) 1 3 have joined"));
  }
}

TEST(ErrorResponseTest, CarriesNameAndMessage) {
  Response r = ErrorResponse("w", "bad things");
  EXPECT_EQ(r.type, ResponseType::kError);
  EXPECT_EQ(r.names, (std::vector<std::string>{"w"}));
  EXPECT_EQ(r.error_message, "bad things");
  EXPECT_TRUE(r.sizes.empty());
}

}  // namespace
}  // namespace lockstep
