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

// 1 if this rank is in the process set; an error for sets that do not exist.
class ProcessSetIncludedKernel : public OpKernel {
 public:
  explicit ProcessSetIncludedKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_id_));
  }

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES(context, IsInitialized(), absl::FailedPreconditionError(NotRunningReason()));
    std::vector<int> ranks;
    try {
      ranks = ProcessSetRanks(process_set_id_);
    } catch (const Error& error) {
      context->CtxFailure(absl::InvalidArgumentError(error.what()));
      return;
    }
    const int me = GetTopology().rank;
    SetScalarOutput(context, std::find(ranks.begin(), ranks.end(), me) != ranks.end() ? 1 : 0);
  }

 private:
  int process_set_id_ = 0;
};

#define LOCKSTEP_CPU_KERNEL(op_name, kernel) \
  REGISTER_KERNEL_BUILDER(Name(op_name).Device(tensorflow::DEVICE_CPU), kernel)

LOCKSTEP_CPU_KERNEL("LockstepRank", TopologyKernel<&Topology::rank>);
LOCKSTEP_CPU_KERNEL("LockstepSize", TopologyKernel<&Topology::size>);
LOCKSTEP_CPU_KERNEL("LockstepLocalRank", TopologyKernel<&Topology::local_rank>);
LOCKSTEP_CPU_KERNEL("LockstepLocalSize", TopologyKernel<&Topology::local_size>);
LOCKSTEP_CPU_KERNEL("LockstepProcessSetIncluded", ProcessSetIncludedKernel);

}  // namespace
}  // namespace tf
}  // namespace lockstep
