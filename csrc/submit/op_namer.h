// Deterministic names for ops the user did not name. Ranks match tensors by name,
// and every rank submits its unnamed ops of one kind in the same order, so a counter
// per kind yields matching names on every rank, for every frontend alike.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace lockstep {

class OpNamer {
 public:
  // "allreduce.noname.3", or "allreduce.noname.<generation>.3" after a join. Each
  // process set counts on its own ("allreduce.noname.ps<id>.3" outside the global
  // set): only the members of a set submit its ops.
  std::string NameFor(const std::string& kind, int32_t process_set_id = 0);
  // Ranks that joined early submitted fewer unnamed ops than the others, so their
  // counters disagree afterwards. A join completes at the same logical point on every
  // rank, so restarting there realigns them; the generation keeps the new names
  // distinct from any earlier ones still in flight.
  void StartNewGeneration();

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, int64_t> counters_;  // by kind, or kind + "/ps<id>"
  int64_t generation_ = 0;
};

}  // namespace lockstep
