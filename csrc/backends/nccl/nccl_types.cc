#include "backends/nccl/nccl_types.h"

#include "backends/nccl/device_context.h"
#include "lockstep/values.h"

namespace lockstep {
namespace {

const char* ResultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return nullptr;
  }
}

}  // namespace

std::optional<ncclDataType_t> NcclDataTypeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kBool:
      return ncclUint8;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt16:
    case DataType::kUInt16:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<ncclRedOp_t> NcclRedOpFor(ReduceOp op, DataType dtype) {
  const bool boolean = dtype == DataType::kBool;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return boolean ? ncclMax : ncclSum;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return boolean ? ncclMin : ncclProd;
    case ReduceOp::kAdasum:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string WhyStaged(const Response& response) {
  if (!NcclDataTypeOf(response.dtype)) {
    return std::string("NCCL has no ") + DataTypeName(response.dtype) + " type";
  }
  const bool reduces =
      response.type == ResponseType::kAllreduce || response.type == ResponseType::kReducescatter;
  if (reduces && !NcclRedOpFor(response.reduce_op, response.dtype)) {
    return std::string("NCCL has no ") + ReduceOpName(response.reduce_op) + " reduction";
  }
  return "";
}

std::string DescribeNcclFailure(ncclResult_t result, const char* what,
                                const std::vector<std::string>& names, const NcclLibrary& library) {
  std::string text = std::string("NCCL ") + what + " failed";
  if (!names.empty()) text += " for tensor(s) " + TensorList(names);
  text += ": ";
  if (library.GetErrorString != nullptr) text += library.GetErrorString(result);
  const char* name = ResultName(result);
  text += std::string(library.GetErrorString != nullptr ? " (" : "(") +
          (name ? name : "ncclResult_t " + std::to_string(static_cast<int>(result))) + ")";
  return text;
}

void CheckNccl(ncclResult_t result, const char* what, const std::vector<std::string>& names,
               const NcclLibrary& library) {
  if (result != ncclSuccess) throw Error(DescribeNcclFailure(result, what, names, library));
}

}  // namespace lockstep
