#include "engine/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace lockstep {
namespace {

// All tracks live in one trace process; each tensor is a thread track inside it.
constexpr int kProcessId = 1;
// Large enough that the background thread rarely waits on the disk while holding the lock.
constexpr size_t kFileBufferBytes = 1 << 20;

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Length of the well-formed UTF-8 sequence starting at text[i], or 0 if there is none
// (overlong forms, surrogates and code points above U+10FFFF are not well formed).
size_t Utf8SequenceLength(const std::string& text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  unsigned char lead = byte(0);
  size_t length = lead < 0x80 ? 1 : lead < 0xC2 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (length == 0 || lead > 0xF4 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if (!IsContinuation(byte(k))) return 0;
  }
  // The second byte's range narrows for a few lead bytes.
  if (lead == 0xE0 && byte(1) < 0xA0) return 0;
  if (lead == 0xED && byte(1) > 0x9F) return 0;
  if (lead == 0xF0 && byte(1) < 0x90) return 0;
  if (lead == 0xF4 && byte(1) > 0x8F) return 0;
  return length;
}

void AppendEscapedAscii(char c, std::string* out) {
  switch (c) {
    case '"':
      *out += "\\\"";
      return;
    case '\\':
      *out += "\\\\";
      return;
    case '\n':
      *out += "\\n";
      return;
    case '\r':
      *out += "\\r";
      return;
    case '\t':
      *out += "\\t";
      return;
  }
  if (static_cast<unsigned char>(c) < 0x20) {
    char escaped[8];
    std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
    *out += escaped;
  } else {
    *out += c;
  }
}

// The fields every event carries; callers append the rest and the closing brace.
std::string EventPrefix(const char* phase, int64_t micros, int track_id) {
  return std::string("{\"ph\":\"") + phase + "\",\"ts\":" + std::to_string(micros) +
         ",\"pid\":" + std::to_string(kProcessId) + ",\"tid\":" + std::to_string(track_id);
}

std::string TrackMetadata(int track_id, const std::string& tensor_name) {
  std::string prefix = "{\"ph\":\"M\",\"pid\":" + std::to_string(kProcessId) +
                       ",\"tid\":" + std::to_string(track_id);
  return prefix + ",\"name\":\"thread_name\",\"args\":{\"name\":" + JsonQuote(tensor_name) +
         "}},\n" + prefix +
         ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" + std::to_string(track_id) +
         "}}";
}

}  // namespace

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  size_t i = 0;
  while (i < text.size()) {
    size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out += "\\ufffd";
      ++i;
    } else if (length == 1) {
      AppendEscapedAscii(text[i], &out);
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return out + "\"";
}

Timeline::~Timeline() {
  try {
    Stop();
  } catch (const std::exception&) {
    // A destructor cannot report the failure; Stop() called explicitly does.
  }
}

void Timeline::Start(const std::string& path, bool mark_cycles) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A write failure in the previous file is dropped: the caller asked for a new file.
  if (active()) CloseFile();
  file_ = std::ofstream();
  file_buffer_.resize(kFileBufferBytes);
  file_.rdbuf()->pubsetbuf(file_buffer_.data(), static_cast<std::streamsize>(file_buffer_.size()));
  file_.open(path, std::ios::out | std::ios::trunc);
  if (!file_.is_open()) {
    throw std::runtime_error("cannot open timeline file \"" + path + "\": " + std::strerror(errno));
  }
  path_ = path;
  mark_cycles_ = mark_cycles;
  start_ = std::chrono::steady_clock::now();
  tracks_.clear();
  file_ << "[\n{\"ph\":\"M\",\"pid\":" << kProcessId
        << ",\"name\":\"process_name\",\"args\":{\"name\":\"lockstep\"}}";
  active_.store(true, std::memory_order_release);
}

void Timeline::Stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active()) return;
  if (!CloseFile()) throw std::runtime_error("failed writing timeline file \"" + path_ + "\"");
}

void Timeline::Begin(const std::string& tensor_name, const std::string& phase) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active()) return;  // stopped while we waited for the lock
  Track& track = TrackFor(tensor_name);
  ++track.open_phases;
  WriteEvent(EventPrefix("B", NowMicros(), track.id) + ",\"name\":" + JsonQuote(phase) + "}");
}

void Timeline::End(const std::string& tensor_name) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active()) return;
  auto it = tracks_.find(tensor_name);
  // An unmatched "E" would make viewers reject or misdraw the track.
  if (it == tracks_.end() || it->second.open_phases == 0) return;
  --it->second.open_phases;
  WriteEvent(EventPrefix("E", NowMicros(), it->second.id) + "}");
}

void Timeline::Slice(const std::string& tensor_name, const std::string& phase,
                     std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active()) return;
  auto micros = [this](std::chrono::steady_clock::time_point t) {
    const auto since = std::chrono::duration_cast<std::chrono::microseconds>(t - start_).count();
    return std::max<int64_t>(since, 0);
  };
  const int64_t begin = micros(start);
  const int64_t duration = std::max<int64_t>(micros(end) - begin, 0);
  Track& track = TrackFor(tensor_name);
  WriteEvent(EventPrefix("X", begin, track.id) + ",\"dur\":" + std::to_string(duration) +
             ",\"name\":" + JsonQuote(phase) + "}");
}

void Timeline::Instant(const std::string& tensor_name, const std::string& label) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active()) return;
  Track& track = TrackFor(tensor_name);
  WriteEvent(EventPrefix("i", NowMicros(), track.id) + ",\"s\":\"t\",\"name\":" + JsonQuote(label) +
             "}");
}

void Timeline::MarkCycle() {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active() || !mark_cycles_) return;
  WriteEvent(EventPrefix("i", NowMicros(), 0) + ",\"s\":\"g\",\"name\":\"CYCLE_START\"}");
}

Timeline::Track& Timeline::TrackFor(const std::string& tensor_name) {
  auto it = tracks_.find(tensor_name);
  if (it != tracks_.end()) return it->second;
  Track& track = tracks_[tensor_name];
  track.id = static_cast<int>(tracks_.size());
  WriteEvent(TrackMetadata(track.id, tensor_name));
  return track;
}

int64_t Timeline::NowMicros() const {
  auto elapsed = std::chrono::steady_clock::now() - start_;
  return std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
}

// Every event follows the process metadata written by Start(), hence the leading comma.
void Timeline::WriteEvent(const std::string& event) { file_ << ",\n" << event; }

bool Timeline::CloseFile() {
  // Close open slices so every track in the file is balanced.
  int64_t now = NowMicros();
  for (auto& [name, track] : tracks_) {
    for (; track.open_phases > 0; --track.open_phases) {
      WriteEvent(EventPrefix("E", now, track.id) + "}");
    }
  }
  file_ << "\n]\n";
  file_.close();
  bool ok = !file_.fail();
  active_.store(false, std::memory_order_release);
  return ok;
}

}  // namespace lockstep
