// Core vocabulary shared by every layer: element types, reduce ops, op kinds,
// and the Status value that carries errors across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace lockstep {

enum class DataType : uint8_t {
  kUInt8 = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kFloat16 = 5,
  kBFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBool = 9,
  kUInt16 = 10,
};
constexpr int kNumDataTypes = 11;

// Values mirror Horovod's reduce-op constants so scripts that pass raw ints keep working.
enum class ReduceOp : uint8_t {
  kAverage = 0,
  kSum = 1,
  kAdasum = 2,  // allreduce of floating tensors on a power-of-2 number of ranks
  kMin = 3,
  kMax = 4,
  kProduct = 5,
};

enum class OpType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  // Adding or removing a process set: the engine submits it for AddProcessSet and
  // RemoveProcessSet; frontends cannot (spec validation refuses it).
  kProcessSetChange = 7,
};

size_t DataTypeSize(DataType dtype);
const char* DataTypeName(DataType dtype);
const char* ReduceOpName(ReduceOp op);
const char* OpTypeName(OpType op);
bool IsFloatingPoint(DataType dtype);
bool IsValidDataType(uint8_t raw);
bool IsValidReduceOp(uint8_t raw);
bool IsValidOpType(uint8_t raw);

// Ok, or an error with a message meant for the user.
class Status {
 public:
  // kUnsupported: an argument combination an op does not support (Horovod raises
  // ValueError or RuntimeError); kUnimplemented: one that Horovod, like lockstep, does
  // not implement (NotImplementedError), e.g. Adasum on a set that is not a power of 2.
  // Appended, so the older codes keep their values.
  enum class Code : uint8_t {
    kOk = 0,
    kInvalidArgument,
    kPrecondition,
    kAborted,
    kInternal,
    kUnsupported,
    kUnimplemented,
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }
  static Status Precondition(std::string msg) {
    return Status(Code::kPrecondition, std::move(msg));
  }
  static Status Aborted(std::string msg) { return Status(Code::kAborted, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace lockstep
