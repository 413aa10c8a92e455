// The controller (one negotiation cycle as every rank runs it) on an in-process
// transport: ranks are threads, so cycles, the response cache and the exchanges per
// cycle can be checked exactly. Multi-rank behaviour over MPI is tested under mpirun.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "in_process_exchange.h"
#include "negotiation/controller.h"
#include "wire/process_set_change.h"

namespace lockstep {
namespace {

Request Allreduce(int rank, const std::string& name, DataType dtype = DataType::kFloat32) {
  Request r;
  r.rank = rank;
  r.op = OpType::kAllreduce;
  r.dtype = dtype;
  r.reduce_op = ReduceOp::kSum;
  r.name = name;
  r.shape = {4};
  return r;
}

Request Proposal(int rank, std::vector<int> ranks) {
  ProcessSetChange change;
  change.ranks = std::move(ranks);
  Request r;
  r.rank = rank;
  r.op = OpType::kProcessSetChange;
  r.name = DescribeChange(change);
  r.change = EncodeChange(change);
  return r;
}

std::vector<std::string> Names(const NegotiationResult& result) {
  std::vector<std::string> names;
  for (const Response& r : result.responses) {
    names.push_back(r.type == ResponseType::kError ? "error:" + r.names.at(0) : r.names.at(0));
  }
  return names;
}

// `size` ranks, each a Controller on the in-process transport.
class Job {
 public:
  explicit Job(int size, Config config = Config()) : hub_(size) {
    for (int rank = 0; rank < size; ++rank) {
      loggers_.push_back(std::make_unique<Logger>(LogLevel::kError, rank));
      Topology topology;
      topology.rank = rank;
      topology.size = size;
      controllers_.push_back(std::make_unique<Controller>(
          std::make_unique<InProcessExchange>(hub_, rank), topology, config, *loggers_.back()));
    }
  }
  const InProcessHub& hub() const { return hub_; }

  // Runs `step` on every rank at once (one thread each); results by rank.
  std::vector<NegotiationResult> OnEveryRank(
      const std::function<NegotiationResult(int, Controller&)>& step) {
    std::vector<NegotiationResult> results(controllers_.size());
    std::vector<std::string> errors(controllers_.size());
    std::vector<std::thread> threads;
    for (size_t rank = 0; rank < controllers_.size(); ++rank) {
      threads.emplace_back([&, rank] {
        try {
          results[rank] = step(static_cast<int>(rank), *controllers_[rank]);
        } catch (const std::exception& e) {
          errors[rank] = e.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    for (const std::string& error : errors) EXPECT_EQ(error, "");
    return results;
  }

  // Every rank admits `requests(rank)` and runs one cycle with work pending.
  std::vector<NegotiationResult> Cycle(const std::function<std::vector<Request>(int)>& requests) {
    return OnEveryRank([&](int rank, Controller& controller) {
      controller.Admit(requests(rank));
      return controller.Negotiate(false, false, true);
    });
  }

 private:
  InProcessHub hub_;
  std::vector<std::unique_ptr<Logger>> loggers_;
  std::vector<std::unique_ptr<Controller>> controllers_;
};

TEST(Controller, FirstCycleGoesThroughTheCoordinatorThenTheCacheTakesOneExchange) {
  Job job(3);
  auto first = job.Cycle([](int rank) { return std::vector<Request>{Allreduce(rank, "x")}; });
  for (const auto& result : first) {
    EXPECT_TRUE(result.full_round);
    EXPECT_EQ(result.cached_responses, 0);
    EXPECT_EQ(Names(result), std::vector<std::string>{"x"});
  }
  EXPECT_EQ(job.hub().bit_rounds(), 1);
  EXPECT_EQ(job.hub().gather_rounds(), 1);
  EXPECT_EQ(job.hub().broadcast_rounds(), 1);

  auto second = job.Cycle([](int rank) { return std::vector<Request>{Allreduce(rank, "x")}; });
  for (const auto& result : second) {
    EXPECT_FALSE(result.full_round);
    EXPECT_EQ(result.cached_responses, 1);
    EXPECT_EQ(Names(result), std::vector<std::string>{"x"});
  }
  // The steady state: one AND across ranks per cycle, nothing else.
  EXPECT_EQ(job.hub().bit_rounds(), 2);
  EXPECT_EQ(job.hub().gather_rounds(), 1);
  EXPECT_EQ(job.hub().broadcast_rounds(), 1);
}

TEST(Controller, CachedTensorRunsOnlyOnceEveryRankHasIt) {
  Job job(3);
  job.Cycle([](int rank) { return std::vector<Request>{Allreduce(rank, "x")}; });
  auto partial = job.Cycle([](int rank) {
    return rank == 2 ? std::vector<Request>{} : std::vector<Request>{Allreduce(rank, "x")};
  });
  for (const auto& result : partial) {
    EXPECT_TRUE(result.responses.empty());
    EXPECT_TRUE(result.any_rank_waiting);
  }
  auto complete = job.Cycle([](int rank) {
    return rank == 2 ? std::vector<Request>{Allreduce(rank, "x")} : std::vector<Request>{};
  });
  for (const auto& result : complete) {
    EXPECT_EQ(Names(result), std::vector<std::string>{"x"});
    EXPECT_EQ(result.cached_responses, 1);
  }
}

TEST(Controller, EveryRankGetsTheSameOrderWhateverItsSubmissionOrder) {
  Job job(4);
  auto results = job.Cycle([](int rank) {
    std::vector<Request> batch{Allreduce(rank, "a"), Allreduce(rank, "b"), Allreduce(rank, "c")};
    if (rank % 2) std::swap(batch.front(), batch.back());
    return batch;
  });
  for (const auto& result : results) EXPECT_EQ(Names(result), Names(results.front()));
  EXPECT_EQ(results.front().responses.size(), 3u);
}

TEST(Controller, MismatchFailsOnEveryRank) {
  Job job(3);
  auto results = job.Cycle([](int rank) {
    return std::vector<Request>{
        Allreduce(rank, "x", rank == 1 ? DataType::kFloat64 : DataType::kFloat32)};
  });
  for (const auto& result : results) {
    ASSERT_EQ(Names(result), std::vector<std::string>{"error:x"});
    EXPECT_NE(result.responses.front().error_message.find("rank 1"), std::string::npos)
        << result.responses.front().error_message;
  }
}

TEST(Controller, DisagreeingChangeProposalsFailOnEveryRank) {
  Job job(3);
  auto results = job.Cycle([](int rank) {
    return std::vector<Request>{
        Proposal(rank, rank == 2 ? std::vector<int>{0, 2} : std::vector<int>{0, 1})};
  });
  for (const auto& result : results) {
    ASSERT_EQ(result.responses.size(), 1u);
    const Response& response = result.responses.front();
    EXPECT_EQ(response.type, ResponseType::kProcessSetChange);
    EXPECT_TRUE(response.change.empty());
    EXPECT_NE(response.error_message.find("rank 0 called add_process_set([0, 1]) but rank 2 "
                                          "called add_process_set([0, 2])"),
              std::string::npos)
        << response.error_message;
  }
}

TEST(Controller, ChangesAreNeverCached) {
  Job job(2);
  for (int round = 0; round < 2; ++round) {
    auto results = job.Cycle([](int rank) { return std::vector<Request>{Proposal(rank, {1})}; });
    for (const auto& result : results) {
      EXPECT_TRUE(result.full_round);
      EXPECT_EQ(result.cached_responses, 0);
      ASSERT_EQ(result.responses.size(), 1u);
      EXPECT_EQ(result.responses.front().type, ResponseType::kProcessSetChange);
      EXPECT_EQ(DecodeChange(result.responses.front().change).ranks, std::vector<int>{1});
    }
  }
  EXPECT_EQ(job.hub().gather_rounds(), 2);  // the second went through the coordinator too
}

TEST(Controller, ShutdownOnOneRankReachesEveryRank) {
  Job job(3);
  auto results = job.OnEveryRank([](int rank, Controller& controller) {
    return controller.Negotiate(/*shutdown_requested=*/rank == 1, false, false);
  });
  for (const auto& result : results) EXPECT_TRUE(result.shutdown);
}

TEST(Controller, IdleCycleNeedsNoCoordinator) {
  Job job(2);
  auto results = job.OnEveryRank(
      [](int, Controller& controller) { return controller.Negotiate(false, false, false); });
  for (const auto& result : results) {
    EXPECT_FALSE(result.full_round);
    EXPECT_FALSE(result.any_rank_waiting);
    EXPECT_TRUE(result.responses.empty());
  }
  EXPECT_EQ(job.hub().bit_rounds(), 1);
  EXPECT_EQ(job.hub().gather_rounds(), 0);
}

TEST(Controller, ARankThatNeverComesEndsTheRoundWithPeerTimeout) {
  InProcessHub hub(2, std::chrono::milliseconds(50));
  Logger logger(LogLevel::kError, 0);
  Topology topology;
  topology.size = 2;
  Controller controller(std::make_unique<InProcessExchange>(hub, 0), topology, Config(), logger);
  EXPECT_THROW(controller.Negotiate(false, false, true), PeerTimeout);
}

}  // namespace
}  // namespace lockstep
