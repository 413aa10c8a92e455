// Names, sizes and range checks for the enums in lockstep/types.h.
#include "lockstep/types.h"

namespace lockstep {

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kInt16:
    case DataType::kUInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;  // not a valid DataType; callers check IsValidDataType first
}

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kInt16:
      return "int16";
    case DataType::kUInt16:
      return "uint16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kBool:
      return "bool";
  }
  return "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kAverage:
      return "Average";
    case ReduceOp::kSum:
      return "Sum";
    case ReduceOp::kAdasum:
      return "Adasum";
    case ReduceOp::kMin:
      return "Min";
    case ReduceOp::kMax:
      return "Max";
    case ReduceOp::kProduct:
      return "Product";
  }
  return "unknown";
}

const char* OpTypeName(OpType op) {
  switch (op) {
    case OpType::kAllreduce:
      return "allreduce";
    case OpType::kAllgather:
      return "allgather";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kAlltoall:
      return "alltoall";
    case OpType::kReducescatter:
      return "reducescatter";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kJoin:
      return "join";
    case OpType::kProcessSetChange:
      return "process_set_change";
  }
  return "unknown";
}

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

bool IsValidDataType(uint8_t raw) { return raw < kNumDataTypes; }

bool IsValidReduceOp(uint8_t raw) { return raw <= static_cast<uint8_t>(ReduceOp::kProduct); }

bool IsValidOpType(uint8_t raw) { return raw <= static_cast<uint8_t>(OpType::kProcessSetChange); }

}  // namespace lockstep
