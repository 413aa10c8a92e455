#include "submit/tensor_queue.h"

namespace lockstep {
namespace {

// The global set's names stand for themselves (the common case costs nothing extra);
// other sets' names get their id appended after a separator no name uses.
std::string InFlightKey(int32_t process_set_id, const std::string& name) {
  if (process_set_id == 0) return name;
  return name + '\x1f' + std::to_string(process_set_id);
}

Error SubmittedAgain(const std::string& name) {
  return Error("tensor '" + name +
                   "' was submitted again while its previous collective is still in flight; "
                   "wait for it (synchronize) or use a different name",
               Status::Code::kInvalidArgument);
}

}  // namespace

void TensorQueue::Push(TensorEntry* entries, size_t count, bool wake) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) throw Error(close_reason_);
    // All or nothing: when a name is in flight already (or repeats within the batch),
    // the names this batch added are taken back. No scratch containers: this runs on
    // every op's path.
    size_t added = 0;
    for (; added < count; ++added) {
      const TensorEntry& entry = entries[added];
      if (IsControl(entry.request.op)) continue;  // not a tensor: its name is no key
      if (!in_flight_.insert(InFlightKey(entry.spec.process_set_id, entry.request.name)).second) {
        break;
      }
    }
    if (added < count) {
      for (size_t i = 0; i < added; ++i) {
        if (!IsControl(entries[i].request.op)) {
          in_flight_.erase(InFlightKey(entries[i].spec.process_set_id, entries[i].request.name));
        }
      }
      throw SubmittedAgain(entries[added].request.name);
    }
    for (size_t i = 0; i < count; ++i) entries_.push_back(std::move(entries[i]));
  }
  if (wake) cv_.notify_one();
}

bool TensorQueue::HasEntries() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !entries_.empty();
}

void TensorQueue::PopAll(std::vector<TensorEntry>* out) {
  out->clear();
  std::lock_guard<std::mutex> lock(mutex_);
  out->swap(entries_);  // the queue keeps the caller's old capacity: no allocation per cycle
}

void TensorQueue::Release(int32_t process_set_id, const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.erase(InFlightKey(process_set_id, name));
}

bool TensorQueue::WaitForWork(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool woken = cv_.wait_for(lock, timeout, [&] { return !entries_.empty() || woken_; });
  woken_ = false;
  return woken;
}

void TensorQueue::Wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  cv_.notify_one();
}

void TensorQueue::Close(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  close_reason_ = reason;
}

}  // namespace lockstep
