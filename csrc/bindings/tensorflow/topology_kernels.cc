// Graph ops that read the job's topology when they run (not when the graph is
// built), so a saved graph asks the job it runs in.
#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "lockstep/lockstep.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace lockstep {
namespace tf {
namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;

void SetScalarOutput(OpKernelContext* context, int value) {
  tensorflow::Tensor* output = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
  output->scalar<int32_t>()() = value;
}

template <int Topology::*field>
class TopologyKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES(context, IsInitialized(), absl::FailedPreconditionError(NotRunningReason()));
    SetScalarOutput(context, GetTopology().*field);
  }
};

// What Horovod's process-set queries return for a set that is not registered
// (HOROVOD_PROCESS_SET_ERROR_UNKNOWN_SET): a code, not an error, so a graph built for
// one job can ask the job it runs in.
constexpr int kUnknownProcessSet = -3;

// A value computed from the ranks of the op's process set when it runs.
class ProcessSetKernel : public OpKernel {
 public:
  explicit ProcessSetKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_id_));
  }

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES(context, IsInitialized(), absl::FailedPreconditionError(NotRunningReason()));
    std::vector<int> ranks;
    try {
      ranks = ProcessSetRanks(process_set_id_);
    } catch (const Error&) {
      SetScalarOutput(context, kUnknownProcessSet);
      return;
    }
    SetScalarOutput(context, ValueFor(ranks));
  }

 protected:
  virtual int ValueFor(const std::vector<int>& ranks) const = 0;

 private:
  int process_set_id_ = 0;
};

class ProcessSetSizeKernel : public ProcessSetKernel {
 public:
  using ProcessSetKernel::ProcessSetKernel;

 protected:
  int ValueFor(const std::vector<int>& ranks) const override {
    return static_cast<int>(ranks.size());
  }
};

// 1 if this rank is in the process set, else 0.
class ProcessSetIncludedKernel : public ProcessSetKernel {
 public:
  using ProcessSetKernel::ProcessSetKernel;

 protected:
  int ValueFor(const std::vector<int>& ranks) const override {
    return std::find(ranks.begin(), ranks.end(), GetTopology().rank) != ranks.end() ? 1 : 0;
  }
};

#define LOCKSTEP_CPU_KERNEL(op_name, kernel) \
  REGISTER_KERNEL_BUILDER(Name(op_name).Device(tensorflow::DEVICE_CPU), kernel)

LOCKSTEP_CPU_KERNEL("LockstepRank", TopologyKernel<&Topology::rank>);
LOCKSTEP_CPU_KERNEL("LockstepSize", ProcessSetSizeKernel);
LOCKSTEP_CPU_KERNEL("LockstepLocalRank", TopologyKernel<&Topology::local_rank>);
LOCKSTEP_CPU_KERNEL("LockstepLocalSize", TopologyKernel<&Topology::local_size>);
LOCKSTEP_CPU_KERNEL("LockstepProcessSetIncluded", ProcessSetIncludedKernel);

}  // namespace
}  // namespace tf
}  // namespace lockstep
