#include "backends/mpi/mpi_types.h"

#include <atomic>

#include "reduction/reduce_kernels.h"
#include "reduction/scaling.h"

namespace lockstep {
namespace {

// MPI's user-op callback carries no context pointer, so the callbacks find the two
// custom datatypes here. They are set once per MpiTypes and only read afterwards.
std::atomic<MPI_Datatype> g_float16_type{MPI_DATATYPE_NULL};

template <ReduceOp kOp>
void SixteenBitCallback(void* in, void* inout, int* len, MPI_Datatype* datatype) {
  DataType dtype = (*datatype == g_float16_type.load()) ? DataType::kFloat16 : DataType::kBFloat16;
  ReduceSixteenBit(in, inout, *len, dtype, kOp);
}

// Open MPI's AVX op component (4.1.4 and 5.0.11 alike, measured) sums 8- and 16-bit integers with
// saturating vector adds once a buffer is long enough (open-mpi/ompi#8045): 200 + 200 in uint8
// gives 255 there and 144 in scalar code, torch, NCCL and lockstep's own kernels. So these sums go
// through lockstep's wrapping kernel, whatever MPI is underneath.
void SmallIntegerSumCallback(void* in, void* inout, int* len, MPI_Datatype* datatype) {
  DataType dtype = DataType::kUInt16;
  if (*datatype == MPI_UINT8_T) {
    dtype = DataType::kUInt8;
  } else if (*datatype == MPI_INT8_T) {
    dtype = DataType::kInt8;
  } else if (*datatype == MPI_INT16_T) {
    dtype = DataType::kInt16;
  }
  ReduceInto(in, inout, *len, dtype, ReduceOp::kSum);
}

bool IsSmallInteger(DataType dtype) {
  return dtype == DataType::kUInt8 || dtype == DataType::kInt8 || dtype == DataType::kInt16 ||
         dtype == DataType::kUInt16;
}

int OpIndex(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return 1;
    case ReduceOp::kMax:
      return 2;
    case ReduceOp::kProduct:
      return 3;
    default:
      return 0;
  }
}

}  // namespace

MpiTypes::MpiTypes() {
  MPI_Type_contiguous(2, MPI_BYTE, &float16_);
  MPI_Type_commit(&float16_);
  MPI_Type_contiguous(2, MPI_BYTE, &bfloat16_);
  MPI_Type_commit(&bfloat16_);
  g_float16_type.store(float16_);
  MPI_Op_create(&SixteenBitCallback<ReduceOp::kSum>, /*commute=*/1, &sixteen_bit_ops_[0]);
  MPI_Op_create(&SixteenBitCallback<ReduceOp::kMin>, 1, &sixteen_bit_ops_[1]);
  MPI_Op_create(&SixteenBitCallback<ReduceOp::kMax>, 1, &sixteen_bit_ops_[2]);
  MPI_Op_create(&SixteenBitCallback<ReduceOp::kProduct>, 1, &sixteen_bit_ops_[3]);
  MPI_Op_create(&SmallIntegerSumCallback, 1, &small_integer_sum_);
}

MpiTypes::~MpiTypes() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Op& op : sixteen_bit_ops_) MPI_Op_free(&op);
  MPI_Op_free(&small_integer_sum_);
  MPI_Type_free(&float16_);
  MPI_Type_free(&bfloat16_);
}

MPI_Datatype MpiTypes::Datatype(DataType dtype) const {
  switch (dtype) {
    case DataType::kUInt8:
      return MPI_UINT8_T;
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kInt16:
      return MPI_INT16_T;
    case DataType::kUInt16:
      return MPI_UINT16_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kFloat16:
      return float16_;
    case DataType::kBFloat16:
      return bfloat16_;
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kBool:
      return MPI_UINT8_T;  // 0/1 bytes; reduced with logical ops
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiTypes::Op(ReduceOp op, DataType dtype) const {
  if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
    return sixteen_bit_ops_[OpIndex(op)];
  }
  if (dtype == DataType::kBool) {
    // On 0/1 values: any (Sum, Max) and all (Min, Product).
    return (op == ReduceOp::kMin || op == ReduceOp::kProduct) ? MPI_LAND : MPI_LOR;
  }
  const bool sum = op == ReduceOp::kSum || op == ReduceOp::kAverage;
  if (sum && IsSmallInteger(dtype)) return small_integer_sum_;
  switch (op) {
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kProduct:
      return MPI_PROD;
    default:
      return MPI_SUM;
  }
}

}  // namespace lockstep
