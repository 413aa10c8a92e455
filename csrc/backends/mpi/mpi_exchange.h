// Negotiation's exchanges over MPI, in log depth: one non-blocking allreduce per cycle
// for the bit vector (MPI_BAND, or with a payload lane a user op of lockstep's own), and for a full
// round a gather and a broadcast (binomial trees in Open MPI), each polled against the peer
// deadline. The star through rank 0 that this replaces cost rank 0 O(N) messages per cycle. A
// collective that outlasts the deadline cannot name the missing rank itself; PeerProbe then finds
// it.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/mpi/peer_probe.h"
#include "negotiation/exchange.h"

namespace lockstep {

class MpiExchange : public Exchange {
 public:
  // Collective over `comm` (duplicates it). `probe`: over the same ranks, shared with
  // the watchdog. Throws Error on every rank when the ranks' and_words differ (a
  // setting that must agree does not).
  MpiExchange(MPI_Comm comm, ExchangeOptions options, std::shared_ptr<PeerProbe> probe);
  ~MpiExchange() override;
  MpiExchange(const MpiExchange&) = delete;
  MpiExchange& operator=(const MpiExchange&) = delete;

  void AndAcrossRanks(std::vector<uint64_t>* words, WaitMode mode) override;
  void CombineAcrossRanks(std::vector<uint64_t>* words, WaitMode mode) override;
  std::vector<Bytes> GatherAtRoot(Bytes mine) override;
  Bytes BroadcastFromRoot(Bytes bytes) override;

 private:
  using Clock = std::chrono::steady_clock;
  void CheckAgreement();
  // Polls `requests` until all complete; throws PeerTimeout once the deadline passes.
  void SwapWithPeer(MPI_Datatype type, int count, WaitMode mode);
  void Wait(MPI_Request* requests, WaitMode mode, int count = 1);
  bool Test(MPI_Request* requests, int count);
  // Rank 0's verdict or a ping while waiting; the deadline once it has passed.
  void CheckPeers(Clock::time_point* deadline);
  // Throws on an MPI error: PeerTimeout naming the lost ranks where ULFM knows them.
  void Check(int rc, const char* what);
  [[noreturn]] void GiveUp(const std::vector<int>& missing, bool reported_by_root);

  MPI_Comm comm_ = MPI_COMM_NULL;
  // CombineAcrossRanks' vector as one element (so MPI never splits it) and its
  // commutative user op; null when options_.combine_words is 0.
  MPI_Datatype vector_type_ = MPI_DATATYPE_NULL;
  MPI_Op combine_op_ = MPI_OP_NULL;
  int rank_ = 0;
  int size_ = 1;
  ExchangeOptions options_;
  std::shared_ptr<PeerProbe> probe_;
  bool abandoned_ = false;  // gave up with a collective in flight: leave MPI be

  // Buffers of the collective in flight: MPI may use them until it completes, so
  // they are leaked with the communicators when it never does.
  struct InFlight {
    std::vector<uint64_t> words, peer_words;
    std::vector<int64_t> sizes;
    int64_t my_size = 0;
    Bytes send, receive, block;
  };
  InFlight* buffers_ = new InFlight;
};

}  // namespace lockstep
