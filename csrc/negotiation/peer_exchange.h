// Negotiation's messages, bounded in time. Every exchange is point to point through
// rank 0: rank 0 knows exactly whose message is missing when one does not arrive, and
// the other ranks know rank 0 is unresponsive when its answer does not come. Nothing
// waits longer than the peer timeout, so a frozen or cut-off host ends in an error
// that names its ranks, on every rank that is left, instead of a hang.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/lockstep.h"

namespace lockstep {

// Some ranks stopped answering; the message names them and their hosts.
class PeerTimeout : public Error {
 public:
  explicit PeerTimeout(const std::string& message) : Error(message, Status::Code::kAborted) {}
};

class PeerExchange {
 public:
  // Sleeps up to the given time, returning true early when local work arrives.
  using IdleWait = std::function<bool(std::chrono::microseconds)>;
  using Bytes = std::vector<uint8_t>;

  // Collective over `comm` (duplicates it). hostnames[r] is rank r's host;
  // timeout_seconds 0 waits forever.
  PeerExchange(MPI_Comm comm, std::vector<std::string> hostnames, double timeout_seconds,
               IdleWait idle_wait, std::chrono::microseconds idle_poll_cap);
  ~PeerExchange();
  PeerExchange(const PeerExchange&) = delete;
  PeerExchange& operator=(const PeerExchange&) = delete;

  // Bitwise AND of every rank's words, on every rank. `idle`: this rank has nothing
  // pending, so it waits coarsely until local work arrives. Throws PeerTimeout.
  void AndAcrossRanks(std::vector<uint64_t>* words, bool idle);
  // Rank 0 gets every rank's bytes (index = rank); the others get nothing.
  std::vector<Bytes> GatherAtRoot(Bytes mine);
  // Every rank gets rank 0's bytes.
  Bytes BroadcastFromRoot(Bytes bytes);

  // The longest any rank waits for another before giving up (rank 0's timeout plus
  // the others' grace); 0 when the timeout is 0 (never).
  static double LongestWaitSeconds(double timeout_seconds);

  // "ranks 2, 3 on node2; rank 4 on node3": for messages.
  std::string DescribeRanks(const std::vector<int>& ranks) const;

 private:
  // One message in flight: a receive waits for its size (probe), then its bytes.
  struct Transfer {
    int peer = 0;
    bool is_receive = false;
    bool probing = false;
    MPI_Request request = MPI_REQUEST_NULL;
    Bytes* buffer = nullptr;  // owned by the exchange's slots below
  };

  std::vector<Bytes> Gather(Bytes mine, int tag, bool idle);
  Bytes Broadcast(Bytes bytes, int tag, bool idle);
  Transfer Send(int peer, Bytes* buffer, int tag);
  Transfer Receive(int peer, Bytes* buffer);
  // Waits for every transfer, up to the deadline; on timeout reports the peers of
  // the unfinished ones (rank 0 also tells the others) and throws.
  void Complete(std::vector<Transfer>* transfers, int tag, bool idle);
  bool Progress(std::vector<Transfer>* transfers, int tag);
  // Rank 0's word that some ranks are gone, if it came; throws PeerTimeout then.
  void CheckForAbortNotice(std::vector<Transfer>* transfers);
  [[noreturn]] void GiveUp(std::vector<Transfer>* transfers, std::vector<int> missing,
                           bool reported_by_root);
  std::vector<int> AddSilentRanks(std::vector<int> missing);
  double GraceSeconds() const;
  std::chrono::steady_clock::duration Timeout() const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<std::string> hostnames_;
  double timeout_seconds_;
  IdleWait idle_wait_;
  std::chrono::microseconds idle_poll_cap_;
  std::vector<Bytes> slots_;  // per peer: the buffer of the message in flight with it
  bool abandoned_ = false;    // gave up with messages in flight: leave the communicator be
};

}  // namespace lockstep
