#include "submit/tensor_queue.h"

#include <string_view>
#include <unordered_set>

namespace lockstep {
namespace {

// The global set's names stand for themselves (the common case costs nothing extra);
// other sets' names get their id appended after a separator no name uses.
std::string InFlightKey(int32_t process_set_id, const std::string& name) {
  if (process_set_id == 0) return name;
  return name + '\x1f' + std::to_string(process_set_id);
}

// The index of the first key that repeats an earlier one, or -1. Batches are mostly
// a single op, where this costs nothing.
int FirstRepeat(const std::vector<std::string>& keys) {
  if (keys.size() < 2) return -1;
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!seen.insert(keys[i]).second) return static_cast<int>(i);
  }
  return -1;
}

Error SubmittedAgain(const std::string& name) {
  return Error("tensor '" + name +
                   "' was submitted again while its previous collective is still in flight; "
                   "wait for it (synchronize) or use a different name",
               Status::Code::kInvalidArgument);
}

}  // namespace

void TensorQueue::Push(std::vector<TensorEntry> entries, bool wake) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) throw Error(close_reason_);
    // Keys are built once and then moved in: this runs on every op's path.
    std::vector<std::string> keys;
    std::vector<const std::string*> names;
    keys.reserve(entries.size());
    names.reserve(entries.size());
    for (const TensorEntry& entry : entries) {
      if (IsControl(entry.request.op)) continue;  // not a tensor: its name is no key
      keys.push_back(InFlightKey(entry.spec.process_set_id, entry.request.name));
      names.push_back(&entry.request.name);
      if (in_flight_.count(keys.back())) throw SubmittedAgain(entry.request.name);
    }
    const int repeat = FirstRepeat(keys);
    if (repeat >= 0) throw SubmittedAgain(*names[repeat]);
    for (std::string& key : keys) in_flight_.insert(std::move(key));
    for (TensorEntry& entry : entries) entries_.push_back(std::move(entry));
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
