// Whether CUDA can run in this process, asked of the CUDA runtime (linked statically,
// so the library loads where no driver is installed and the answer is a message).
#pragma once

#include <string>

namespace lockstep {

struct GpuProbe {
  int devices = 0;
  std::string problem;  // empty when at least one GPU is usable
};

GpuProbe ProbeGpus();

}  // namespace lockstep
