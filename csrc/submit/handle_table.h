// Handles: how a user thread waits for an op the background thread completes.
#pragma once

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "lockstep/lockstep.h"

namespace lockstep {

class HandleTable {
 public:
  // With a callback, Complete() hands the outcome to it (on the completing thread) and
  // forgets the handle; nobody waits on such a handle.
  Handle Allocate(DoneCallback on_done = nullptr);
  void Complete(Handle handle, Status status, OpResult result);
  // Forgets a handle whose op was never queued.
  void Discard(Handle handle);
  bool Poll(Handle handle);  // throws Error for an unknown handle
  // Done, or unknown (so that Wait() reports it): never throws.
  bool DoneOrUnknown(Handle handle);
  // Blocks until done, forgets the handle, and throws Error if the op failed.
  OpResult Wait(Handle handle);

 private:
  struct Slot {
    bool done = false;
    DoneCallback on_done;
    Status status;
    OpResult result;
  };
  std::mutex mutex_;
  std::condition_variable cv_;
  std::unordered_map<Handle, Slot> slots_;
  Handle next_ = 1;
};

}  // namespace lockstep
