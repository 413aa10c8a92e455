// How long negotiation waits for other ranks, and what it says when they do not
// answer: shared by every transport, so the promise (a rank that stops answering is
// named within LOCKSTEP_PEER_TIMEOUT_SECONDS on every rank left) reads the same.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace lockstep {

// Rank 0 judges first; the others wait this much longer, so that rank 0's verdict
// (naming the ranks really gone) reaches them before they would blame rank 0.
double PeerGraceSeconds(double timeout_seconds);
// The longest any rank waits for another before giving up (rank 0's timeout plus the
// others' grace); 0 when the timeout is 0 (never).
double LongestPeerWaitSeconds(double timeout_seconds);
// This rank's wait: the timeout at rank 0, plus the grace elsewhere; max() for 0.
std::chrono::steady_clock::duration PeerWait(double timeout_seconds, int rank);

// The sleep after `pause` in a wait for other ranks that has lasted `waited`: 5 us
// doubling to 100 us; then, between two ranks, an eighth of the time waited, at most
// 500 us. A rank far ahead of the other (still computing) so wakes about 38 times in
// 10 ms rather than about 104, and notices its arrival at most an eighth of its wait
// late. With more ranks the sleeps stay at 100 us: a non-blocking collective among
// them takes several rounds, each of which waits for every rank's next poll.
constexpr std::chrono::microseconds kFirstBusyPause{5};
std::chrono::microseconds NextBusyPause(std::chrono::microseconds pause,
                                        std::chrono::steady_clock::duration waited, int ranks);

// "ranks 2, 3 on node2; rank 4 on node3"; hostnames[r] is rank r's host.
std::string DescribeRanksOnHosts(const std::vector<int>& ranks,
                                 const std::vector<std::string>& hostnames);
// The PeerTimeout message. `reported_by_root`: rank 0's verdict reached this rank;
// otherwise, on a rank other than 0, the silent rank is rank 0 itself.
std::string PeerTimeoutMessage(const std::vector<int>& missing,
                               const std::vector<std::string>& hostnames, double timeout_seconds,
                               int rank, bool reported_by_root);

}  // namespace lockstep
