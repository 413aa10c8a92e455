// Mapping of lockstep dtypes and reduce ops onto MPI handles, including the custom
// datatypes and user-defined ops for float16 and bfloat16, which MPI lacks, and a
// wrapping sum for 8- and 16-bit integers, which some MPIs saturate.
#pragma once

#include <mpi.h>

#include "lockstep/types.h"

namespace lockstep {

class MpiTypes {
 public:
  MpiTypes();  // creates the custom types and ops; needs MPI initialized
  ~MpiTypes();
  MpiTypes(const MpiTypes&) = delete;
  MpiTypes& operator=(const MpiTypes&) = delete;

  MPI_Datatype Datatype(DataType dtype) const;
  // The op that reduces `dtype` for `op` (Average reduces by Sum; callers divide).
  MPI_Op Op(ReduceOp op, DataType dtype) const;

 private:
  MPI_Datatype float16_ = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16_ = MPI_DATATYPE_NULL;
  MPI_Op sixteen_bit_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op small_integer_sum_ = MPI_OP_NULL;
};

}  // namespace lockstep
