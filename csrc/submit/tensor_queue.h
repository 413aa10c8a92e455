// The hand-off between user threads and the background thread: entries waiting to
// be negotiated, and the set of names in flight (a name may not be reused in its
// process set until its op completes; other sets negotiate names of their own).
// Control entries (join, process-set changes) are not tensors and hold no name.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "backends/collectives.h"
#include "lockstep/values.h"
#include "wire/message.h"

namespace lockstep {

struct TensorEntry {
  OpSpec spec;
  Handle handle = 0;
  Request request;
  std::chrono::steady_clock::time_point enqueued_at;
  // Device ops: recorded on spec.stream at enqueue (backends/gpu_collectives.h).
  std::shared_ptr<GpuEvent> ready_event;
};

class TensorQueue {
 public:
  // Adds a batch atomically, so a group is negotiated in one cycle. Throws Error when
  // a name is already in flight or the queue was closed. `wake` false leaves a waiting
  // WaitForWork() asleep (the caller will run the cycle itself).
  // Moves the `count` entries out of `entries`.
  void Push(TensorEntry* entries, size_t count, bool wake = true);
  void Push(std::vector<TensorEntry> entries, bool wake = true) {
    Push(entries.data(), entries.size(), wake);
  }
  bool HasEntries();
  // Moves the queued entries into *out (cleared first); the loop passes the same
  // vector each cycle, so the queue reuses its capacity.
  void PopAll(std::vector<TensorEntry>* out);
  std::vector<TensorEntry> PopAll() {
    std::vector<TensorEntry> out;
    PopAll(&out);
    return out;
  }
  void Release(int32_t process_set_id, const std::string& name);
  // Returns once entries are waiting, Wake() was called, or `timeout` passed; true in
  // the first two cases.
  bool WaitForWork(std::chrono::microseconds timeout);
  void Wake();
  // After Close, Push throws Error(reason).
  void Close(const std::string& reason);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<TensorEntry> entries_;
  std::unordered_set<std::string> in_flight_;  // InFlightKey(set, name)
  bool woken_ = false;
  bool closed_ = false;
  std::string close_reason_;
};

}  // namespace lockstep
