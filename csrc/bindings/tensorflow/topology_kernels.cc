// Graph ops that read the job's topology when they run (not when the graph is
// built), so a saved graph asks the job it runs in.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// Process sets beyond the global one (id 0) do not exist yet, so only id 0 answers.
class ProcessSetIncludedKernel : public OpKernel {
 public:
  explicit ProcessSetIncludedKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_id_));
  }

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES(context, IsInitialized(), absl::FailedPreconditionError(NotRunningReason()));
    OP_REQUIRES(context, process_set_id_ == 0,
                absl::InvalidArgumentError(
                    absl::StrCat("process set ", process_set_id_,
                                 " is not registered; only the global process set (id 0) exists")));
    SetScalarOutput(context, 1);
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
