// The whole GPU path through the public API at one rank, without any framework:
// device tensors on a stream of the test's own (as torch's would be), every dtype
// and reduce op, lone and fused allreduces, the collectives whose results the core
// allocates on the device, an input still being written when it is enqueued, and MPI
// staging. One rank still runs NCCL (a one-rank communicator) and every kernel, so
// this checks the core before any frontend is involved. Needs a GPU; skipped with the
// reason where none is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/nccl/gpu_probe.h"
#include "lockstep/lockstep.h"
#include "reduction/scaling.h"

namespace lockstep {
namespace {

Handle SubmitOne(OpSpec spec) {
  std::vector<OpSpec> specs;
  specs.push_back(std::move(spec));
  return Submit(std::move(specs)).front();
}

std::vector<Handle> SubmitGroup(std::vector<OpSpec> specs) {
  SubmitOptions options;
  options.grouped = true;
  return Submit(std::move(specs), std::move(options));
}

class GpuEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuProbe probe = ProbeGpus();
    if (probe.devices == 0) GTEST_SKIP() << "needs a GPU: " << probe.problem;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    Init();
  }
  void TearDown() override {
    for (void* memory : allocations_) cudaFree(memory);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Written on the op's stream, as a framework writes its tensors. A plain cudaMemcpy
  // from pageable memory may return before its DMA lands, and lockstep's non-blocking
  // stream is not ordered after the legacy stream: the op could read stale input.
  void* Device(const std::vector<uint8_t>& bytes) {
    void* memory = nullptr;
    EXPECT_EQ(cudaMalloc(&memory, std::max<size_t>(bytes.size(), 1)), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(memory, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream_),
              cudaSuccess);
    allocations_.push_back(memory);
    return memory;
  }
  // Read on the op's stream, as a framework would consume the output.
  std::vector<uint8_t> Host(const void* memory, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    EXPECT_EQ(cudaMemcpyAsync(out.data(), memory, bytes, cudaMemcpyDeviceToHost, stream_),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return out;
  }
  OpSpec Spec(OpType op, const std::string& name, DataType dtype, int64_t count, void* input,
              void* output) {
    OpSpec spec;
    spec.op = op;
    spec.name = name;
    spec.dtype = dtype;
    spec.shape = {count};
    spec.input = input;
    spec.output = output;
    spec.device = 0;
    spec.stream = stream_;
    return spec;
  }

  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocations_;
};

std::vector<uint8_t> Pattern(DataType dtype, int64_t count, int seed) {
  std::vector<uint8_t> bytes(count * DataTypeSize(dtype));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 37 + seed) % 251);
  if (dtype == DataType::kBool) {
    for (uint8_t& b : bytes) b &= 1;
  }
  if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
    for (size_t i = 1; i < bytes.size(); i += 2) bytes[i] &= 0x3f;  // finite, moderate
  }
  if (dtype == DataType::kFloat32) {
    for (int64_t i = 0; i < count; ++i) {
      const float v = static_cast<float>((i * 7 + seed) % 1000) / 8.0f - 60.0f;
      std::memcpy(&bytes[i * 4], &v, 4);
    }
  }
  if (dtype == DataType::kFloat64) {
    for (int64_t i = 0; i < count; ++i) {
      const double v = static_cast<double>((i * 7 + seed) % 1000) / 8.0 - 60.0;
      std::memcpy(&bytes[i * 8], &v, 8);
    }
  }
  return bytes;
}

// One rank: every reduction is the identity, so the result is the input scaled by
// prescale, then by postscale (Average divides by a size of 1), as the host does it.
std::vector<uint8_t> Expected(std::vector<uint8_t> bytes, DataType dtype, int64_t count,
                              double prescale, double postscale) {
  ScaleInPlace(bytes.data(), count, dtype, prescale);
  ScaleInPlace(bytes.data(), count, dtype, postscale);
  return bytes;
}

const DataType kAllTypes[] = {DataType::kUInt8,   DataType::kInt8,     DataType::kInt16,
                              DataType::kUInt16,  DataType::kInt32,    DataType::kInt64,
                              DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                              DataType::kFloat64, DataType::kBool};

TEST_F(GpuEngineTest, AllreduceOfEveryDtypeAndOpLoneAndFused) {
  for (DataType dtype : kAllTypes) {
    const bool boolean = dtype == DataType::kBool;
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      if (boolean && op == ReduceOp::kAverage) continue;
      const double pre = boolean ? 1.0 : 0.5, post = boolean ? 1.0 : 3.0;
      const std::string tag = std::string(DataTypeName(dtype)) + "." + ReduceOpName(op);
      // Lone, out of place.
      const int64_t count = 1001;
      const std::vector<uint8_t> input = Pattern(dtype, count, 1);
      void* in = Device(input);
      void* out = Device(std::vector<uint8_t>(input.size(), 0));
      OpSpec spec = Spec(OpType::kAllreduce, "lone." + tag, dtype, count, in, out);
      spec.reduce_op = op;
      spec.prescale = pre;
      spec.postscale = post;
      Wait(SubmitOne(spec));
      EXPECT_EQ(Host(out, input.size()), Expected(input, dtype, count, pre, post)) << tag;
      EXPECT_EQ(Host(in, input.size()), input) << tag << ": the input changed";
      // Fused: three tensors of odd sizes in one group, in place.
      std::vector<OpSpec> group;
      std::vector<std::vector<uint8_t>> inputs;
      std::vector<void*> memory;
      for (int64_t n : {3, 700, 17}) {
        inputs.push_back(Pattern(dtype, n, static_cast<int>(n)));
        memory.push_back(Device(inputs.back()));
        group.push_back(Spec(OpType::kAllreduce, "fused." + tag + "." + std::to_string(n), dtype, n,
                             memory.back(), memory.back()));
        group.back().reduce_op = op;
        group.back().prescale = pre;
        group.back().postscale = post;
      }
      for (Handle handle : SubmitGroup(group)) Wait(handle);
      for (size_t i = 0; i < group.size(); ++i) {
        const int64_t n = group[i].shape[0];
        EXPECT_EQ(Host(memory[i], inputs[i].size()), Expected(inputs[i], dtype, n, pre, post))
            << tag << " fused tensor " << i;
      }
    }
  }
}

TEST_F(GpuEngineTest, CoreAllocatedResultsLiveOnTheDevice) {
  const int64_t count = 6;
  const std::vector<uint8_t> input = Pattern(DataType::kFloat32, count, 3);
  void* in = Device(input);
  for (OpType op : {OpType::kAllgather, OpType::kAlltoall, OpType::kReducescatter}) {
    OpSpec spec =
        Spec(op, std::string("result.") + OpTypeName(op), DataType::kFloat32, count, in, nullptr);
    if (op == OpType::kReducescatter) spec.reduce_op = ReduceOp::kSum;
    OpResult result = Wait(SubmitOne(spec));
    ASSERT_NE(result.buffer, nullptr) << OpTypeName(op);
    EXPECT_EQ(result.device, 0) << OpTypeName(op);
    EXPECT_EQ(result.shape, (std::vector<int64_t>{count})) << OpTypeName(op);
    ASSERT_EQ(result.buffer->size(), input.size()) << OpTypeName(op);
    EXPECT_EQ(Host(result.buffer->data(), input.size()), input) << OpTypeName(op);
  }
  // Broadcast writes the root's input into the output.
  void* out = Device(std::vector<uint8_t>(input.size(), 0));
  Wait(SubmitOne(Spec(OpType::kBroadcast, "result.broadcast", DataType::kFloat32, count, in, out)));
  EXPECT_EQ(Host(out, input.size()), input);
  EXPECT_NE(GpuStream(0, 0), nullptr);
}

TEST_F(GpuEngineTest, AnInputStillBeingWrittenIsWaitedFor) {
  // 64 MiB copied in on the op's stream just before the enqueue: lockstep's stream
  // must wait for the copy (the ready event), not read what was there before.
  const int64_t count = 16 << 20;
  std::vector<uint8_t> zeros(count * 4, 0);
  void* tensor = Device(zeros);
  void* page_locked = nullptr;
  ASSERT_EQ(cudaMallocHost(&page_locked, count * 4), cudaSuccess);
  float* pinned = static_cast<float*>(page_locked);
  for (int64_t i = 0; i < count; ++i) pinned[i] = 1.0f;
  ASSERT_EQ(cudaMemcpyAsync(tensor, pinned, count * 4, cudaMemcpyHostToDevice, stream_),
            cudaSuccess);
  OpSpec spec = Spec(OpType::kAllreduce, "late", DataType::kFloat32, count, tensor, tensor);
  spec.reduce_op = ReduceOp::kSum;
  spec.postscale = 2.0;
  Wait(SubmitOne(spec));
  const std::vector<uint8_t> got = Host(tensor, count * 4);
  std::vector<float> values(count);
  std::memcpy(values.data(), got.data(), got.size());
  EXPECT_EQ(values.front(), 2.0f);
  EXPECT_EQ(values.back(), 2.0f);
  cudaFreeHost(pinned);
}

TEST_F(GpuEngineTest, TheTimelineShowsTheGpuPhases) {
  const std::string path = testing::TempDir() + "gpu_timeline.json";
  StartTimeline(path, false);
  std::vector<OpSpec> group;
  for (int i = 0; i < 2; ++i) {
    void* memory = Device(Pattern(DataType::kFloat32, 64, i));
    group.push_back(Spec(OpType::kAllreduce, "phases." + std::to_string(i), DataType::kFloat32, 64,
                         memory, memory));
  }
  for (Handle handle : SubmitGroup(group)) Wait(handle);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  // Written when a later cycle polls the finished events (idle cycles come every
  // 16 ms at most).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  StopTimeline();
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* phase : {"GPU_WAIT_FOR_INPUT", "MEMCPY_IN_FUSION_BUFFER", "NCCL_ALLREDUCE",
                            "MEMCPY_OUT_FUSION_BUFFER"}) {
    EXPECT_NE(text.find(std::string("\"dur\":")), std::string::npos);
    EXPECT_NE(text.find(std::string("\"name\":\"") + phase + "\"}"), std::string::npos)
        << phase << " missing from " << text;
  }
}

TEST_F(GpuEngineTest, MpiStagingGivesTheSameResults) {
  Shutdown();
  ASSERT_EQ(setenv("LOCKSTEP_GPU_OPERATIONS", "mpi", 1), 0);
  Init();
  unsetenv("LOCKSTEP_GPU_OPERATIONS");
  const int64_t count = 333;
  const std::vector<uint8_t> input = Pattern(DataType::kFloat64, count, 5);
  void* in = Device(input);
  void* out = Device(std::vector<uint8_t>(input.size(), 0));
  OpSpec spec = Spec(OpType::kAllreduce, "staged", DataType::kFloat64, count, in, out);
  spec.reduce_op = ReduceOp::kAverage;
  spec.prescale = 0.25;
  Wait(SubmitOne(spec));
  EXPECT_EQ(Host(out, input.size()), Expected(input, DataType::kFloat64, count, 0.25, 1.0));
  OpResult gathered = Wait(
      SubmitOne(Spec(OpType::kAllgather, "staged.gather", DataType::kFloat64, count, in, nullptr)));
  EXPECT_EQ(gathered.device, 0);
  EXPECT_EQ(Host(gathered.buffer->data(), input.size()), input);
  Shutdown();
  Init();
}

}  // namespace
}  // namespace lockstep
