// Where the collectives mark the phases of each tensor (packing, the collective,
// unpacking) for the timeline. An interface here, so the backends below the engine
// can report phases without knowing the engine's timeline writer.
#pragma once

#include <chrono>
#include <string>

namespace lockstep {

class PhaseRecorder {
 public:
  virtual ~PhaseRecorder() = default;
  // Callers skip building phase names while nobody records.
  virtual bool active() const = 0;
  virtual void Begin(const std::string& tensor_name, const std::string& phase) = 0;
  // Ends that tensor's innermost open phase.
  virtual void End(const std::string& tensor_name) = 0;
  // A phase whose times are known only afterwards (the GPU's, measured with CUDA
  // events), written as one complete slice.
  virtual void Slice(const std::string& tensor_name, const std::string& phase,
                     std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end) = 0;
};

}  // namespace lockstep
