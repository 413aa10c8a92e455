// The seam between negotiation and the transport that carries it: the exchanges one
// cycle needs among a process set's ranks. The MPI implementation lives
// in backends/mpi/mpi_exchange; unit tests use an in-process one. Every call is
// bounded by the peer timeout: a rank that stops answering ends in PeerTimeout naming
// it, on every rank that is left, never in a hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/values.h"

namespace lockstep {

// Some ranks stopped answering; the message names them and their hosts.
class PeerTimeout : public Error {
 public:
  explicit PeerTimeout(const std::string& message) : Error(message, Status::Code::kAborted) {}
};

// Sleeps up to the given time, returning true early when local work arrives.
using IdleWait = std::function<bool(std::chrono::microseconds)>;

// How CombineAcrossRanks combines two ranks' vectors of `words` words:
// inout = combine(in, inout); commutative and associative. A plain function, because
// MPI's user ops take no context.
using VectorCombine = void (*)(const uint64_t* in, uint64_t* inout, size_t words);

// What every transport's exchange is made with.
struct ExchangeOptions {
  std::vector<std::string> hostnames;  // [r]: rank r's host, for messages
  double timeout_seconds = 0;          // LOCKSTEP_PEER_TIMEOUT_SECONDS; 0 waits forever
  IdleWait idle_wait;
  std::chrono::microseconds idle_poll_cap{1000};  // longest sleep between polls while idle
  size_t and_words = 0;  // AndAcrossRanks' vector length, the same on every rank
  // CombineAcrossRanks' vector length, the same on every rank, and how it combines
  // (backends/host/payload_lane's CombineLaneVectors); 0: it is never called
  // (negotiation carries no payload lane).
  size_t combine_words = 0;
  VectorCombine combine = nullptr;
  // This host runs more ranks than it has cores (the transport sets it): a rank that
  // spins while waiting yields between polls, so that a peer sharing its core runs.
  bool cores_shared = false;
};

// How a rank waits for the others in an exchange.
enum class WaitMode {
  kIdle,     // nothing pending here: poll coarsely until local work arrives
  kPending,  // work pending, the background thread waiting: a short spin, then sleeps
  // A caller's thread is blocked on this cycle (it drives for its own synchronous op):
  // wait as MPI's blocking collectives do, polling (and yielding the core where ranks
  // share cores), so that ranks leave the exchange as soon as the last one arrives and
  // stay in step.
  kCaller,
};

class Exchange {
 public:
  using Bytes = std::vector<uint8_t>;
  using IdleWait = lockstep::IdleWait;

  virtual ~Exchange() = default;

  // Bitwise AND of every rank's words, on every rank, waiting as `mode` says. Throws
  // PeerTimeout.
  virtual void AndAcrossRanks(std::vector<uint64_t>* words, WaitMode mode) = 0;
  // The same for a cycle vector with a payload lane (wire/cycle_lane.h): every rank's
  // vector combined with ExchangeOptions::combine, in one reduction that never splits
  // a vector, so the lane's payload reduces along with the bits.
  virtual void CombineAcrossRanks(std::vector<uint64_t>* words, WaitMode mode) = 0;
  // Rank 0 gets every rank's bytes (index = rank); the others get nothing.
  virtual std::vector<Bytes> GatherAtRoot(Bytes mine) = 0;
  // Every rank gets rank 0's bytes.
  virtual Bytes BroadcastFromRoot(Bytes bytes) = 0;
};

}  // namespace lockstep
