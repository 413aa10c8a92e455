// What the TensorFlow kernels translate between TensorFlow's vocabulary and the core's:
// element types, shapes, statuses, and core-allocated results as TensorFlow tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/lockstep.h"
#include "tensorflow/core/framework/tensor.h"

namespace lockstep {
namespace tf {

// False for a TensorFlow type the core cannot carry (the op definitions admit only
// those it can, so kernels never see one).
bool ToCoreDataType(tensorflow::DataType tf_type, DataType* core_type);

std::vector<int64_t> ShapeOf(const tensorflow::Tensor& tensor);

// Horovod's mapping: mismatches across ranks are FailedPrecondition, bad arguments
// InvalidArgument, shutdown and cancellation Aborted.
absl::Status ToTfStatus(const Status& status);

// The core's result buffer as a TensorFlow tensor, without a copy: the tensor holds
// the buffer alive. The core allocates results 64-byte aligned, as Eigen expects.
tensorflow::Tensor TensorFromResult(tensorflow::DataType dtype, const OpResult& result);

}  // namespace tf
}  // namespace lockstep
