// lockstep's dtypes and reduce ops in NCCL's terms, which responses NCCL can run
// exactly (the rest are staged through host memory), and NCCL failures as
// lockstep::Error naming the tensors.
#pragma once

#include <nccl.h>

#include <optional>
#include <string>
#include <vector>

#include "backends/nccl/nccl_library.h"
#include "lockstep/types.h"
#include "wire/message.h"

namespace lockstep {

// NCCL's type for `dtype`; nullopt where NCCL has none (int16, uint16). bool travels
// as uint8 (0 or 1), with the reduce op mapped by NcclRedOpFor.
std::optional<ncclDataType_t> NcclDataTypeOf(DataType dtype);

// The NCCL op that computes `op` on `dtype` exactly; nullopt where none does (Adasum).
// Average is NCCL's Sum: the division happens afterwards in the tensor's dtype with
// Horovod's arithmetic (postscale / size), as on the host. On bool (0/1 as uint8), Sum
// is a logical or (Max) and Product a logical and (Min); an uint8 sum could wrap.
std::optional<ncclRedOp_t> NcclRedOpFor(ReduceOp op, DataType dtype);

// Why NCCL cannot run this response on the device (it then goes through host
// staging), or empty when it can.
std::string WhyStaged(const Response& response);

// "NCCL <what> failed for tensor(s) ...: <NCCL's message> (ncclXxx)"; `library` may be
// unloaded (the message then has the numeric code only).
std::string DescribeNcclFailure(ncclResult_t result, const char* what,
                                const std::vector<std::string>& names, const NcclLibrary& library);
// Throws Error(DescribeNcclFailure(...)) unless result is ncclSuccess.
void CheckNccl(ncclResult_t result, const char* what, const std::vector<std::string>& names,
               const NcclLibrary& library);

}  // namespace lockstep
