#include "backends/gpu_info.h"

#include <nccl.h>

#include "backends/nccl/gpu_probe.h"
#include "backends/nccl/nccl_library.h"

namespace lockstep {

int BuiltNcclVersion() { return NCCL_VERSION_CODE; }

namespace {

NcclInfo Query() {
  NcclInfo info;
  info.built_version = NCCL_VERSION_CODE;
  const NcclLibrary& library = LoadNcclLibrary();
  if (library.loaded) {
    info.runtime_version = library.version;
    info.library_path = library.path;
    info.source = library.source;
  }
  const GpuProbe probe = ProbeGpus();
  info.cuda_devices = probe.devices;
  if (!probe.problem.empty()) {
    info.problem = probe.problem;
  } else if (!library.loaded) {
    info.problem = library.load_error;
  }
  return info;
}

}  // namespace

NcclInfo QueryNcclInfo() {
  // The library is opened once per process and the driver's answer does not change;
  // probing again would cost milliseconds per call (and per Init()).
  static const NcclInfo info = Query();
  return info;
}

}  // namespace lockstep
