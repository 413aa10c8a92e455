// libnccl, opened at run time rather than linked, for two reasons: a process holds one
// NCCL (torch and JAX ship their own libnccl.so.2, and a second copy would keep its own
// state), and a build with the GPU backend must still import and run its CPU work
// where no libnccl is installed. The copy already loaded into the process is used if
// there is one, else libnccl.so.2 from the loader's path, else the library the build
// found.
#pragma once

#include <nccl.h>

#include <string>

namespace lockstep {

// The first NCCL whose ncclCommRevoke lockstep uses (see nccl_library.cc).
constexpr int kFirstRevokingNccl = 22900;

struct NcclLibrary {
  // The entry points lockstep uses, with NCCL's own signatures.
  decltype(&ncclGetVersion) GetVersion = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
  decltype(&ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&ncclCommInitRank) CommInitRank = nullptr;
  decltype(&ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclCommAbort) CommAbort = nullptr;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&ncclAllReduce) AllReduce = nullptr;
  decltype(&ncclBroadcast) Broadcast = nullptr;
  decltype(&ncclAllGather) AllGather = nullptr;
  decltype(&ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&ncclReduce) Reduce = nullptr;
  decltype(&ncclSend) Send = nullptr;
  decltype(&ncclRecv) Recv = nullptr;
  decltype(&ncclGroupStart) GroupStart = nullptr;
  decltype(&ncclGroupEnd) GroupEnd = nullptr;
  // Optional (NCCL 2.29+, kFirstRevokingNccl; null where the loaded NCCL is older):
  // stops in-flight work and lets lockstep's stream drain before the communicator is
  // destroyed, where ncclCommAbort would free memory that queued kernels still use.
  using CommRevokeFn = ncclResult_t (*)(ncclComm_t comm, int revoke_flags);
  CommRevokeFn CommRevoke = nullptr;

  bool loaded = false;
  int version = 0;         // ncclGetVersion()
  std::string path;        // the file the symbols came from
  std::string source;      // see NcclInfo::source
  std::string load_error;  // why it could not be loaded, when !loaded
};

// Opens the library on the first call; later calls return the same result.
const NcclLibrary& LoadNcclLibrary();

}  // namespace lockstep
