#include "backends/nccl/nccl_library.h"

#include <dlfcn.h>

#include <mutex>

namespace lockstep {

namespace {

constexpr const char* kSoname = "libnccl.so.2";

// The handle of the process's NCCL: a copy already loaded, else a fresh one.
void* OpenNccl(NcclLibrary* library) {
  if (void* handle = dlopen(kSoname, RTLD_NOW | RTLD_NOLOAD)) {
    library->source = "already loaded by the process";
    return handle;
  }
  std::string errors;
  for (const char* candidate : {kSoname, LOCKSTEP_NCCL_BUILD_LIBRARY}) {
    if (void* handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL)) {
      library->source = "opened by lockstep";
      return handle;
    }
    const char* error = dlerror();
    errors += std::string(errors.empty() ? "" : "; ") + (error ? error : candidate);
  }
  library->load_error = "libnccl.so.2 could not be loaded (" + errors + ")";
  return nullptr;
}

template <typename Function>
bool Resolve(void* handle, const char* symbol, Function* out, NcclLibrary* library) {
  *out = reinterpret_cast<Function>(dlsym(handle, symbol));
  if (*out == nullptr && library->load_error.empty()) {
    library->load_error = std::string("libnccl.so.2 lacks ") + symbol + " (NCCL too old?)";
  }
  return *out != nullptr;
}

bool ResolveAll(void* handle, NcclLibrary* l) {
  bool ok = Resolve(handle, "ncclGetVersion", &l->GetVersion, l);
  ok &= Resolve(handle, "ncclGetErrorString", &l->GetErrorString, l);
  ok &= Resolve(handle, "ncclGetUniqueId", &l->GetUniqueId, l);
  ok &= Resolve(handle, "ncclCommInitRank", &l->CommInitRank, l);
  ok &= Resolve(handle, "ncclCommInitRankConfig", &l->CommInitRankConfig, l);
  ok &= Resolve(handle, "ncclCommDestroy", &l->CommDestroy, l);
  ok &= Resolve(handle, "ncclCommAbort", &l->CommAbort, l);
  ok &= Resolve(handle, "ncclCommGetAsyncError", &l->CommGetAsyncError, l);
  ok &= Resolve(handle, "ncclAllReduce", &l->AllReduce, l);
  ok &= Resolve(handle, "ncclBroadcast", &l->Broadcast, l);
  ok &= Resolve(handle, "ncclAllGather", &l->AllGather, l);
  ok &= Resolve(handle, "ncclReduceScatter", &l->ReduceScatter, l);
  ok &= Resolve(handle, "ncclReduce", &l->Reduce, l);
  ok &= Resolve(handle, "ncclSend", &l->Send, l);
  ok &= Resolve(handle, "ncclRecv", &l->Recv, l);
  ok &= Resolve(handle, "ncclGroupStart", &l->GroupStart, l);
  ok &= Resolve(handle, "ncclGroupEnd", &l->GroupEnd, l);
  return ok;
}

NcclLibrary Load() {
  NcclLibrary library;
  void* handle = OpenNccl(&library);
  if (handle == nullptr || !ResolveAll(handle, &library)) return library;
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(library.GetVersion), &where) != 0 && where.dli_fname) {
    library.path = where.dli_fname;
  }
  if (library.GetVersion(&library.version) != ncclSuccess) {
    library.load_error = "ncclGetVersion failed";
    return library;
  }
  // NCCL 2.28 exports ncclCommRevoke too, but revoking a nonblocking communicator and
  // then destroying it crashed there: on the first GPU run (2.28.9, from torch) every
  // rank whose collective timed out died with SIGSEGV right after the revoke. 2.28
  // gets ncclCommAbort instead, as where the symbol is missing.
  if (library.version >= kFirstRevokingNccl) {
    library.CommRevoke =
        reinterpret_cast<NcclLibrary::CommRevokeFn>(dlsym(handle, "ncclCommRevoke"));
  }
  library.loaded = true;
  return library;
}

}  // namespace

const NcclLibrary& LoadNcclLibrary() {
  // dlopen's handles are process-wide, so is this table.
  static const NcclLibrary library = Load();
  return library;
}

}  // namespace lockstep
