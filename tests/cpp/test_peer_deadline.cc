// What negotiation waits and says when peers stop answering, whatever the transport.
#include <gtest/gtest.h>

#include "negotiation/peer_deadline.h"

namespace lockstep {
namespace {

TEST(PeerDeadline, RankZeroJudgesFirstAndTheOthersWaitItsGraceLonger) {
  using std::chrono::duration;
  EXPECT_DOUBLE_EQ(duration<double>(PeerWait(4, 0)).count(), 4.0);
  EXPECT_DOUBLE_EQ(duration<double>(PeerWait(4, 3)).count(), 6.0);
  EXPECT_EQ(PeerWait(0, 1), std::chrono::steady_clock::duration::max());
  EXPECT_DOUBLE_EQ(PeerGraceSeconds(0.5), 1.0);   // at least a second
  EXPECT_DOUBLE_EQ(PeerGraceSeconds(100), 15.0);  // at most 15
  EXPECT_DOUBLE_EQ(LongestPeerWaitSeconds(60), 75.0);
  EXPECT_DOUBLE_EQ(LongestPeerWaitSeconds(0), 0.0);
}

TEST(PeerDeadline, RanksAreGroupedByHost) {
  const std::vector<std::string> hosts{"node1", "node1", "node2", "node2", "node3"};
  EXPECT_EQ(DescribeRanksOnHosts({2, 3, 4}, hosts), "ranks 2, 3 on node2; rank 4 on node3");
  EXPECT_EQ(DescribeRanksOnHosts({7}, hosts), "rank 7 on unknown host");
}

TEST(PeerDeadline, MessageSaysWhoFoundIt) {
  const std::vector<std::string> hosts{"a", "b", "c"};
  const std::string by_root = PeerTimeoutMessage({2}, hosts, 4, 1, true);
  EXPECT_EQ(by_root.rfind("rank 2 on c did not respond within 4 s (LOCKSTEP_PEER_TIMEOUT_SECONDS)"
                          ", as rank 0 found: frozen",
                          0),
            0u)
      << by_root;
  const std::string blame_root = PeerTimeoutMessage({0}, hosts, 4, 1, false);
  EXPECT_NE(blame_root.find("rank 0 on a did not respond within 4 s "
                            "(LOCKSTEP_PEER_TIMEOUT_SECONDS) (rank 0 coordinates"),
            std::string::npos)
      << blame_root;
  EXPECT_NE(PeerTimeoutMessage({1}, hosts, 4, 0, false).find("restart the job."),
            std::string::npos);
}

// Polls (wake-ups) of a wait for other ranks that lasts `total`, sleeping as
// MpiExchange::Wait does (the sleeps themselves, not the time spent polling).
int PollsToWait(std::chrono::microseconds total, int ranks) {
  std::chrono::microseconds pause = kFirstBusyPause, waited{0};
  int polls = 0;
  while (waited < total) {
    waited += pause;
    ++polls;
    pause = NextBusyPause(pause, waited, ranks);
  }
  return polls;
}

TEST(PeerDeadline, ShortWaitsPollFinelyAndLongOnesAFewDozenTimes) {
  using std::chrono::microseconds;
  // Ranks a few microseconds apart (a synchronous op on every rank) keep the fine steps.
  std::vector<int64_t> first;
  microseconds pause = kFirstBusyPause, waited{0};
  for (int i = 0; i < 7; ++i) {
    first.push_back(pause.count());
    waited += pause;
    pause = NextBusyPause(pause, waited, 2);
  }
  EXPECT_EQ(first, (std::vector<int64_t>{5, 10, 20, 40, 80, 100, 100}));
  // A rank 10 ms ahead of the other (it is computing) wakes far fewer than the ~100
  // times of a 100 us cap; the sleep never passes 500 us, nor an eighth of the wait.
  EXPECT_LE(PollsToWait(microseconds(10000), 2), 40);
  EXPECT_GE(PollsToWait(microseconds(10000), 2), 20);
  EXPECT_EQ(NextBusyPause(microseconds(500), std::chrono::seconds(5), 2), microseconds(500));
  EXPECT_EQ(NextBusyPause(microseconds(100), microseconds(1600), 2), microseconds(200));
  // Among more ranks each round of the collective waits for every rank's next poll:
  // the sleeps stay at 100 us.
  EXPECT_EQ(NextBusyPause(microseconds(100), std::chrono::seconds(5), 3), microseconds(100));
  EXPECT_GE(PollsToWait(microseconds(10000), 3), 100);
}

}  // namespace
}  // namespace lockstep
