#include "negotiation/peer_deadline.h"

#include <algorithm>
#include <sstream>
#include <utility>

namespace lockstep {

double PeerGraceSeconds(double timeout_seconds) {
  return std::clamp(timeout_seconds / 2, 1.0, 15.0);
}

double LongestPeerWaitSeconds(double timeout_seconds) {
  return timeout_seconds > 0 ? timeout_seconds + PeerGraceSeconds(timeout_seconds) : 0;
}

std::chrono::steady_clock::duration PeerWait(double timeout_seconds, int rank) {
  using Duration = std::chrono::steady_clock::duration;
  if (timeout_seconds <= 0) return Duration::max();
  const double seconds = timeout_seconds + (rank != 0 ? PeerGraceSeconds(timeout_seconds) : 0.0);
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

std::string DescribeRanksOnHosts(const std::vector<int>& ranks,
                                 const std::vector<std::string>& hostnames) {
  std::vector<std::pair<std::string, std::vector<int>>> by_host;  // in order of first rank
  for (int rank : ranks) {
    const std::string host = rank >= 0 && static_cast<size_t>(rank) < hostnames.size()
                                 ? hostnames[rank]
                                 : std::string("unknown host");
    auto it = std::find_if(by_host.begin(), by_host.end(),
                           [&](const auto& entry) { return entry.first == host; });
    if (it == by_host.end()) it = by_host.insert(by_host.end(), {host, {}});
    it->second.push_back(rank);
  }
  std::ostringstream out;
  for (size_t h = 0; h < by_host.size(); ++h) {
    const auto& [host, members] = by_host[h];
    out << (h ? "; " : "") << (members.size() == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < members.size(); ++i) out << (i ? ", " : "") << members[i];
    out << " on " << host;
  }
  return out.str();
}

std::string PeerTimeoutMessage(const std::vector<int>& missing,
                               const std::vector<std::string>& hostnames, double timeout_seconds,
                               int rank, bool reported_by_root) {
  std::ostringstream limit;
  limit << timeout_seconds << " s (LOCKSTEP_PEER_TIMEOUT_SECONDS)";
  std::string message =
      DescribeRanksOnHosts(missing, hostnames) + " did not respond within " + limit.str();
  if (reported_by_root) {
    message += ", as rank 0 found";
  } else if (rank != 0) {
    message += " (rank 0 coordinates negotiation)";
  }
  return message +
         ": frozen, overloaded or cut off from the network. Stopping lockstep on every rank that "
         "is left; restart the job.";
}

std::chrono::microseconds NextBusyPause(std::chrono::microseconds pause,
                                        std::chrono::steady_clock::duration waited, int ranks) {
  using std::chrono::microseconds;
  const microseconds doubled = std::min(pause * 2, microseconds(100));
  if (ranks > 2) return doubled;
  const microseconds share = std::chrono::duration_cast<microseconds>(waited) / 8;
  return std::min(std::max(doubled, share), microseconds(500));
}

}  // namespace lockstep
