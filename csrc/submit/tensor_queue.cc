#include "submit/tensor_queue.h"

namespace lockstep {
namespace {

// The global set's names stand for themselves (the common case costs nothing extra);
// other sets' names get their id appended after a separator no name uses.
std::string InFlightKey(int32_t process_set_id, const std::string& name) {
  if (process_set_id == 0) return name;
  return name + '\x1f' + std::to_string(process_set_id);
}

}  // namespace

void TensorQueue::Push(std::vector<TensorEntry> entries, bool wake) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) throw Error(close_reason_);
    std::unordered_set<std::string> batch;
    for (const TensorEntry& entry : entries) {
      if (IsControl(entry.request.op)) continue;  // not a tensor: its name is no key
      const std::string& name = entry.request.name;
      const std::string key = InFlightKey(entry.spec.process_set_id, name);
      if (in_flight_.count(key) || !batch.insert(key).second) {
        throw Error("tensor '" + name +
                        "' was submitted again while its previous collective is still in flight; "
                        "wait for it (synchronize) or use a different name",
                    Status::Code::kInvalidArgument);
      }
    }
    for (TensorEntry& entry : entries) {
      if (!IsControl(entry.request.op)) {
        in_flight_.insert(InFlightKey(entry.spec.process_set_id, entry.request.name));
      }
      entries_.push_back(std::move(entry));
    }
  }
  if (wake) cv_.notify_one();
}

bool TensorQueue::HasEntries() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !entries_.empty();
}

std::vector<TensorEntry> TensorQueue::PopAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TensorEntry> out;
  out.swap(entries_);
  return out;
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
