// The collective watchdog's decisions (engine/collective_watchdog), with a scripted
// silence finder and a job whose abort ends only the watchdog's thread: when rank 0
// asks who is there, what it does with the answer, and how other ranks act on rank 0's
// verdict. Real pings between ranks are tested under mpirun (test_silence_finder_mpi,
// test_peer_failures.py).
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/call_clock.h"
#include "backends/communicator.h"
#include "common/logging.h"
#include "engine/collective_watchdog.h"

namespace lockstep {
namespace {

using std::chrono::milliseconds;

// What the watchdog asked and told; FindSilentRanks and AnswerRoot answer as scripted.
struct FinderLog {
  std::mutex mutex;
  std::vector<double> asked_waits;                // each FindSilentRanks' wait
  std::vector<std::vector<int>> shared_verdicts;  // each ShareVerdict's ranks
  std::vector<int> silent;                        // what FindSilentRanks reports
  std::vector<int> verdict_heard;                 // what AnswerRoot reports
  std::atomic<int> answers{0};                    // AnswerRoot calls
};

class ScriptedFinder : public SilenceFinder {
 public:
  explicit ScriptedFinder(std::shared_ptr<FinderLog> log) : log_(std::move(log)) {}
  std::vector<int> FindSilentRanks(double wait_seconds) override {
    std::lock_guard<std::mutex> lock(log_->mutex);
    log_->asked_waits.push_back(wait_seconds);
    return log_->silent;
  }
  void ShareVerdict(const std::vector<int>& silent) override {
    std::lock_guard<std::mutex> lock(log_->mutex);
    log_->shared_verdicts.push_back(silent);
  }
  std::vector<int> AnswerRoot() override {
    ++log_->answers;
    std::lock_guard<std::mutex> lock(log_->mutex);
    return log_->verdict_heard;
  }

 private:
  std::shared_ptr<FinderLog> log_;
};

// A job of three ranks whose Abort ends the calling thread (the watchdog's) instead of
// the process, so that the test can look at what happened.
class EndingJob : public Communicator {
 public:
  explicit EndingJob(int rank) : rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 3; }
  std::unique_ptr<Communicator> Split(bool) override { return nullptr; }
  double MaxAcrossRanks(double value) override { return value; }
  std::unique_ptr<Exchange> NewExchange(ExchangeOptions) override { return nullptr; }
  std::unique_ptr<Backend> NewHostBackend(const HostBackendOptions&, CallClock&) override {
    return nullptr;
  }
  std::unique_ptr<SilenceFinder> NewSilenceFinder() override { return nullptr; }
  [[noreturn]] void Abort() override {
    aborted = true;
    pthread_exit(nullptr);
  }

  std::atomic<bool> aborted{false};

 private:
  int rank_;
};

constexpr double kPeerTimeout = 0.5;  // grace 1 s: rank 0 asks for 0.5 s
constexpr double kLimit = 2.5;        // the engine's: timeout + grace + 1 s

struct Watched {
  explicit Watched(int rank) : job(rank), log(std::make_shared<FinderLog>()) {}
  void Start() {
    sink = std::tmpfile();
    logger = std::make_unique<Logger>(LogLevel::kInfo, job.rank(), sink);
    watchdog = std::make_unique<CollectiveWatchdog>(
        clock, job, std::make_unique<ScriptedFinder>(log), std::vector<std::string>(3, "host"),
        kLimit, kPeerTimeout, *logger);
  }
  ~Watched() {
    watchdog.reset();
    if (sink) std::fclose(sink);
  }
  std::string Logged() {
    std::string text;
    std::rewind(sink);
    for (int c; (c = std::fgetc(sink)) != EOF;) text.push_back(static_cast<char>(c));
    return text;
  }
  size_t Asked() {
    std::lock_guard<std::mutex> lock(log->mutex);
    return log->asked_waits.size();
  }

  CallClock clock;
  EndingJob job;
  std::shared_ptr<FinderLog> log;
  std::FILE* sink = nullptr;
  std::unique_ptr<Logger> logger;
  std::unique_ptr<CollectiveWatchdog> watchdog;
};

TEST(CollectiveWatchdogTest, RankZeroAsksAtThePeerTimeoutAndEndsAtOnceWhenARankIsSilent) {
  Watched w(0);
  w.log->silent = {2};
  w.Start();
  CallClock::Scope call(w.clock, /*every_rank=*/true);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(w.Asked(), 0u) << "asked before the peer timeout";
  for (int i = 0; i < 40 && !w.job.aborted; ++i) std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(w.job.aborted) << "no end within 2.3 s, the limit being " << kLimit << " s";
  w.watchdog.reset();  // joins the ended thread
  EXPECT_EQ(w.log->asked_waits, std::vector<double>{0.5});
  EXPECT_EQ(w.log->shared_verdicts, std::vector<std::vector<int>>{{2}});
  const std::string logged = w.Logged();
  EXPECT_NE(logged.find("rank 2 on host did not respond"), std::string::npos) << logged;
}

TEST(CollectiveWatchdogTest, WhenEveryRankAnswersTheCallKeepsItsFullLimit) {
  Watched w(0);
  w.Start();
  CallClock::Scope call(w.clock, /*every_rank=*/true);
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_FALSE(w.job.aborted) << "ended a call that every rank answered for before its limit";
  {
    std::lock_guard<std::mutex> lock(w.log->mutex);
    EXPECT_EQ(w.log->asked_waits.size(), 1u) << "rank 0 asks once per call before the limit";
    EXPECT_EQ(w.log->shared_verdicts, std::vector<std::vector<int>>{{}}) << "wait on: told to all";
  }
  for (int i = 0; i < 40 && !w.job.aborted; ++i) std::this_thread::sleep_for(milliseconds(50));
  EXPECT_TRUE(w.job.aborted) << "the call outlasted the limit and was not ended";
  w.watchdog.reset();
  EXPECT_NE(w.Logged().find("every rank answered rank 0"), std::string::npos) << w.Logged();
}

TEST(CollectiveWatchdogTest, EachNewCallGetsItsOwnEarlyLook) {
  Watched w(0);
  w.Start();
  for (int call_number = 1; call_number <= 2; ++call_number) {
    {
      CallClock::Scope call(w.clock, /*every_rank=*/true);
      std::this_thread::sleep_for(milliseconds(1200));
    }
    std::this_thread::sleep_for(milliseconds(300));  // the watchdog sees no call between
    EXPECT_EQ(w.Asked(), static_cast<size_t>(call_number));
  }
  EXPECT_FALSE(w.job.aborted);
}

TEST(CollectiveWatchdogTest, OtherRanksAnswerWhileInsideACallAndEndOnRankZerosVerdict) {
  Watched w(1);
  w.Start();
  CallClock::Scope call(w.clock, /*every_rank=*/true);
  std::this_thread::sleep_for(milliseconds(1200));
  EXPECT_GT(w.log->answers.load(), 0) << "not answering rank 0 inside a call";
  EXPECT_FALSE(w.job.aborted);
  {
    std::lock_guard<std::mutex> lock(w.log->mutex);
    w.log->verdict_heard = {2};
  }
  for (int i = 0; i < 20 && !w.job.aborted; ++i) std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(w.job.aborted) << "rank 0's verdict did not end the job";
  w.watchdog.reset();
  EXPECT_EQ(w.Asked(), 0u) << "only rank 0 asks";
  const std::string logged = w.Logged();
  EXPECT_NE(logged.find("rank 2 on host did not respond, as rank 0 found"), std::string::npos)
      << logged;
}

TEST(CollectiveWatchdogTest, ACallOfSomeRanksIsNeitherAskedAboutNorAnswered) {
  Watched w(0);
  w.Start();
  CallClock::Scope call(w.clock, /*every_rank=*/false);
  std::this_thread::sleep_for(milliseconds(1200));
  EXPECT_EQ(w.Asked(), 0u);
  EXPECT_EQ(w.log->answers.load(), 0);
  EXPECT_FALSE(w.job.aborted);
}

}  // namespace
}  // namespace lockstep
