#include "backends/nccl/nccl_ops.h"

#include "backends/nccl/batched_copy.h"
#include "backends/nccl/nccl_types.h"
#include "backends/nccl/scale_kernels.h"
#include "backends/result_layout.h"
#include "fusion/device_layout.h"

namespace lockstep {
namespace {

template <typename T>
const T* Offset(const void* base, int64_t bytes) {
  return reinterpret_cast<const T*>(static_cast<const char*>(base) + bytes);
}

char* Offset(void* base, int64_t bytes) { return static_cast<char*>(base) + bytes; }

bool AllEqual(const std::vector<int64_t>& values) {
  for (int64_t v : values) {
    if (v != values.front()) return false;
  }
  return true;
}

// ncclGroupStart ... ncclGroupEnd: NCCL issues the calls between as one operation
// (needed for send/recv pairs and a broadcast per rank). The group is closed on every
// path, also when a call inside fails.
class NcclGroup {
 public:
  explicit NcclGroup(const NcclLibrary& nccl) : nccl_(nccl) { started_ = nccl.GroupStart(); }
  ~NcclGroup() {
    if (open()) (void)nccl_.GroupEnd();
  }
  ncclResult_t started() const { return started_; }
  ncclResult_t End() {
    ended_ = true;
    return nccl_.GroupEnd();
  }

 private:
  bool open() const { return started_ == ncclSuccess && !ended_; }
  const NcclLibrary& nccl_;
  ncclResult_t started_;
  bool ended_ = false;
};

}  // namespace

NcclOps::NcclOps(const NcclLibrary& library, NcclCommunicator& comm,
                 std::shared_ptr<DeviceStream> stream, const Topology& topology,
                 GpuPhaseTimer& phases)
    : nccl_(library),
      comm_(comm),
      stream_(stream),
      topology_(topology),
      phases_(phases),
      scratch_(stream) {}

void NcclOps::Check(ncclResult_t result, const char* what, const Response& r) const {
  // The communicator is nonblocking: a call may still be queuing when it returns.
  comm_.Settle(result, what, r.names);
}

double NcclOps::FinalFactor(const Response& r) const {
  return r.reduce_op == ReduceOp::kAverage ? r.postscale / topology_.size : r.postscale;
}

std::vector<OpResult> NcclOps::Run(const Response& r, const std::vector<LocalTensor>& tensors) {
  const bool needs_own_tensor = r.type != ResponseType::kAllreduce;
  if (needs_own_tensor && (tensors.empty() || tensors[0].spec == nullptr)) {
    throw Error("internal error: no local tensor for " + r.names.front());
  }
  switch (r.type) {
    case ResponseType::kAllreduce:
      return Allreduce(r, tensors);
    case ResponseType::kAllgather:
      return {Allgather(r, *tensors[0].spec)};
    case ResponseType::kBroadcast:
      return {Broadcast(r, *tensors[0].spec)};
    case ResponseType::kAlltoall:
      return {Alltoall(r, *tensors[0].spec)};
    case ResponseType::kReducescatter:
      return {Reducescatter(r, *tensors[0].spec)};
    default:
      break;
  }
  throw Error("internal error: the NCCL collectives were given a response they cannot run");
}

std::vector<OpResult> NcclOps::Allreduce(const Response& r,
                                         const std::vector<LocalTensor>& tensors) {
  const bool lone = tensors.size() == 1 && tensors[0].spec != nullptr;
  if (lone) {
    // Straight from the tensor's memory (in != out allowed): no staging copy, unless a
    // prescale needs a scaled copy, made in the output so the input stays untouched.
    const OpSpec& spec = *tensors[0].spec;
    const int64_t count = r.sizes[0];
    Phase("NCCL_ALLREDUCE");
    if (count > 0) {
      const int64_t bytes = count * static_cast<int64_t>(DataTypeSize(r.dtype));
      const void* input = spec.input;
      if (r.prescale != 1.0) {
        const DeviceCopy copy{spec.input, spec.output, bytes};
        CheckCuda(BatchedCopy(&copy, 1, r.dtype, r.prescale, stream_->get()), "prescale kernel",
                  r.names);
        input = spec.output;
      }
      Check(
          nccl_.AllReduce(input, spec.output, static_cast<size_t>(count), *NcclDataTypeOf(r.dtype),
                          *NcclRedOpFor(r.reduce_op, r.dtype), comm_.get(), stream_->get()),
          "ncclAllReduce", r);
      CheckCuda(ScaleDeviceBuffer(spec.output, count, r.dtype, FinalFactor(r), stream_->get()),
                "postscale kernel", r.names);
    }
  } else {
    AllreduceFused(r, tensors);
  }
  std::vector<OpResult> results(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].spec != nullptr) results[i].shape = tensors[i].spec->shape;
  }
  return results;
}

// Several tensors (or a joined rank's zeros): packed into the fusion buffer by one
// batched copy (prescale folded in), one ncclAllReduce in place, unpacked by one
// batched copy (postscale and Average folded in).
void NcclOps::AllreduceFused(const Response& r, const std::vector<LocalTensor>& tensors) {
  const int64_t element = static_cast<int64_t>(DataTypeSize(r.dtype));
  std::vector<int64_t> bytes;
  for (int64_t n : r.sizes) bytes.push_back(n * element);
  const DeviceFusionLayout layout = PlanDeviceFusion(bytes);
  if (layout.total_bytes == 0) return;
  char* buffer = static_cast<char*>(scratch_.Get(layout.total_bytes, r.names));
  cudaStream_t stream = stream_->get();

  auto copies = [&](bool into_buffer, int first, int last) {
    std::vector<DeviceCopy> batch;
    for (int i = first; i < last; ++i) {
      const OpSpec* spec = tensors[i].spec;
      if (spec == nullptr || bytes[i] == 0) continue;
      char* slot = buffer + layout.offsets[i];
      batch.push_back(into_buffer ? DeviceCopy{spec->input, slot, bytes[i]}
                                  : DeviceCopy{slot, spec->output, bytes[i]});
    }
    return batch;
  };
  Phase("MEMCPY_IN_FUSION_BUFFER");
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].spec == nullptr && bytes[i] > 0) {  // a joined rank contributes zeros
      CheckCuda(cudaMemsetAsync(buffer + layout.offsets[i], 0, bytes[i], stream),
                "cudaMemsetAsync (joined rank's zeros)", r.names);
    }
  }
  for (const auto& [first, last] : layout.launches) {
    const std::vector<DeviceCopy> batch = copies(true, first, last);
    CheckCuda(
        BatchedCopy(batch.data(), static_cast<int>(batch.size()), r.dtype, r.prescale, stream),
        "batched copy into the fusion buffer", r.names);
  }
  Phase("NCCL_ALLREDUCE");
  Check(nccl_.AllReduce(buffer, buffer, static_cast<size_t>(layout.total_bytes / element),
                        *NcclDataTypeOf(r.dtype), *NcclRedOpFor(r.reduce_op, r.dtype), comm_.get(),
                        stream),
        "ncclAllReduce", r);
  const double factor = FinalFactor(r);
  Phase("MEMCPY_OUT_FUSION_BUFFER");
  for (const auto& [first, last] : layout.launches) {
    const std::vector<DeviceCopy> batch = copies(false, first, last);
    CheckCuda(BatchedCopy(batch.data(), static_cast<int>(batch.size()), r.dtype, factor, stream),
              "batched copy out of the fusion buffer", r.names);
  }
}

// Uneven first dimensions: one broadcast per rank in a group (NCCL's allgather needs
// equal parts); equal ones use ncclAllGather.
OpResult NcclOps::Allgather(const Response& r, const OpSpec& spec) {
  Phase("NCCL_ALLGATHER");
  const AllgatherLayout layout = PlanAllgather(r, spec);
  const std::vector<int64_t>& bytes_per_rank = layout.bytes_per_rank;
  OpResult result;
  result.shape = layout.shape;
  result.buffer = DeviceResult(layout.bytes, stream_, spec.stream, r.names);
  result.device = stream_->device();
  if (layout.bytes == 0) return result;
  void* out = result.buffer->data();
  if (AllEqual(bytes_per_rank)) {
    Check(nccl_.AllGather(spec.input, out, static_cast<size_t>(bytes_per_rank[0]), ncclUint8,
                          comm_.get(), stream_->get()),
          "ncclAllGather", r);
    return result;
  }
  NcclGroup group(nccl_);
  Check(group.started(), "ncclGroupStart", r);
  int64_t offset = 0;
  for (int rank = 0; rank < topology_.size; ++rank) {
    if (bytes_per_rank[rank] > 0) {
      Check(nccl_.Broadcast(spec.input, Offset(out, offset),
                            static_cast<size_t>(bytes_per_rank[rank]), ncclUint8, rank, comm_.get(),
                            stream_->get()),
            "ncclBroadcast (allgather)", r);
    }
    offset += bytes_per_rank[rank];
  }
  Check(group.End(), "ncclGroupEnd (allgather)", r);
  return result;
}

OpResult NcclOps::Broadcast(const Response& r, const OpSpec& spec) {
  Phase("NCCL_BCAST");
  const int64_t bytes = r.sizes.at(0) * static_cast<int64_t>(DataTypeSize(r.dtype));
  if (bytes > 0) {
    // The root's input lands in every rank's output, the root's own included.
    Check(nccl_.Broadcast(spec.input, spec.output, static_cast<size_t>(bytes), ncclUint8,
                          r.root_rank, comm_.get(), stream_->get()),
          "ncclBroadcast", r);
  }
  OpResult result;
  result.shape = spec.shape;
  return result;
}

OpResult NcclOps::Alltoall(const Response& r, const OpSpec& spec) {
  Phase("NCCL_ALLTOALL");
  const int n = topology_.size;
  const int me = topology_.rank;
  AlltoallLayout layout = PlanAlltoall(r, spec, me, n);
  const std::vector<int64_t>& send_bytes = layout.send_bytes;
  const std::vector<int64_t>& recv_bytes = layout.recv_bytes;
  const std::vector<int64_t>& send_at = layout.send_at;
  const std::vector<int64_t>& recv_at = layout.recv_at;
  OpResult result;
  result.shape = layout.shape;
  result.received_splits = layout.received_splits;
  result.buffer = DeviceResult(layout.recv_total, stream_, spec.stream, r.names);
  result.device = stream_->device();
  void* out = result.buffer->data();
  if (recv_bytes[me] > 0) {  // this rank's own rows: a copy, not a message to itself
    CheckCuda(cudaMemcpyAsync(Offset(out, recv_at[me]), Offset<char>(spec.input, send_at[me]),
                              recv_bytes[me], cudaMemcpyDeviceToDevice, stream_->get()),
              "cudaMemcpyAsync (alltoall, own rows)", r.names);
  }
  NcclGroup group(nccl_);
  Check(group.started(), "ncclGroupStart", r);
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    if (send_bytes[j] > 0) {
      Check(nccl_.Send(Offset<char>(spec.input, send_at[j]), static_cast<size_t>(send_bytes[j]),
                       ncclUint8, j, comm_.get(), stream_->get()),
            "ncclSend (alltoall)", r);
    }
    if (recv_bytes[j] > 0) {
      Check(nccl_.Recv(Offset(out, recv_at[j]), static_cast<size_t>(recv_bytes[j]), ncclUint8, j,
                       comm_.get(), stream_->get()),
            "ncclRecv (alltoall)", r);
    }
  }
  Check(group.End(), "ncclGroupEnd (alltoall)", r);
  return result;
}

// Uneven splits give the extra rows to the first ranks, as on the host. Equal parts
// use ncclReduceScatter; uneven ones a reduce to each rank in a group.
OpResult NcclOps::Reducescatter(const Response& r, const OpSpec& spec) {
  Phase("NCCL_REDUCESCATTER");
  const int n = topology_.size;
  const int me = topology_.rank;
  const ReducescatterLayout layout = PlanReducescatter(spec, me, n);
  const std::vector<int64_t>& counts = layout.counts;
  const int64_t element = static_cast<int64_t>(DataTypeSize(r.dtype));
  const ncclDataType_t type = *NcclDataTypeOf(r.dtype);
  const ncclRedOp_t op = *NcclRedOpFor(r.reduce_op, r.dtype);

  const void* input = spec.input;
  const int64_t total_bytes = layout.total_elements * element;
  if (r.prescale != 1.0 && total_bytes > 0) {  // scale a copy: the input stays untouched
    void* scaled = scratch_.Get(total_bytes, r.names);
    const DeviceCopy copy{spec.input, scaled, total_bytes};
    CheckCuda(BatchedCopy(&copy, 1, r.dtype, r.prescale, stream_->get()), "prescale kernel",
              r.names);
    input = scaled;
  }
  OpResult result;
  result.shape = layout.shape;
  result.buffer = DeviceResult(counts[me] * element, stream_, spec.stream, r.names);
  result.device = stream_->device();
  void* out = result.buffer->data();
  if (total_bytes == 0) return result;
  if (AllEqual(counts)) {
    Check(nccl_.ReduceScatter(input, out, static_cast<size_t>(counts[0]), type, op, comm_.get(),
                              stream_->get()),
          "ncclReduceScatter", r);
  } else {
    NcclGroup group(nccl_);
    Check(group.started(), "ncclGroupStart", r);
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      if (counts[i] > 0) {
        // recvbuff matters on the root only; the others pass their own valid pointer.
        void* receive = i == me ? out : const_cast<void*>(input);
        Check(
            nccl_.Reduce(Offset<char>(input, offset * element), receive,
                         static_cast<size_t>(counts[i]), type, op, i, comm_.get(), stream_->get()),
            "ncclReduce (reducescatter)", r);
      }
      offset += counts[i];
    }
    Check(group.End(), "ncclGroupEnd (reducescatter)", r);
  }
  CheckCuda(ScaleDeviceBuffer(out, counts[me], r.dtype, FinalFactor(r), stream_->get()),
            "postscale kernel", r.names);
  return result;
}

}  // namespace lockstep
