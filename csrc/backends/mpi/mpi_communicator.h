// The Communicator seam over MPI: a process set's MPI communicator, and the start of
// the job's (MPI initialized or adopted, topology, host names).
#pragma once

#include <mpi.h>

#include <memory>

#include "backends/communicator.h"
#include "backends/mpi/mpi_context.h"
#include "backends/mpi/mpi_types.h"
#include "backends/mpi/peer_probe.h"

namespace lockstep {

class MpiCommunicator : public Communicator {
 public:
  // Frees `comm` at destruction when `owned` (and MPI is still running). `types` and
  // `context` are shared by every communicator of the job; `context` may be null.
  MpiCommunicator(MPI_Comm comm, bool owned, std::shared_ptr<const MpiTypes> types,
                  std::shared_ptr<const MpiContext> context);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // The MPI handle behind a communicator of this kind (for backends that need MPI
  // themselves, such as NCCL's set-up); throws Error for any other kind.
  static MPI_Comm HandleOf(const Communicator& communicator);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::unique_ptr<Communicator> Split(bool member) override;
  double MaxAcrossRanks(double value) override;
  std::unique_ptr<Exchange> NewExchange(ExchangeOptions options) override;
  std::unique_ptr<Backend> NewHostBackend(const HostBackendOptions& options,
                                          CallClock& clock) override;
  std::unique_ptr<SilenceFinder> NewSilenceFinder() override;
  [[noreturn]] void Abort() override;

 private:
  // Collective on first use: the probe that this communicator's negotiation and the
  // watchdog's silence finder share.
  std::shared_ptr<PeerProbe> SharedProbe();

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<const MpiTypes> types_;
  std::shared_ptr<const MpiContext> context_;  // keeps MPI's set-up alive as long as we are
  std::shared_ptr<PeerProbe> probe_;
};

}  // namespace lockstep
