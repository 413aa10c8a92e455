// Multi-rank stress for ThreadSanitizer: several user threads per rank enqueue
// collectives at once (single ops, groups, completion callbacks), while the
// background thread negotiates and completes them. Run under mpirun; every rank
// prints "rank N: ALL CHECKS PASSED" and exits 0 when every result was exact.
//
//   concurrent_enqueue [threads] [iterations]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lockstep/lockstep.h"

namespace {

using lockstep::OpSpec;
using lockstep::OpType;

std::atomic<int> failures{0};
std::atomic<int> finished{0};

void Fail(const std::string& what) {
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  failures.fetch_add(1);
}

// Names depend only on thread and iteration, so every rank submits the same set, each
// rank's threads interleaving them in their own order.
std::string NameOf(const char* kind, int thread, int iteration) {
  return std::string(kind) + ".t" + std::to_string(thread) + ".i" + std::to_string(iteration);
}

OpSpec AllreduceSpec(const std::string& name, const std::vector<float>& in,
                     std::vector<float>& out) {
  OpSpec spec;
  spec.op = OpType::kAllreduce;
  spec.reduce_op = lockstep::ReduceOp::kSum;
  spec.name = name;
  spec.shape = {static_cast<int64_t>(in.size())};
  spec.input = in.data();
  spec.output = out.data();
  return spec;
}

// Sum over ranks of (rank + 1) * (i + 1).
void CheckSum(const std::string& name, const std::vector<float>& out, int size) {
  const float ranks = static_cast<float>(size * (size + 1) / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != ranks * static_cast<float>(i + 1)) {
      Fail(name + " element " + std::to_string(i) + " is " + std::to_string(out[i]));
      return;
    }
  }
}

lockstep::Handle SubmitOne(OpSpec spec) {
  std::vector<OpSpec> specs;
  specs.push_back(std::move(spec));
  return lockstep::Submit(std::move(specs)).front();
}

std::vector<lockstep::Handle> SubmitGroup(std::vector<OpSpec> specs) {
  lockstep::SubmitOptions options;
  options.grouped = true;
  return lockstep::Submit(std::move(specs), std::move(options));
}

void SubmitWithCallback(OpSpec spec, lockstep::DoneCallback done) {
  lockstep::SubmitOptions options;
  options.done.push_back(std::move(done));
  lockstep::Submit({std::move(spec)}, std::move(options));
}

std::vector<float> RankValues(int rank, size_t elements) {
  std::vector<float> values(elements);
  for (size_t i = 0; i < elements; ++i) values[i] = static_cast<float>((rank + 1) * (i + 1));
  return values;
}

void SingleAllreduce(int thread, int iteration, int rank, int size) {
  const std::string name = NameOf("allreduce", thread, iteration);
  // Now and then one large enough for the shared-memory path and chunking.
  const size_t elements = iteration % 10 == 0 ? 100000 : 1 + (thread * 31 + iteration * 7) % 200;
  std::vector<float> in = RankValues(rank, elements);
  std::vector<float> out(in.size());
  lockstep::Handle handle = SubmitOne(AllreduceSpec(name, in, out));
  if (iteration % 2 == 1) {
    while (!lockstep::Poll(handle)) std::this_thread::yield();
  }
  lockstep::Wait(handle);
  CheckSum(name, out, size);
}

void GroupedAllreduce(int thread, int iteration, int rank, int size) {
  std::vector<std::vector<float>> ins, outs;
  std::vector<OpSpec> specs;
  for (int member = 0; member < 3; ++member) {
    ins.push_back(RankValues(rank, 10 + member));
    outs.emplace_back(ins.back().size());
  }
  for (int member = 0; member < 3; ++member) {
    const std::string name = NameOf("group", thread, iteration) + ".m" + std::to_string(member);
    specs.push_back(AllreduceSpec(name, ins[member], outs[member]));
  }
  for (lockstep::Handle handle : SubmitGroup(std::move(specs))) lockstep::Wait(handle);
  for (int member = 0; member < 3; ++member) CheckSum("group member", outs[member], size);
}

void AllgatherWithCallback(int thread, int iteration, int rank, int size) {
  std::vector<float> in(static_cast<size_t>(rank + 1), static_cast<float>(rank));
  OpSpec spec;
  spec.op = OpType::kAllgather;
  spec.name = NameOf("allgather", thread, iteration);
  spec.shape = {rank + 1};
  spec.input = in.data();
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  lockstep::OpResult result;
  lockstep::Status status;
  SubmitWithCallback(spec, [&](const lockstep::Status& s, lockstep::OpResult r) {
    std::lock_guard<std::mutex> lock(mutex);
    status = s;
    result = std::move(r);
    done = true;
    done_cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mutex);
  done_cv.wait(lock, [&] { return done; });
  if (!status.ok()) return Fail(spec.name + ": " + status.message());
  const float* rows = static_cast<const float*>(result.buffer->data());
  size_t offset = 0;
  for (int r = 0; r < size; ++r) {
    for (int row = 0; row <= r; ++row, ++offset) {
      if (rows[offset] != static_cast<float>(r)) return Fail(spec.name + " has a wrong row");
    }
  }
}

void Worker(int thread, int iterations, int rank, int size) {
  try {
    for (int iteration = 0; iteration < iterations; ++iteration) {
      switch ((thread + iteration) % 3) {
        case 0:
          SingleAllreduce(thread, iteration, rank, size);
          break;
        case 1:
          GroupedAllreduce(thread, iteration, rank, size);
          break;
        default:
          AllgatherWithCallback(thread, iteration, rank, size);
          break;
      }
    }
  } catch (const std::exception& e) {
    Fail(std::string("thread ") + std::to_string(thread) + ": " + e.what());
  }
  finished.fetch_add(1);
}

// The engine stops because the other ranks shut down while this rank still has an op
// with a completion callback pending; the callback calls into lockstep while the main
// thread restarts lockstep (which stops the old engine, joining its thread). Then every
// rank restarts and runs a collective.
void RestartWhileACallbackCallsIn(int rank, int size) {
  std::vector<float> in = RankValues(rank, 8), out(in.size());
  lockstep::Wait(SubmitOne(AllreduceSpec("restart.before", in, out)));
  std::atomic<bool> callback_done{false};
  if (rank == 0) {
    OpSpec only_here = AllreduceSpec("restart.only_on_rank_0", in, out);
    SubmitWithCallback(only_here, [&](const lockstep::Status& status, lockstep::OpResult) {
      if (status.ok()) Fail("an op that only rank 0 submitted succeeded");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // Init() is joining us
      lockstep::IsInitialized();
      callback_done = true;
    });
  }
  lockstep::Wait(SubmitOne(AllreduceSpec("restart.sync", in, out)));
  if (rank != 0) {
    lockstep::Shutdown();
  } else {
    while (lockstep::IsInitialized()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  lockstep::Init();
  if (rank == 0 && !callback_done) Fail("the stale engine's callback did not finish before Init()");
  lockstep::Wait(SubmitOne(AllreduceSpec("restart.after", in, out)));
  CheckSum("restart.after", out, size);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 100;
  lockstep::Init();
  const lockstep::Topology topology = lockstep::GetTopology();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back(Worker, t, iterations, topology.rank, topology.size);
  }
  // Meanwhile this thread keeps asking what user threads ask while ops run, and starts
  // and stops the timeline, which the background thread writes to.
  const std::string timeline = "/tmp/lockstep_stress_timeline." + std::to_string(getpid());
  for (int round = 0; finished.load() < threads; ++round) {
    if (!lockstep::IsInitialized() || lockstep::GetTopology().size != topology.size) {
      Fail("lockstep stopped while ops were running: " + lockstep::NotRunningReason());
      break;
    }
    if (round % 2 == 0) {
      lockstep::StartTimeline(timeline, /*mark_cycles=*/round % 4 == 0);
    } else {
      lockstep::StopTimeline();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  lockstep::StopTimeline();
  std::remove(timeline.c_str());
  try {
    RestartWhileACallbackCallsIn(topology.rank, topology.size);
  } catch (const std::exception& e) {
    Fail(std::string("restart: ") + e.what());
  }
  for (std::thread& worker : workers) worker.join();
  lockstep::Shutdown();
  if (failures.load() != 0) return 1;
  std::printf("rank %d: ALL CHECKS PASSED\n", topology.rank);
  return 0;
}
