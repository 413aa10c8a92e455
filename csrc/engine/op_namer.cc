#include "engine/op_namer.h"

namespace lockstep {

std::string OpNamer::NameFor(const std::string& kind) {
  int64_t index, generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    index = counters_[kind]++;
    generation = generation_;
  }
  std::string name = kind + ".noname.";
  if (generation != 0) name += std::to_string(generation) + ".";
  return name + std::to_string(index);
}

void OpNamer::StartNewGeneration() {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.clear();
  ++generation_;
}

}  // namespace lockstep
