#include "tf_conversion.h"

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "tensorflow/core/framework/allocation_description.pb.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace lockstep {
namespace tf {
namespace {

// A TensorFlow buffer that shares ownership of a core result.
class CoreResultBuffer : public tensorflow::TensorBuffer {
 public:
  explicit CoreResultBuffer(std::shared_ptr<Buffer> buffer)
      : tensorflow::TensorBuffer(buffer->data()), buffer_(std::move(buffer)) {}
  size_t size() const override { return buffer_->size(); }
  tensorflow::TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(tensorflow::AllocationDescription* proto) const override {
    proto->set_requested_bytes(static_cast<int64_t>(size()));
    proto->set_allocator_name("lockstep");
  }

 private:
  std::shared_ptr<Buffer> buffer_;
};

}  // namespace

bool ToCoreDataType(tensorflow::DataType tf_type, DataType* core_type) {
  switch (tf_type) {
    case tensorflow::DT_UINT8:
      *core_type = DataType::kUInt8;
      return true;
    case tensorflow::DT_INT8:
      *core_type = DataType::kInt8;
      return true;
    case tensorflow::DT_UINT16:
      *core_type = DataType::kUInt16;
      return true;
    case tensorflow::DT_INT16:
      *core_type = DataType::kInt16;
      return true;
    case tensorflow::DT_INT32:
      *core_type = DataType::kInt32;
      return true;
    case tensorflow::DT_INT64:
      *core_type = DataType::kInt64;
      return true;
    case tensorflow::DT_HALF:
      *core_type = DataType::kFloat16;
      return true;
    case tensorflow::DT_BFLOAT16:
      *core_type = DataType::kBFloat16;
      return true;
    case tensorflow::DT_FLOAT:
      *core_type = DataType::kFloat32;
      return true;
    case tensorflow::DT_DOUBLE:
      *core_type = DataType::kFloat64;
      return true;
    case tensorflow::DT_BOOL:
      *core_type = DataType::kBool;
      return true;
    default:
      return false;
  }
}

std::vector<int64_t> ShapeOf(const tensorflow::Tensor& tensor) {
  std::vector<int64_t> shape;
  for (int i = 0; i < tensor.dims(); ++i) shape.push_back(tensor.dim_size(i));
  return shape;
}

absl::Status ToTfStatus(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk:
      return absl::OkStatus();
    case Status::Code::kInvalidArgument:
      return absl::InvalidArgumentError(status.message());
    case Status::Code::kPrecondition:
      return absl::FailedPreconditionError(status.message());
    case Status::Code::kAborted:
      return absl::AbortedError(status.message());
    case Status::Code::kUnsupported:
      return absl::InvalidArgumentError(status.message());
    case Status::Code::kUnimplemented:
      return absl::UnimplementedError(status.message());
    case Status::Code::kInternal:
      break;
  }
  return absl::InternalError(status.message());
}

tensorflow::Tensor TensorFromResult(tensorflow::DataType dtype, const OpResult& result) {
  tensorflow::TensorShape shape;
  for (int64_t dim : result.shape) shape.AddDim(dim);
  if (!result.buffer) return tensorflow::Tensor(dtype, shape);  // nothing to hold: no elements
  auto* buffer = new CoreResultBuffer(result.buffer);
  tensorflow::Tensor tensor(dtype, shape, buffer);
  buffer->Unref();  // the tensor holds its own reference
  return tensor;
}

}  // namespace tf
}  // namespace lockstep
