#include "backends/host/host_collectives.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "backends/host/chunked_allreduce.h"
#include "backends/result_layout.h"
#include "reduction/scaling.h"

namespace lockstep {
namespace {

std::string CollectiveName(const Response& r, const Backend& backend) {
  static const char* const kKinds[] = {"ALLREDUCE", "ALLGATHER", "BCAST", "ALLTOALL",
                                       "REDUCESCATTER"};
  return std::string(backend.name()) + "_" + kKinds[static_cast<int>(r.type)];
}

// The core-allocated result of an allgather, alltoall or reducescatter. The
// coordinator already refused results larger than the host's memory; this names the
// tensor when memory runs out anyway.
std::shared_ptr<Buffer> ResultBuffer(int64_t bytes, const Response& r) {
  try {
    return std::make_shared<Buffer>(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    throw Error(std::string(OpTypeName(static_cast<OpType>(r.type))) + " of tensor '" +
                r.names.front() + "': out of memory allocating the result of " +
                std::to_string(bytes) + " bytes");
  }
}

}  // namespace

HostCollectives::HostCollectives(const Topology& topology, Backend& transport,
                                 PhaseRecorder& phases, int64_t chunk_bytes)
    : topology_(topology), backend_(transport), timeline_(phases), chunk_bytes_(chunk_bytes) {}

// The timeline's name for this response's collective; not built while nobody records.
std::string HostCollectives::PhaseName(const Response& r, const Backend& backend) const {
  return timeline_.active() ? CollectiveName(r, backend) : std::string();
}

void HostCollectives::Phase(const std::vector<std::string>& names, const char* phase) {
  if (!timeline_.active()) return;
  for (const std::string& name : names) timeline_.Begin(name, phase);
}

void HostCollectives::EndPhase(const std::vector<std::string>& names) {
  if (!timeline_.active()) return;
  for (const std::string& name : names) timeline_.End(name);
}

std::vector<OpResult> HostCollectives::Run(const Response& r,
                                           const std::vector<LocalTensor>& tensors) {
  const bool needs_own_tensor =
      r.type != ResponseType::kAllreduce && r.type != ResponseType::kBarrier && !IsControl(r.type);
  if (needs_own_tensor && (tensors.empty() || tensors[0].spec == nullptr)) {
    throw Error("internal error: no local tensor for " + r.names.front());
  }
  switch (r.type) {
    case ResponseType::kAllreduce:
      return r.reduce_op == ReduceOp::kAdasum ? RunAdasum(r, tensors) : RunAllreduce(r, tensors);
    case ResponseType::kAllgather:
      return {RunAllgather(r, *tensors.at(0).spec)};
    case ResponseType::kBroadcast:
      return {RunBroadcast(r, *tensors.at(0).spec)};
    case ResponseType::kAlltoall:
      return {RunAlltoall(r, *tensors.at(0).spec)};
    case ResponseType::kReducescatter:
      return {RunReducescatter(r, *tensors.at(0).spec)};
    case ResponseType::kBarrier:
      return {OpResult{}};  // negotiation already synchronized
    case ResponseType::kJoin: {
      OpResult result;
      result.join_last_rank = r.last_joined_rank;
      return {result};
    }
    case ResponseType::kProcessSetChange:  // the engine applies it; nothing to move
    case ResponseType::kError:
      break;
  }
  throw Error("internal error: host collectives given a response they cannot run");
}

void FinishReduction(void* buffer, int64_t count, const Response& r, int world_size) {
  // Average is a Sum whose postscale is divided by the world size, for every dtype:
  // Horovod's arithmetic, so that results match it bit for bit (integers too, which
  // therefore truncate once, after the combined factor).
  double postscale = r.postscale;
  if (r.reduce_op == ReduceOp::kAverage) postscale /= world_size;
  ScaleInPlace(buffer, count, r.dtype, postscale);
}

std::vector<OpResult> HostCollectives::RunAllreduce(const Response& r,
                                                    const std::vector<LocalTensor>& tensors) {
  Backend& backend = backend_;
  const int64_t element = DataTypeSize(r.dtype);
  std::vector<AllreduceSegment> segments;
  for (size_t i = 0; i < tensors.size(); ++i) {
    AllreduceSegment segment;
    segment.name = &r.names[i];
    segment.bytes = r.sizes[i] * element;
    if (tensors[i].spec != nullptr) {
      segment.input = static_cast<const char*>(tensors[i].spec->input);
      segment.output = static_cast<char*>(tensors[i].spec->output);
    }
    segments.push_back(segment);
  }
  ChunkedAllreduceHooks hooks;
  hooks.begin = [this](const std::vector<const std::string*>& names, const char* phase) {
    if (!timeline_.active()) return;
    for (const std::string* name : names) timeline_.Begin(*name, phase);
  };
  hooks.end = [this](const std::vector<const std::string*>& names) {
    if (!timeline_.active()) return;
    for (const std::string* name : names) timeline_.End(*name);
  };
  hooks.finish = [this, &r](void* buffer, int64_t count) {
    FinishReduction(buffer, count, r, topology_.size);
  };
  ChunkedAllreduce(backend, fusion_buffer_, chunk_bytes_, hooks)
      .Run(r, segments, PhaseName(r, backend));

  std::vector<OpResult> results(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].spec != nullptr) results[i].shape = tensors[i].spec->shape;
  }
  return results;
}

// Adasum needs each tensor whole (its coefficients come from whole-tensor dot
// products), so a response is combined in one piece rather than in chunks: a lone
// tensor in its output (as Horovod does unfused), a fused one packed into staging.
std::vector<OpResult> HostCollectives::RunAdasum(const Response& r,
                                                 const std::vector<LocalTensor>& tensors) {
  Backend& backend = backend_;
  const int64_t element = DataTypeSize(r.dtype);
  int64_t total = 0;
  for (int64_t n : r.sizes) total += n;
  const bool direct = tensors.size() == 1 && tensors[0].spec != nullptr;
  char* buffer =
      direct ? static_cast<char*>(tensors[0].spec->output)
             : static_cast<char*>(fusion_buffer_.Get(std::max<int64_t>(total, 1) * element));
  if (direct) {
    if (total > 0 && tensors[0].spec->input != buffer) {
      std::memcpy(buffer, tensors[0].spec->input, total * element);
    }
  } else {
    CopyAdasumSegments(r, tensors, buffer, /*into_buffer=*/true);
  }
  ScaleInPlace(buffer, total, r.dtype, r.prescale);
  Phase(r.names, (std::string(backend.name()) + "_ADASUM_ALLREDUCE").c_str());
  backend.Adasum(buffer, r.sizes, r.dtype);
  EndPhase(r.names);
  FinishReduction(buffer, total, r, topology_.size);
  if (!direct) CopyAdasumSegments(r, tensors, buffer, /*into_buffer=*/false);
  std::vector<OpResult> results(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].spec != nullptr) results[i].shape = tensors[i].spec->shape;
  }
  return results;
}

// Packs the response's tensors into `buffer` (a joined rank's as zeros) or unpacks
// the results from it.
void HostCollectives::CopyAdasumSegments(const Response& r, const std::vector<LocalTensor>& tensors,
                                         char* buffer, bool into_buffer) {
  const int64_t element = DataTypeSize(r.dtype);
  Phase(r.names, into_buffer ? "MEMCPY_IN_FUSION_BUFFER" : "MEMCPY_OUT_FUSION_BUFFER");
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t bytes = r.sizes[i] * element;
    const OpSpec* spec = tensors[i].spec;
    if (bytes > 0 && spec == nullptr && into_buffer) std::memset(buffer + offset, 0, bytes);
    if (bytes > 0 && spec != nullptr) {
      if (into_buffer) {
        std::memcpy(buffer + offset, spec->input, bytes);
      } else {
        std::memcpy(spec->output, buffer + offset, bytes);
      }
    }
    offset += bytes;
  }
  EndPhase(r.names);
}

OpResult HostCollectives::RunAllgather(const Response& r, const OpSpec& spec) {
  Backend& backend = backend_;
  const AllgatherLayout layout = PlanAllgather(r, spec);
  OpResult result;
  result.shape = layout.shape;
  result.buffer = ResultBuffer(layout.bytes, r);
  Phase(r.names, PhaseName(r, backend).c_str());
  backend.Allgatherv(spec.input, result.buffer->data(), layout.bytes_per_rank);
  EndPhase(r.names);
  return result;
}

OpResult HostCollectives::RunBroadcast(const Response& r, const OpSpec& spec) {
  Backend& backend = backend_;
  int64_t bytes = r.sizes.at(0) * DataTypeSize(r.dtype);
  if (topology_.rank == r.root_rank && spec.input != spec.output && bytes > 0) {
    std::memcpy(spec.output, spec.input, bytes);
  }
  Phase(r.names, PhaseName(r, backend).c_str());
  backend.Broadcast(spec.output, bytes, r.root_rank);
  EndPhase(r.names);
  OpResult result;
  result.shape = spec.shape;
  return result;
}

OpResult HostCollectives::RunAlltoall(const Response& r, const OpSpec& spec) {
  Backend& backend = backend_;
  AlltoallLayout layout = PlanAlltoall(r, spec, topology_.rank, topology_.size);
  OpResult result;
  result.shape = layout.shape;
  result.received_splits = std::move(layout.received_splits);
  result.buffer = ResultBuffer(layout.recv_total, r);
  Phase(r.names, PhaseName(r, backend).c_str());
  backend.Alltoallv(spec.input, layout.send_bytes, result.buffer->data(), layout.recv_bytes);
  EndPhase(r.names);
  return result;
}

OpResult HostCollectives::RunReducescatter(const Response& r, const OpSpec& spec) {
  Backend& backend = backend_;
  const ReducescatterLayout layout = PlanReducescatter(spec, topology_.rank, topology_.size);
  const int64_t element = DataTypeSize(r.dtype);
  const int64_t mine = layout.counts[topology_.rank];

  const void* input = spec.input;
  if (r.prescale != 1.0) {  // scale a copy: the caller's input stays untouched
    void* scaled = fusion_buffer_.Get(layout.total_elements * element);
    std::memcpy(scaled, input, layout.total_elements * element);
    ScaleInPlace(scaled, layout.total_elements, r.dtype, r.prescale);
    input = scaled;
  }
  OpResult result;
  result.shape = layout.shape;
  result.buffer = ResultBuffer(mine * element, r);
  Phase(r.names, PhaseName(r, backend).c_str());
  backend.ReduceScatter(input, result.buffer->data(), layout.counts, r.dtype, r.reduce_op);
  EndPhase(r.names);
  FinishReduction(result.buffer->data(), mine, r, topology_.size);
  return result;
}

}  // namespace lockstep
