#include "backends/mpi/mpi_communicator.h"

#include <cstdlib>

#include "backends/mpi/mpi_exchange.h"
#include "backends/mpi/mpi_ops.h"
#include "backends/mpi/mpi_silence_finder.h"
#include "backends/mpi/mpi_world.h"
#include "backends/mpi/process_failures.h"

namespace lockstep {

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned, std::shared_ptr<const MpiTypes> types,
                                 std::shared_ptr<const MpiContext> context)
    : comm_(comm), owned_(owned), types_(std::move(types)), context_(std::move(context)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MPI_Comm MpiCommunicator::HandleOf(const Communicator& communicator) {
  const auto* mpi = dynamic_cast<const MpiCommunicator*>(&communicator);
  if (mpi == nullptr) throw Error("internal error: an MPI communicator was expected");
  return mpi->comm_;
}

std::unique_ptr<Communicator> MpiCommunicator::Split(bool member) {
  MPI_Comm comm = MPI_COMM_NULL;
  if (MPI_Comm_split(comm_, member ? 1 : MPI_UNDEFINED, rank_, &comm) != MPI_SUCCESS) {
    throw Error("MPI_Comm_split failed");
  }
  if (!member) return nullptr;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(comm, /*owned=*/true, types_, context_);
}

double MpiCommunicator::MaxAcrossRanks(double value) {
  if (MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, comm_) != MPI_SUCCESS) {
    throw Error("MPI_Allreduce (max across ranks) failed");
  }
  return value;
}

std::unique_ptr<Exchange> MpiCommunicator::NewExchange(ExchangeOptions options) {
  options.cores_shared = context_->ranks_outnumber_cores();
  return std::make_unique<MpiExchange>(comm_, std::move(options), SharedProbe());
}

std::unique_ptr<Backend> MpiCommunicator::NewHostBackend(const HostBackendOptions& options,
                                                         CallClock& clock) {
  return std::make_unique<MpiBackend>(
      comm_, *types_, options.shm_bytes, options.shm_min_ranks, options.hierarchical,
      context_ && context_->ranks_outnumber_cores(), clock,
      context_ ? HostnamesOf(comm_, context_->comm(), context_->hostnames())
               : std::vector<std::string>{});
}

std::unique_ptr<SilenceFinder> MpiCommunicator::NewSilenceFinder() {
  // Collective, so every rank takes the same branch: threads_supported is the job's.
  if (!context_ || !context_->threads_supported()) return nullptr;
  return std::make_unique<MpiSilenceFinder>(SharedProbe());
}

std::shared_ptr<PeerProbe> MpiCommunicator::SharedProbe() {
  if (!probe_) probe_ = std::make_shared<PeerProbe>(comm_);
  return probe_;
}

void MpiCommunicator::Abort() {
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; should it, the job must still end
}

World StartMpiWorld() {
  auto context = std::make_shared<const MpiContext>();
  World world;
  world.topology = context->topology();
  world.hostnames = context->hostnames();
  world.threads_supported = context->threads_supported();
  world.any_thread_may_call = context->any_thread_may_call();
  world.ranks_outnumber_cores = context->ranks_outnumber_cores();
  world.mark_peers_lost = [] { MarkPeersLost(); };
  world.every_process_alive = [context](double timeout_seconds) {
    return context->EveryProcessAlive(timeout_seconds);
  };
  // The context owns the duplicate of the job's world and frees it when the last
  // communicator holding it goes.
  world.communicator = std::make_shared<MpiCommunicator>(
      context->comm(), /*owned=*/false, std::make_shared<const MpiTypes>(), context);
  return world;
}

}  // namespace lockstep
