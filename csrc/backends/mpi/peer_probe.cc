#include "backends/mpi/peer_probe.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "lockstep/values.h"

namespace lockstep {
namespace {

constexpr int kTagPing = 198;     // rank 0 to the others: are you there?
constexpr int kTagPong = 197;     // the answer
constexpr int kTagVerdict = 199;  // rank 0 to the others: these ranks are gone (none: wait on)

}  // namespace

PeerProbe::PeerProbe(MPI_Comm comm) {
  if (MPI_Comm_dup(comm, &comm_) != MPI_SUCCESS) throw Error("MPI_Comm_dup failed");
  // A peer that is gone must make a call fail, not end the process.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

PeerProbe::~PeerProbe() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

std::vector<int> PeerProbe::FindSilent(std::chrono::steady_clock::duration wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> asked;
  for (int peer = 1; peer < size_; ++peer) {
    MPI_Request request;  // zero bytes go eagerly: nothing to wait for
    if (MPI_Isend(nullptr, 0, MPI_BYTE, peer, kTagPing, comm_, &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
    asked.push_back(peer);
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!asked.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto it = asked.begin(); it != asked.end();) {
      int found = 0;
      MPI_Iprobe(*it, kTagPong, comm_, &found, MPI_STATUS_IGNORE);
      if (found) MPI_Recv(nullptr, 0, MPI_BYTE, *it, kTagPong, comm_, MPI_STATUS_IGNORE);
      it = found ? asked.erase(it) : std::next(it);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return asked;
}

void PeerProbe::SendVerdict(const std::vector<int>& silent) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Sent without waiting, so the buffer must outlive this call: never freed (this runs
  // at most once per job when someone is silent, and rarely otherwise).
  auto* notice = new std::vector<int>(silent);
  for (int peer = 1; peer < size_; ++peer) {
    if (std::binary_search(silent.begin(), silent.end(), peer)) continue;
    MPI_Request request;
    if (MPI_Isend(notice->data(), static_cast<int>(notice->size()), MPI_INT, peer, kTagVerdict,
                  comm_, &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
  }
}

PeerProbe::Notice PeerProbe::Poll(std::vector<int>* silent) {
  std::lock_guard<std::mutex> lock(mutex_);
  int pinged = 0;
  MPI_Status status;
  MPI_Iprobe(0, kTagPing, comm_, &pinged, &status);
  if (pinged) {  // zero-byte messages: sent eagerly, so neither call waits
    MPI_Recv(nullptr, 0, MPI_BYTE, 0, kTagPing, comm_, MPI_STATUS_IGNORE);
    MPI_Send(nullptr, 0, MPI_BYTE, 0, kTagPong, comm_);
  }
  int found = 0;
  MPI_Iprobe(0, kTagVerdict, comm_, &found, &status);
  if (!found) return pinged ? Notice::kAsked : Notice::kNone;
  int count = 0;
  MPI_Get_count(&status, MPI_INT, &count);
  silent->assign(count, 0);
  MPI_Recv(silent->data(), count, MPI_INT, 0, kTagVerdict, comm_, MPI_STATUS_IGNORE);
  return silent->empty() ? Notice::kKeepWaiting : Notice::kVerdict;
}

}  // namespace lockstep
