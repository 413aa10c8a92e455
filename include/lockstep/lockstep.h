// The public C++ API of lockstep: the boundary the Python bindings (and any other
// frontend) use. Everything else lives in csrc/ and may change freely.
//
// Life cycle: Init() starts the background thread that owns all MPI calls;
// Submit() hands it named tensors and returns Handles; Wait() blocks until every rank
// has run the collective and returns the result (or throws lockstep::Error); Run()
// does both for one op. The values these functions take and return are in values.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/types.h"
#include "lockstep/values.h"

namespace lockstep {

// Idempotent. Initializes MPI unless the program already did (e.g. mpi4py); reads
// LOCKSTEP_* (and HOROVOD_* alias) settings and throws Error on bad values.
void Init();
// Idempotent. Pending ops on this rank complete with an error; the other ranks'
// background threads stop too, failing their pending ops.
void Shutdown();
bool IsInitialized();

// Going on without lost processes (elastic training on an MPI with ULFM, started with
// `mpirun --with-ft ulfm` as lockstep-run's elastic jobs are). Whether a lost process
// leaves the others running, so that they can go on without it.
bool CanRecoverInProcess();
// Collective over every rank: true on every rank if no process of the job has failed,
// false on every survivor if one has (even one that fails during the call). An elastic
// commit asks before it saves a step: under ULFM a collective that overlaps a failure
// can return success with a wrong result on some ranks. True where processes cannot
// fail alone (the MPI then ends the job). Also asked on an engine that lost peers.
// Throws Error (kAborted) when a rank has not taken part within the peer timeout, and
// before Init().
bool EveryProcessAlive();
// Collective over the survivors once a lost process stopped lockstep (or
// EveryProcessAlive() said so): lockstep starts again over them, ranks renumbered in
// their old order; process sets other than the global one are gone. Throws Error
// where CanRecoverInProcess() is false.
void RecoverWithSurvivors();

// Why lockstep cannot run ops right now (never initialized, shut down here, or
// stopped because another rank shut down); empty while it is running.
std::string NotRunningReason();
Topology GetTopology();  // throws Error before Init()
// Every global rank's host name (MPI_Get_processor_name), indexed by rank; throws as
// GetTopology does.
std::vector<std::string> Hostnames();
bool MpiThreadsSupported();
bool MpiBuilt();
// Horovod's nccl_built(): NCCL_VERSION_CODE of the NCCL this build's GPU collectives
// were compiled against, or 0 in builds without the NCCL backend. Whether they can run
// in this process (driver, GPU, libnccl) is GetNcclInfo().problem.
int NcclBuilt();

// Works before Init(). Loads libnccl (once) if the build has NCCL and it is not loaded.
NcclInfo GetNcclInfo();

MpiInfo GetMpiInfo();  // works before Init()

EngineStats GetEngineStats();  // throws Error when lockstep is not running

// lockstep's own CUDA stream for GPU collectives on `device` in a process set (as a
// cudaStream_t), or nullptr before the set's first GPU op created it.
void* GpuStream(int device, int32_t process_set_id = 0);
// Makes `stream` (a cudaStream_t of the result's device) wait on the result's
// gpu_done event: for a frontend that uses a device result on another stream than the
// op's. No-op for host results. Throws Error (the CUDA failure, or that the GPU path
// failed before the op's GPU work finished, in which case its output is undefined).
void OrderStreamAfter(const OpResult& result, void* stream);

void StartTimeline(const std::string& path, bool mark_cycles);
void StopTimeline();

// How Submit hands its ops over; the defaults suit a frontend that waits on handles.
struct SubmitOptions {
  // Negotiated as one unit and, where compatible, fused together. Otherwise each op is
  // negotiated under its own name, but the background thread is woken once for all of
  // them, so they usually meet in one cycle and fuse.
  bool grouped = false;
  // false: the caller is about to Wait for the handles, and its thread then runs the
  // cycle itself, sparing a hand-off to the background thread and back (which still
  // picks the ops up at its next cycle otherwise).
  bool wake_background = true;
  // One per spec: each op reports through its callback instead of a handle, and
  // Submit returns no handles. For framework kernels (TensorFlow, XLA).
  std::vector<DoneCallback> done;
  // With callbacks: the calling thread then runs the negotiation cycles itself while
  // its ops are pending, no other thread is running them, and the drive allows (one
  // cycle waits for the other ranks' next one). An op that every rank submits at about
  // the same time then completes before Submit returns, its callback running on this
  // thread (after it has let go of the cycles), without a hand-off to the background
  // thread and back; what is still pending completes on the background thread. For
  // kernels that may not block until every rank arrives (an XLA FFI handler, a
  // TensorFlow async kernel). Null: no driving.
  const KernelDrive* drive = nullptr;
};

// Hands ops to the core: one Handle per spec for Poll/Wait, or none with callbacks.
// Throws Error for bad arguments (unknown dtype, name already in flight, not
// initialized), and then queues none and runs no callback. Collective-level problems
// (mismatch across ranks, stalls) arrive later, through Wait or the callback.
std::vector<Handle> Submit(std::vector<OpSpec> specs, SubmitOptions options = {});

// Checks an op's argument values as Submit and Run do (root rank, alltoall's splits,
// a first dimension where the op needs one, the reduce op for the op, dtype and set
// size), without submitting it or needing Init(): for a frontend that must refuse an
// op before any rank runs it, e.g. while a TensorFlow graph is built. `set_size`: ranks
// in the op's process set; `world_size`: all ranks (root_rank is a global rank). A
// negative dimension is one not known yet, and `rank_known` false says the shape's
// rank is not known either: the checks that need them are left for when the op runs.
// Throws Error (kInvalidArgument, kUnsupported or kUnimplemented).
void CheckOpArguments(const OpSpec& spec, int set_size, int world_size, bool rank_known = true);

// The name for an unnamed op of `kind` ("allreduce", ...): a counter per kind and
// process set, so ranks that submit their unnamed ops in the same order get the same
// names. A completed join restarts the counters (ranks that joined early submitted
// fewer ops).
std::string AutoName(const std::string& kind, int32_t process_set_id = 0);

// Process sets: collectives among a subset of ranks, each set with its own
// communicator and negotiation. Id 0 is the global set. AddProcessSet and
// RemoveProcessSet are collective over all ranks (every rank calls them with the same
// arguments, in the same order) and throw Error when the ranks disagree, the ranks
// are invalid or an identical set exists (add), or the set does not exist (remove).
// Ops still pending on a removed set fail.
int32_t AddProcessSet(std::vector<int> ranks);
void RemoveProcessSet(int32_t id);
std::vector<int32_t> ProcessSetIds();
// Global ranks of a set, ascending; throws Error for an unknown id.
std::vector<int> ProcessSetRanks(int32_t id);

bool Poll(Handle handle);
// Blocks until done; releases the handle. Throws Error when the op failed. While the
// engine is idle, the waiting thread runs the negotiation cycle itself (no hand-off to
// the background thread and back).
OpResult Wait(Handle handle);
// One op, start to end: Submit then Wait, without waking the background thread in
// between and without Submit's vectors: the synchronous small-op path.
OpResult Run(OpSpec spec);

}  // namespace lockstep
