#include "negotiation/peer_exchange.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagBits = 101;
constexpr int kTagBitsReply = 102;
constexpr int kTagRequests = 103;
constexpr int kTagResponses = 104;
constexpr int kTagAbortNotice = 199;  // rank 0 to the others: these ranks are gone
constexpr int kTagPing = 198;         // rank 0, before its verdict: are you there?
constexpr int kTagPong = 197;         // the answer

void CheckMpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("negotiation failed in ") + what);
}

std::string Seconds(double seconds) {
  std::ostringstream out;
  out << seconds << " s";
  return out.str();
}

}  // namespace

PeerExchange::PeerExchange(MPI_Comm comm, std::vector<std::string> hostnames,
                           double timeout_seconds, IdleWait idle_wait,
                           std::chrono::microseconds idle_poll_cap)
    : hostnames_(std::move(hostnames)),
      timeout_seconds_(timeout_seconds),
      idle_wait_(std::move(idle_wait)),
      idle_poll_cap_(idle_poll_cap) {
  // Its own communicator, so its tags can never match anyone else's messages.
  CheckMpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  slots_.resize(size_);
  hostnames_.resize(size_, "unknown host");
}

PeerExchange::~PeerExchange() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !abandoned_) MPI_Comm_free(&comm_);
}

void PeerExchange::AndAcrossRanks(std::vector<uint64_t>* words, bool idle) {
  const size_t bytes = words->size() * sizeof(uint64_t);
  Bytes mine(bytes);
  std::memcpy(mine.data(), words->data(), bytes);
  std::vector<Bytes> all = Gather(std::move(mine), kTagBits, idle);
  Bytes combined;
  if (rank_ == 0) {
    for (const Bytes& other : all) {
      if (other.size() != bytes)
        throw Error("negotiation: ranks sent bit vectors of different sizes");
      std::vector<uint64_t> theirs(words->size());
      std::memcpy(theirs.data(), other.data(), bytes);
      for (size_t i = 0; i < words->size(); ++i) (*words)[i] &= theirs[i];
    }
    combined.resize(bytes);
    std::memcpy(combined.data(), words->data(), bytes);
  }
  combined = Broadcast(std::move(combined), kTagBitsReply, idle);
  if (combined.size() != bytes) throw Error("negotiation: rank 0 answered with a wrong size");
  std::memcpy(words->data(), combined.data(), bytes);
}

std::vector<PeerExchange::Bytes> PeerExchange::GatherAtRoot(Bytes mine) {
  return Gather(std::move(mine), kTagRequests, /*idle=*/false);
}

PeerExchange::Bytes PeerExchange::BroadcastFromRoot(Bytes bytes) {
  return Broadcast(std::move(bytes), kTagResponses, /*idle=*/false);
}

std::vector<PeerExchange::Bytes> PeerExchange::Gather(Bytes mine, int tag, bool idle) {
  std::vector<Transfer> transfers;
  if (rank_ != 0) {
    slots_[0] = std::move(mine);
    transfers.push_back(Send(0, &slots_[0], tag));
    Complete(&transfers, tag, idle);
    return {};
  }
  for (int peer = 1; peer < size_; ++peer) transfers.push_back(Receive(peer, &slots_[peer]));
  Complete(&transfers, tag, idle);
  std::vector<Bytes> all(size_);
  all[0] = std::move(mine);
  for (int peer = 1; peer < size_; ++peer) all[peer] = std::move(slots_[peer]);
  return all;
}

PeerExchange::Bytes PeerExchange::Broadcast(Bytes bytes, int tag, bool idle) {
  std::vector<Transfer> transfers;
  slots_[0] = std::move(bytes);
  if (rank_ == 0) {
    for (int peer = 1; peer < size_; ++peer) transfers.push_back(Send(peer, &slots_[0], tag));
  } else {
    transfers.push_back(Receive(0, &slots_[0]));
  }
  Complete(&transfers, tag, idle);
  return std::move(slots_[0]);
}

PeerExchange::Transfer PeerExchange::Send(int peer, Bytes* buffer, int tag) {
  Transfer transfer;
  transfer.peer = peer;
  transfer.buffer = buffer;
  CheckMpi(MPI_Isend(buffer->data(), static_cast<int>(buffer->size()), MPI_BYTE, peer, tag, comm_,
                     &transfer.request),
           "MPI_Isend");
  return transfer;
}

PeerExchange::Transfer PeerExchange::Receive(int peer, Bytes* buffer) {
  Transfer transfer;
  transfer.peer = peer;
  transfer.buffer = buffer;
  transfer.is_receive = true;
  transfer.probing = true;  // the size is known once the message is there
  return transfer;
}

bool PeerExchange::Progress(std::vector<Transfer>* transfers, int tag) {
  bool all_done = true;
  for (Transfer& t : *transfers) {
    if (t.probing) {
      int found = 0;
      MPI_Message message;
      MPI_Status status;
      CheckMpi(MPI_Improbe(t.peer, tag, comm_, &found, &message, &status), "MPI_Improbe");
      if (!found) {
        all_done = false;
        continue;
      }
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      t.buffer->resize(count);
      CheckMpi(MPI_Imrecv(t.buffer->data(), count, MPI_BYTE, &message, &t.request), "MPI_Imrecv");
      t.probing = false;
    }
    if (t.request != MPI_REQUEST_NULL) {
      int done = 0;
      CheckMpi(MPI_Test(&t.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) all_done = false;
    }
  }
  if (!all_done && rank_ != 0) CheckForAbortNotice(transfers);
  return all_done;
}

// Ranks reach each exchange at different times. Spinning in MPI would steal the core
// a training thread needs, so after a short spin the wait polls with growing sleeps.
// While this rank has no work, nothing of its own rides on the cycle: it polls
// coarsely (up to cycle_time) until local work arrives.
void PeerExchange::Complete(std::vector<Transfer>* transfers, int tag, bool idle) {
  using std::chrono::microseconds;
  const auto start = Clock::now();
  const auto deadline = timeout_seconds_ > 0 ? start + Timeout() : Clock::time_point::max();
  auto check_deadline = [&] {
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (const Transfer& t : *transfers) {
        if (t.probing || t.request != MPI_REQUEST_NULL) missing.push_back(t.peer);
      }
      GiveUp(transfers, missing, /*reported_by_root=*/false);
    }
  };
  if (idle) {
    auto pause = microseconds(50);
    while (!Progress(transfers, tag)) {
      check_deadline();
      if (idle_wait_(pause)) break;  // local work: from now on, latency counts
      pause = std::min(pause * 2, idle_poll_cap_);
    }
  }
  const auto spin_until = Clock::now() + microseconds(20);
  while (Clock::now() < spin_until) {
    if (Progress(transfers, tag)) return;
  }
  auto pause = microseconds(5);
  while (!Progress(transfers, tag)) {
    check_deadline();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, microseconds(100));
  }
}

// Rank 0 judges first; the others wait a little longer (the grace), so that rank 0's
// verdict (naming the ranks really gone) reaches them before they would blame rank 0.
double PeerExchange::GraceSeconds() const { return std::clamp(timeout_seconds_ / 2, 1.0, 15.0); }

double PeerExchange::LongestWaitSeconds(double timeout_seconds) {
  return timeout_seconds > 0 ? timeout_seconds + std::clamp(timeout_seconds / 2, 1.0, 15.0) : 0;
}

Clock::duration PeerExchange::Timeout() const {
  double seconds = timeout_seconds_ + (rank_ != 0 ? GraceSeconds() : 0.0);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void PeerExchange::CheckForAbortNotice(std::vector<Transfer>* transfers) {
  int found = 0;
  MPI_Status status;
  CheckMpi(MPI_Iprobe(0, kTagPing, comm_, &found, &status), "MPI_Iprobe");
  if (found) {  // zero-byte messages: sent eagerly, so neither call waits
    CheckMpi(MPI_Recv(nullptr, 0, MPI_BYTE, 0, kTagPing, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    CheckMpi(MPI_Send(nullptr, 0, MPI_BYTE, 0, kTagPong, comm_), "MPI_Send");
  }
  CheckMpi(MPI_Iprobe(0, kTagAbortNotice, comm_, &found, &status), "MPI_Iprobe");
  if (!found) return;
  int count = 0;
  MPI_Get_count(&status, MPI_INT, &count);
  std::vector<int> missing(count);
  CheckMpi(MPI_Recv(missing.data(), count, MPI_INT, 0, kTagAbortNotice, comm_, MPI_STATUS_IGNORE),
           "MPI_Recv");
  GiveUp(transfers, missing, /*reported_by_root=*/true);
}

void PeerExchange::GiveUp(std::vector<Transfer>* transfers, std::vector<int> missing,
                          bool reported_by_root) {
  abandoned_ = true;
  for (Transfer& t : *transfers) {
    if (t.request == MPI_REQUEST_NULL) continue;
    if (t.is_receive) MPI_Cancel(&t.request);
    MPI_Request_free(&t.request);
  }
  // MPI may still touch the buffers of abandoned transfers: never free them.
  new std::vector<Bytes>(std::move(slots_));
  slots_.assign(size_, Bytes());
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());

  if (rank_ == 0) {  // tell everyone still answering whom to blame
    missing = AddSilentRanks(std::move(missing));
    auto* notice = new std::vector<int>(missing);  // sent without waiting: never freed
    for (int peer = 1; peer < size_; ++peer) {
      if (std::binary_search(missing.begin(), missing.end(), peer)) continue;
      MPI_Request request;
      if (MPI_Isend(notice->data(), static_cast<int>(notice->size()), MPI_INT, peer,
                    kTagAbortNotice, comm_, &request) == MPI_SUCCESS) {
        MPI_Request_free(&request);
      }
    }
  }
  const std::string limit = Seconds(timeout_seconds_) + " (LOCKSTEP_PEER_TIMEOUT_SECONDS)";
  std::string message = DescribeRanks(missing) + " did not respond within " + limit;
  if (reported_by_root) {
    message += ", as rank 0 found";
  } else if (rank_ != 0) {
    message += " (rank 0 coordinates negotiation)";
  }
  throw PeerTimeout(message +
                    ": frozen, overloaded or cut off from the network. Stopping lockstep on "
                    "every rank that is left; restart the job.");
}

// A rank whose message of this cycle did arrive may have stopped right after sending
// it (one rank of a frozen host often has): ask the others once more, briefly.
std::vector<int> PeerExchange::AddSilentRanks(std::vector<int> missing) {
  std::vector<int> asked;
  for (int peer = 1; peer < size_; ++peer) {
    if (std::binary_search(missing.begin(), missing.end(), peer)) continue;
    MPI_Request request;
    if (MPI_Isend(nullptr, 0, MPI_BYTE, peer, kTagPing, comm_, &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);
      asked.push_back(peer);
    }
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(GraceSeconds() / 2));
  while (!asked.empty() && Clock::now() < deadline) {
    for (auto it = asked.begin(); it != asked.end();) {
      int found = 0;
      MPI_Iprobe(*it, kTagPong, comm_, &found, MPI_STATUS_IGNORE);
      if (found) MPI_Recv(nullptr, 0, MPI_BYTE, *it, kTagPong, comm_, MPI_STATUS_IGNORE);
      it = found ? asked.erase(it) : std::next(it);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  missing.insert(missing.end(), asked.begin(), asked.end());
  std::sort(missing.begin(), missing.end());
  return missing;
}

std::string PeerExchange::DescribeRanks(const std::vector<int>& ranks) const {
  std::vector<std::pair<std::string, std::vector<int>>> by_host;  // in order of first rank
  for (int rank : ranks) {
    const std::string& host = hostnames_.at(rank);
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

}  // namespace lockstep
