// Handles: how a user thread waits for an op the background thread completes.
#pragma once

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "lockstep/values.h"

namespace lockstep {

class HandleTable {
 public:
  // Orders a device result's stream after lockstep's GPU work (GpuStreamWaitDone on
  // result.gpu_stream); throws Error. Replaceable so that unit tests can watch when
  // it happens without a GPU.
  using StreamOrder = void (*)(const OpResult& result);
  explicit HandleTable(StreamOrder order = &OrderOwnStream) : order_(order) {}

  // With a callback, Complete() hands the outcome to it (on the completing thread) and
  // forgets the handle; nobody waits on such a handle.
  Handle Allocate(DoneCallback on_done = nullptr);
  // Device results: a callback's stream is ordered here, before the callback runs
  // (a frontend that completes through callbacks has no later moment); a waited-on
  // handle keeps the done event until Wait(), so the framework's stream is not held
  // behind the collective meanwhile.
  void Complete(Handle handle, Status status, OpResult result);
  // Forgets a handle whose op was never queued.
  void Discard(Handle handle);
  bool Poll(Handle handle);  // throws Error for an unknown handle
  // Done, or unknown (so that Wait() reports it): never throws.
  bool DoneOrUnknown(Handle handle);
  // Blocks until done, forgets the handle, and throws Error if the op failed. Device
  // results: their op's stream waits on lockstep's done event from here on.
  OpResult Wait(Handle handle);

  static void OrderOwnStream(const OpResult& result);

 private:
  struct Slot {
    bool done = false;
    DoneCallback on_done;
    Status status;
    OpResult result;
  };
  // The outcome after ordering a device result's stream: a failure to order it fails
  // the op (its output would be read before it is written).
  void Order(Status* status, OpResult* result) const;

  StreamOrder order_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::unordered_map<Handle, Slot> slots_;
  Handle next_ = 1;
};

}  // namespace lockstep
