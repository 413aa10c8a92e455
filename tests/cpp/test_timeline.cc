// The timeline writes Chrome-trace JSON: every file must parse after Stop(), tracks
// must be balanced, names escaped, and an inactive timeline must write nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/timeline.h"

namespace lockstep {
namespace {

// A parsed JSON value; only what the checks below need.
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  bool Has(const std::string& key) const { return fields.count(key) > 0; }
  const Json& at(const std::string& key) const { return fields.at(key); }
};

// Strict RFC 8259 parser (throws std::runtime_error), so a malformed file fails a test.
class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : text_(text) {}

  Json ParseDocument() {
    Json value = ParseValue();
    SkipSpace();
    if (pos_ != text_.size()) Fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::runtime_error("invalid JSON at byte " + std::to_string(pos_) + ": " + what);
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::string(" \t\r\n").find(text_[pos_]) != std::string::npos) {
      ++pos_;
    }
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void Expect(char c) {
    if (Peek() != c) Fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool Consume(const std::string& word) {
    if (text_.compare(pos_, word.size(), word) != 0) return false;
    pos_ += word.size();
    return true;
  }

  Json ParseValue() {
    SkipSpace();
    Json value;
    char c = Peek();
    if (c == '{') return ParseObject();
    if (c == '[') return ParseArray();
    if (c == '"') {
      value.kind = Json::Kind::kString;
      value.text = ParseString();
    } else if (Consume("true") || Consume("false")) {
      value.kind = Json::Kind::kBool;
    } else if (Consume("null")) {
      value.kind = Json::Kind::kNull;
    } else {
      value.kind = Json::Kind::kNumber;
      value.number = ParseNumber();
    }
    return value;
  }

  Json ParseObject() {
    Json value;
    value.kind = Json::Kind::kObject;
    Expect('{');
    SkipSpace();
    if (Peek() == '}') return ++pos_, value;
    do {
      SkipSpace();
      std::string key = ParseString();
      SkipSpace();
      Expect(':');
      value.fields[key] = ParseValue();
      SkipSpace();
    } while (Peek() == ',' && ++pos_);
    Expect('}');
    return value;
  }

  Json ParseArray() {
    Json value;
    value.kind = Json::Kind::kArray;
    Expect('[');
    SkipSpace();
    if (Peek() == ']') return ++pos_, value;
    do {
      value.items.push_back(ParseValue());
      SkipSpace();
    } while (Peek() == ',' && ++pos_);
    Expect(']');
    return value;
  }

  double ParseNumber() {
    size_t start = pos_;
    auto digits = [&] {
      size_t first = pos_;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) ++pos_;
      if (pos_ == first) Fail("expected a digit");
    };
    if (Peek() == '-') ++pos_;
    if (Peek() == '0') {
      ++pos_;
    } else {
      digits();
    }
    if (Peek() == '.') ++pos_, digits();
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      digits();
    }
    return std::stod(text_.substr(start, pos_ - start));
  }

  unsigned ParseHex4() {
    if (pos_ + 4 > text_.size()) Fail("short \\u escape");
    std::string hex = text_.substr(pos_, 4);
    if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) Fail("bad \\u");
    pos_ += 4;
    return static_cast<unsigned>(std::stoul(hex, nullptr, 16));
  }

  static void AppendUtf8(unsigned code, std::string* out) {
    if (code < 0x80) {
      *out += static_cast<char>(code);
    } else if (code < 0x800) {
      *out += static_cast<char>(0xC0 | (code >> 6));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      *out += static_cast<char>(0xE0 | (code >> 12));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string ParseString() {
    Expect('"');
    std::string out;
    while (Peek() != '"') {
      if (pos_ >= text_.size()) Fail("unterminated string");
      char c = text_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20) Fail("raw control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = text_[pos_++];
      const std::string simple = "\"\\/bfnrt";
      const std::string decoded = "\"\\/\b\f\n\r\t";
      if (e == 'u') {
        AppendUtf8(ParseHex4(), &out);  // names here never need surrogate pairs
      } else if (simple.find(e) != std::string::npos) {
        out += decoded[simple.find(e)];
      } else {
        Fail("bad escape");
      }
    }
    ++pos_;
    return out;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<Json> ReadEvents(const std::string& path) {
  std::string text = ReadFile(path);
  Json document = JsonParser(text).ParseDocument();
  if (document.kind != Json::Kind::kArray) throw std::runtime_error("trace is not an array");
  return document.items;
}

std::string TempPath(const std::string& name) { return testing::TempDir() + "timeline_" + name; }

// tid of the track whose thread_name metadata names `tensor`, or -1.
int TrackOf(const std::vector<Json>& events, const std::string& tensor) {
  for (const Json& event : events) {
    if (event.at("ph").text == "M" && event.at("name").text == "thread_name" &&
        event.at("args").at("name").text == tensor) {
      return static_cast<int>(event.at("tid").number);
    }
  }
  return -1;
}

// "B:NAME" and "E" (and "i:LABEL") in file order for one track.
std::vector<std::string> SlicesOn(const std::vector<Json>& events, int tid) {
  std::vector<std::string> slices;
  for (const Json& event : events) {
    const std::string& ph = event.at("ph").text;
    if (ph == "M" || !event.Has("tid") || event.at("tid").number != tid) continue;
    slices.push_back(ph == "E" ? ph : ph + ":" + event.at("name").text);
  }
  return slices;
}

// Every track's begins and ends pair up and never go below zero, with times that
// never run backwards: what trace viewers need to draw nested slices.
void ExpectBalancedTracks(const std::vector<Json>& events) {
  std::map<int, int> depth;
  std::map<int, double> last_ts;
  for (const Json& event : events) {
    ASSERT_TRUE(event.Has("ph") && event.Has("pid"));
    const std::string& ph = event.at("ph").text;
    if (ph == "M") continue;
    int tid = static_cast<int>(event.at("tid").number);
    double ts = event.at("ts").number;
    EXPECT_GE(ts, last_ts[tid]);
    last_ts[tid] = ts;
    if (ph == "B") ++depth[tid];
    if (ph == "E") {
      EXPECT_GE(--depth[tid], 0) << "unmatched end on track " << tid;
    }
  }
  for (const auto& [tid, open] : depth) EXPECT_EQ(open, 0) << "open slice on track " << tid;
}

TEST(TimelineJsonCheckTest, RejectsMalformedJson) {
  for (const char* bad : {"[1,]", "[{\"a\":1,}]", "[\"a\nb\"]", "[\"\\x\"]", "[1] 2", "[",
                          "{\"a\" 1}", "[01]", "[-]"}) {
    EXPECT_THROW(JsonParser(bad).ParseDocument(), std::runtime_error) << bad;
  }
  EXPECT_EQ(JsonParser("[\"a\\u0001\\\"\"]").ParseDocument().items[0].text, "a\x01\"");
}

TEST(TimelineTest, WritesNestedPhasesOnOneTrackPerTensor) {
  std::string path = TempPath("nested.json");
  Timeline timeline;
  timeline.Start(path, false);
  EXPECT_TRUE(timeline.active());
  timeline.Begin("grad/a", "NEGOTIATE_ALLREDUCE");
  timeline.End("grad/a");
  timeline.Begin("grad/b", "QUEUE");
  timeline.Begin("grad/a", "ALLREDUCE");
  timeline.Begin("grad/a", "MEMCPY_IN_FUSION_BUFFER");
  timeline.End("grad/a");
  timeline.Begin("grad/a", "MPI_ALLREDUCE");
  timeline.End("grad/a");
  timeline.Instant("grad/b", "CACHE_HIT");
  timeline.End("grad/a");
  timeline.End("grad/b");
  timeline.Stop();
  EXPECT_FALSE(timeline.active());

  std::vector<Json> events = ReadEvents(path);
  ExpectBalancedTracks(events);
  int a = TrackOf(events, "grad/a");
  int b = TrackOf(events, "grad/b");
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(
      SlicesOn(events, a),
      (std::vector<std::string>{"B:NEGOTIATE_ALLREDUCE", "E", "B:ALLREDUCE",
                                "B:MEMCPY_IN_FUSION_BUFFER", "E", "B:MPI_ALLREDUCE", "E", "E"}));
  EXPECT_EQ(SlicesOn(events, b), (std::vector<std::string>{"B:QUEUE", "i:CACHE_HIT", "E"}));
}

TEST(TimelineTest, MetadataPrecedesEachTracksFirstEvent) {
  std::string path = TempPath("metadata.json");
  Timeline timeline;
  timeline.Start(path, false);
  timeline.Instant("x", "first");
  timeline.Begin("x", "QUEUE");
  timeline.End("x");
  timeline.Stop();
  std::vector<Json> events = ReadEvents(path);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0].at("name").text, "process_name");
  EXPECT_EQ(events[1].at("name").text, "thread_name");
  EXPECT_EQ(events[1].at("args").at("name").text, "x");
  int thread_name_records = 0;
  for (const Json& event : events) {
    if (event.at("ph").text == "M" && event.at("name").text == "thread_name") ++thread_name_records;
  }
  EXPECT_EQ(thread_name_records, 1);
}

TEST(TimelineTest, TimestampsAreMicrosecondsSinceStart) {
  std::string path = TempPath("timestamps.json");
  Timeline timeline;
  timeline.Start(path, false);
  timeline.Begin("t", "QUEUE");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timeline.End("t");
  timeline.Stop();
  std::vector<Json> events = ReadEvents(path);
  int t = TrackOf(events, "t");
  double begin = -1;
  double end = -1;
  for (const Json& event : events) {
    if (!event.Has("tid") || event.at("tid").number != t || event.at("ph").text == "M") continue;
    (event.at("ph").text == "B" ? begin : end) = event.at("ts").number;
  }
  EXPECT_GE(begin, 0);
  EXPECT_LT(begin, 5e6);  // relative to Start(), not to the epoch
  EXPECT_GE(end - begin, 20000);
  EXPECT_LT(end - begin, 5e6);
}

TEST(TimelineTest, EscapesQuotesBackslashesAndControlCharactersInNames) {
  const std::vector<std::string> names = {
      "a\"quoted\"", "back\\slash",    "new\nline", "tab\there", std::string("nul\x01\x1f", 5),
      "caf\xC3\xA9", "/dev/\"x\"\\y\r"};
  std::string path = TempPath("escaping.json");
  Timeline timeline;
  timeline.Start(path, false);
  for (const std::string& name : names) {
    timeline.Begin(name, "PHASE \"" + name + "\"");
    timeline.End(name);
  }
  timeline.Stop();
  std::vector<Json> events = ReadEvents(path);
  ExpectBalancedTracks(events);
  for (const std::string& name : names) {
    int tid = TrackOf(events, name);
    ASSERT_GT(tid, 0) << name;
    EXPECT_EQ(SlicesOn(events, tid), (std::vector<std::string>{"B:PHASE \"" + name + "\"", "E"}));
  }
}

TEST(TimelineTest, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(JsonQuote("ok\xFFz"), "\"ok\\ufffdz\"");
  EXPECT_EQ(JsonQuote("\xC3"), "\"\\ufffd\"");                        // truncated sequence
  EXPECT_EQ(JsonQuote("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  EXPECT_EQ(JsonQuote("\xE2\x82\xAC"), "\"\xE2\x82\xAC\"");           // the euro sign is kept
  EXPECT_EQ(JsonQuote("\xF0\x9F\x98\x80"), "\"\xF0\x9F\x98\x80\"");
}

TEST(TimelineTest, StopIsIdempotent) {
  std::string path = TempPath("idempotent.json");
  Timeline timeline;
  timeline.Stop();  // never started: nothing to do
  timeline.Start(path, false);
  timeline.Begin("x", "QUEUE");
  timeline.End("x");
  timeline.Stop();
  std::string first = ReadFile(path);
  timeline.Stop();
  EXPECT_EQ(ReadFile(path), first);
  EXPECT_NO_THROW(ReadEvents(path));
}

TEST(TimelineTest, InactiveTimelineWritesNothing) {
  Timeline never_started;
  never_started.Begin("x", "QUEUE");
  never_started.End("x");
  never_started.Instant("x", "label");
  never_started.MarkCycle();
  EXPECT_FALSE(never_started.active());

  std::string path = TempPath("stopped.json");
  Timeline timeline;
  timeline.Start(path, true);
  timeline.Stop();
  std::string after_stop = ReadFile(path);
  timeline.Begin("y", "QUEUE");
  timeline.End("y");
  timeline.Instant("y", "label");
  timeline.MarkCycle();
  EXPECT_EQ(ReadFile(path), after_stop);
  EXPECT_EQ(ReadEvents(path).size(), 1u);  // only the process metadata
}

int CountCycleMarks(const std::vector<Json>& events) {
  int marks = 0;
  for (const Json& event : events) {
    if (event.at("ph").text == "i" && event.at("s").text == "g") ++marks;
  }
  return marks;
}

TEST(TimelineTest, MarksCyclesOnlyWhenAsked) {
  std::string path = TempPath("cycles.json");
  Timeline timeline;
  timeline.Start(path, false);
  timeline.MarkCycle();
  timeline.Stop();
  EXPECT_EQ(CountCycleMarks(ReadEvents(path)), 0);

  timeline.Start(path, true);
  timeline.MarkCycle();
  timeline.MarkCycle();
  timeline.Stop();
  EXPECT_EQ(CountCycleMarks(ReadEvents(path)), 2);
}

TEST(TimelineTest, StopClosesOpenPhasesAndIgnoresUnmatchedEnds) {
  std::string path = TempPath("unbalanced.json");
  Timeline timeline;
  timeline.Start(path, false);
  timeline.End("never_begun");
  timeline.Begin("x", "ALLREDUCE");
  timeline.Begin("x", "MPI_ALLREDUCE");
  timeline.End("x");
  timeline.End("x");
  timeline.End("x");  // one too many
  timeline.Begin("y", "QUEUE");
  timeline.Begin("y", "MPI_ALLREDUCE");
  timeline.Stop();
  std::vector<Json> events = ReadEvents(path);
  ExpectBalancedTracks(events);
  EXPECT_EQ(TrackOf(events, "never_begun"), -1);
  EXPECT_EQ(SlicesOn(events, TrackOf(events, "y")),
            (std::vector<std::string>{"B:QUEUE", "B:MPI_ALLREDUCE", "E", "E"}));
}

TEST(TimelineTest, StartThrowsWhenFileCannotBeOpened) {
  Timeline timeline;
  EXPECT_THROW(timeline.Start("/nonexistent-dir/for/timeline.json", false), std::runtime_error);
  EXPECT_FALSE(timeline.active());
}

TEST(TimelineTest, StopReportsWriteFailure) {
  Timeline timeline;
  timeline.Start("/dev/full", false);  // opens fine, every write fails
  timeline.Begin("x", "QUEUE");
  EXPECT_THROW(timeline.Stop(), std::runtime_error);
  EXPECT_FALSE(timeline.active());
  EXPECT_NO_THROW(timeline.Stop());
}

TEST(TimelineTest, RestartClosesPreviousFileAndStartsFreshTracks) {
  std::string first = TempPath("restart1.json");
  std::string second = TempPath("restart2.json");
  Timeline timeline;
  timeline.Start(first, false);
  timeline.Begin("a", "QUEUE");
  timeline.Start(second, false);
  timeline.Begin("b", "QUEUE");
  timeline.End("a");  // began in the first file: ignored here
  timeline.End("b");
  timeline.Stop();

  std::vector<Json> first_events = ReadEvents(first);
  ExpectBalancedTracks(first_events);
  EXPECT_EQ(SlicesOn(first_events, TrackOf(first_events, "a")),
            (std::vector<std::string>{"B:QUEUE", "E"}));
  std::vector<Json> second_events = ReadEvents(second);
  ExpectBalancedTracks(second_events);
  EXPECT_EQ(TrackOf(second_events, "a"), -1);
  EXPECT_EQ(TrackOf(second_events, "b"), 1);
}

TEST(TimelineTest, RestartOnTheSamePathLeavesOneValidFile) {
  std::string path = TempPath("same_path.json");
  Timeline timeline;
  timeline.Start(path, false);
  timeline.Begin("old", "QUEUE");
  timeline.Start(path, false);
  timeline.Begin("new", "QUEUE");
  timeline.End("new");
  timeline.Stop();
  std::vector<Json> events = ReadEvents(path);
  EXPECT_EQ(TrackOf(events, "old"), -1);
  EXPECT_GT(TrackOf(events, "new"), 0);
}

TEST(TimelineTest, DestructorFinishesTheFile) {
  std::string path = TempPath("destructor.json");
  {
    Timeline timeline;
    timeline.Start(path, false);
    timeline.Begin("x", "QUEUE");
  }
  std::vector<Json> events = ReadEvents(path);
  ExpectBalancedTracks(events);
  EXPECT_GT(TrackOf(events, "x"), 0);
}

TEST(TimelineTest, ConcurrentWritersWhileRestartingStayValid) {
  Timeline timeline;
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) paths.push_back(TempPath("concurrent" + std::to_string(i) + ".json"));
  timeline.Start(paths[0], true);
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&timeline, &done, w] {
      std::string name = "tensor" + std::to_string(w);
      while (!done.load()) {
        timeline.Begin(name, "ALLREDUCE");
        timeline.Begin(name, "MPI_ALLREDUCE");
        timeline.Instant(name, "tick");
        timeline.End(name);
        timeline.End(name);
        timeline.MarkCycle();
      }
    });
  }
  for (size_t i = 1; i < paths.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    timeline.Start(paths[i], true);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timeline.Stop();
  done.store(true);
  for (std::thread& writer : writers) writer.join();
  for (const std::string& path : paths) {
    std::vector<Json> events;
    ASSERT_NO_THROW(events = ReadEvents(path)) << path;
    ExpectBalancedTracks(events);
  }
}

TEST(TimelineTest, PythonJsonModuleAcceptsTheFile) {
  if (std::system("python3 -c '' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  std::string path = TempPath("python.json");
  Timeline timeline;
  timeline.Start(path, true);
  timeline.Begin("we\"ird\\name\n", "QUEUE");
  timeline.MarkCycle();
  timeline.End("we\"ird\\name\n");
  timeline.Stop();
  std::string command =
      "python3 -c 'import json,sys; e=json.load(open(sys.argv[1], encoding=\"utf-8\")); "
      "assert any(x.get(\"args\",{}).get(\"name\")==\"we\\\"ird\\\\name\\n\" for x in e)' " +
      path;
  EXPECT_EQ(std::system(command.c_str()), 0);
}

}  // namespace
}  // namespace lockstep
