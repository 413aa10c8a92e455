#include "submit/op_namer.h"

namespace lockstep {

std::string OpNamer::NameFor(const std::string& kind, int32_t process_set_id) {
  const std::string set = process_set_id == 0 ? "" : "ps" + std::to_string(process_set_id);
  int64_t index, generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    index = counters_[set.empty() ? kind : kind + "/" + set]++;
    generation = generation_;
  }
  std::string name = kind + ".noname.";
  if (!set.empty()) name += set + ".";
  if (generation != 0) name += std::to_string(generation) + ".";
  return name + std::to_string(index);
}

void OpNamer::StartNewGeneration() {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.clear();
  ++generation_;
}

}  // namespace lockstep
