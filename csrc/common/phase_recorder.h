// Where the collectives mark the phases of each tensor (packing, the collective,
// unpacking) for the timeline. An interface here, so the backends below the engine
// can report phases without knowing the engine's timeline writer.
#pragma once

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
};

}  // namespace lockstep
