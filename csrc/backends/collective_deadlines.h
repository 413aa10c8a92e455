// Timeout bookkeeping of one process set's queued GPU collectives, without CUDA: the
// GPU backend reports when it saw each collective start (its start event, recorded
// after the waits for the inputs, completed) and finish, and asks which one has run
// longer than LOCKSTEP_NCCL_TIMEOUT_SECONDS. Time spent waiting for inputs (a slow
// backward, a peer still computing) never counts. Not thread-safe: the caller locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace lockstep {

class CollectiveDeadlines {
 public:
  using Clock = std::chrono::steady_clock;
  // timeout_seconds == 0: never time out.
  explicit CollectiveDeadlines(double timeout_seconds) : timeout_seconds_(timeout_seconds) {}

  // A collective queued on the set's stream, in stream order; returns its id.
  uint64_t Add(std::vector<std::string> names);
  // The GPU reached the collective's start event; seen at `at` (the first call counts).
  void Started(uint64_t id, Clock::time_point at);
  // The GPU finished it (and, in stream order, everything queued before it).
  void Finished(uint64_t id);

  // Why the oldest started, unfinished collective is past the timeout, naming its
  // tensors; "" if none is.
  std::string Expired(Clock::time_point now) const;
  // The tensors of every unfinished collective, oldest first (for messages).
  std::vector<std::string> PendingNames() const;
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  double timeout_seconds() const { return timeout_seconds_; }

 private:
  struct Entry {
    uint64_t id;
    std::vector<std::string> names;
    bool started = false;
    Clock::time_point started_at;
  };
  double timeout_seconds_;
  uint64_t next_id_ = 1;
  std::deque<Entry> entries_;  // oldest first
};

}  // namespace lockstep
