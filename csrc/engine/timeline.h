// Chrome trace / Perfetto JSON writer for per-tensor activity. Each tensor name gets
// its own track; phases (e.g. "NEGOTIATE_ALLREDUCE", "QUEUE", "MPI_ALLREDUCE") are
// begin/end slices on it. The background thread writes events while user threads
// start and stop the timeline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/phase_recorder.h"

namespace lockstep {

class Timeline : public PhaseRecorder {
 public:
  Timeline() = default;
  ~Timeline() override;
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Throws std::runtime_error if the file can't be opened. Restarting closes the
  // previous file first (so restarting on the same path is safe).
  void Start(const std::string& path, bool mark_cycles);
  // Ends any open phases, writes the closing bracket and closes the file. Idempotent.
  // Throws std::runtime_error if writing the file failed (e.g. disk full).
  void Stop();
  bool active() const override { return active_.load(std::memory_order_acquire); }

  void Begin(const std::string& tensor_name, const std::string& phase) override;
  // Ends that tensor's innermost open phase; ignored if none is open.
  void End(const std::string& tensor_name) override;
  // A complete slice ("X") with times from the past, e.g. a GPU phase measured with
  // CUDA events; times before Start() are clamped to it.
  void Slice(const std::string& tensor_name, const std::string& phase,
             std::chrono::steady_clock::time_point start,
             std::chrono::steady_clock::time_point end) override;
  void Instant(const std::string& tensor_name, const std::string& label);
  // A global instant event at the start of a background cycle, only when mark_cycles.
  void MarkCycle();

 private:
  struct Track {
    int id = 0;
    int open_phases = 0;
  };

  Track& TrackFor(const std::string& tensor_name);
  int64_t NowMicros() const;
  void WriteEvent(const std::string& event);
  bool CloseFile();  // false if any write failed

  std::atomic<bool> active_{false};
  std::mutex mutex_;
  // Everything below is guarded by mutex_.
  std::ofstream file_;
  std::string path_;
  std::vector<char> file_buffer_;
  bool mark_cycles_ = false;
  std::chrono::steady_clock::time_point start_;
  std::unordered_map<std::string, Track> tracks_;
};

// JSON string literal (with quotes) for arbitrary bytes: control characters are
// escaped and invalid UTF-8 becomes U+FFFD, so the file always parses.
std::string JsonQuote(const std::string& text);

}  // namespace lockstep
