#include "submit/handle_table.h"

#include <cstdio>
#include <exception>
#include <string>

#include "backends/gpu_collectives.h"

namespace lockstep {

Handle HandleTable::Allocate(DoneCallback on_done) {
  std::lock_guard<std::mutex> lock(mutex_);
  Handle handle = next_++;
  Slot slot;
  slot.on_done = std::move(on_done);
  slots_.emplace(handle, std::move(slot));
  return handle;
}

void HandleTable::Complete(Handle handle, Status status, OpResult result) {
  DoneCallback on_done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(handle);
    if (it == slots_.end() || it->second.done) return;
    if (!it->second.on_done) {  // a waiter takes the outcome
      it->second.done = true;
      it->second.status = std::move(status);
      it->second.result = std::move(result);
    } else {
      on_done = std::move(it->second.on_done);
      slots_.erase(it);
    }
  }
  if (!on_done) {
    cv_.notify_all();
    return;
  }
  // Outside the lock: the callback may enqueue more work (a framework scheduling the
  // ops that consume this result).
  Order(&status, &result);
  // Runs on the background thread: an exception escaping it would stop the engine
  // and fail every other rank's collectives, so it stops here. Framework callbacks
  // report their own errors through their own channels; this is the last resort.
  try {
    on_done(status, std::move(result));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[lockstep] error: the completion callback of handle %lld threw: %s\n",
                 static_cast<long long>(handle), e.what());
  } catch (...) {
    std::fprintf(stderr, "[lockstep] error: the completion callback of handle %lld threw\n",
                 static_cast<long long>(handle));
  }
}

void HandleTable::Discard(Handle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_.erase(handle);
}

bool HandleTable::Poll(Handle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(handle);
  if (it == slots_.end()) throw Error("unknown handle " + std::to_string(handle));
  return it->second.done;
}

bool HandleTable::DoneOrUnknown(Handle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(handle);
  return it == slots_.end() || it->second.done;
}

OpResult HandleTable::Wait(Handle handle) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Built only when needed: this runs on every synchronous op.
  const auto unknown = [handle] {
    return Error("unknown handle " + std::to_string(handle) + " (already waited on?)");
  };
  if (!slots_.count(handle)) throw unknown();
  // Look the slot up again after every wake-up: another waiter may have taken it, and
  // other threads' Allocate() may have rehashed the table.
  cv_.wait(lock, [&] {
    auto it = slots_.find(handle);
    return it == slots_.end() || it->second.done;
  });
  auto it = slots_.find(handle);
  if (it == slots_.end()) throw unknown();
  Slot slot = std::move(it->second);
  slots_.erase(it);
  lock.unlock();  // ordering calls into CUDA
  if (slot.status.ok()) Order(&slot.status, &slot.result);
  if (!slot.status.ok()) throw Error(slot.status.message(), slot.status.code());
  return std::move(slot.result);
}

void HandleTable::OrderOwnStream(const OpResult& result) {
  if (result.gpu_done) GpuStreamWaitDone(*result.gpu_done, result.gpu_stream);
}

void HandleTable::Order(Status* status, OpResult* result) const {
  if (!status->ok() || !result->gpu_done) return;
  try {
    order_(*result);
  } catch (const std::exception& e) {
    *status = Status::Aborted(e.what());
    *result = OpResult();
  }
  // gpu_done stays: a frontend may order another stream after it too (torch, when the
  // handle is synchronized under another stream than the one it was submitted on).
}

}  // namespace lockstep
