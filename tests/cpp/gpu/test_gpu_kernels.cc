// The device kernels against the host's arithmetic, bit for bit: scaling (pre/post
// factors and Average's division) and the batched copy that packs and unpacks the
// device fusion buffer. Needs a GPU; skipped with the reason where none is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/nccl/batched_copy.h"
#include "backends/nccl/gpu_probe.h"
#include "backends/nccl/scale_kernels.h"
#include "common/half.h"
#include "reduction/scaling.h"

namespace lockstep {
namespace {

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    const GpuProbe probe = ProbeGpus();                                       \
    if (probe.devices == 0) GTEST_SKIP() << "needs a GPU: " << probe.problem; \
  } while (0)

std::vector<uint8_t> RandomBytes(size_t bytes, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> data(bytes);
  for (uint8_t& b : data) b = static_cast<uint8_t>(random());
  return data;
}

// Random bit patterns are fine for integers; floats get finite values in a range
// where scaling neither overflows nor hides rounding.
std::vector<uint8_t> Values(DataType dtype, int64_t count, uint32_t seed) {
  std::vector<uint8_t> data = RandomBytes(count * DataTypeSize(dtype), seed);
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> value(-1000.0, 1000.0);
  if (dtype == DataType::kFloat32) {
    for (int64_t i = 0; i < count; ++i) {
      const float v = static_cast<float>(value(random));
      std::memcpy(&data[i * 4], &v, 4);
    }
  } else if (dtype == DataType::kFloat64) {
    for (int64_t i = 0; i < count; ++i) {
      const double v = value(random);
      std::memcpy(&data[i * 8], &v, 8);
    }
  } else if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
    for (int64_t i = 0; i < count; ++i) data[i * 2 + 1] &= 0x3f;  // small exponents
  }
  return data;
}

struct DeviceBytes {
  explicit DeviceBytes(size_t bytes) { EXPECT_EQ(cudaMalloc(&data, bytes), cudaSuccess); }
  ~DeviceBytes() { cudaFree(data); }
  char* get() { return static_cast<char*>(data); }
  void* data = nullptr;
};

bool IsNan(const uint8_t* element, DataType dtype) {
  uint16_t sixteen;
  float f;
  double d;
  switch (dtype) {
    case DataType::kFloat16:
      std::memcpy(&sixteen, element, 2);
      return std::isnan(Float16ToFloat(sixteen));
    case DataType::kBFloat16:
      std::memcpy(&sixteen, element, 2);
      return std::isnan(BFloat16ToFloat(sixteen));
    case DataType::kFloat32:
      std::memcpy(&f, element, 4);
      return std::isnan(f);
    case DataType::kFloat64:
      std::memcpy(&d, element, 8);
      return std::isnan(d);
    default:
      return false;
  }
}

// Bit for bit, except that any NaN matches any NaN: 0 times an infinite factor is
// NaN on both sides, but x86 makes a negative NaN and CUDA its canonical positive one.
::testing::AssertionResult SameElements(const std::vector<uint8_t>& got,
                                        const std::vector<uint8_t>& expected, DataType dtype) {
  const size_t size = DataTypeSize(dtype);
  if (got.size() != expected.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t at = 0; at < got.size(); at += size) {
    if (std::memcmp(&got[at], &expected[at], size) == 0) continue;
    if (IsNan(&got[at], dtype) && IsNan(&expected[at], dtype)) continue;
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << "element " << at / size << " differs: got bytes";
    for (size_t b = 0; b < size; ++b) failure << ' ' << static_cast<int>(got[at + b]);
    failure << ", expected";
    for (size_t b = 0; b < size; ++b) failure << ' ' << static_cast<int>(expected[at + b]);
    return failure;
  }
  return ::testing::AssertionSuccess();
}

const DataType kScaledTypes[] = {DataType::kUInt8,   DataType::kInt8,     DataType::kInt16,
                                 DataType::kUInt16,  DataType::kInt32,    DataType::kInt64,
                                 DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                 DataType::kFloat64};

TEST(GpuKernelTest, EveryKernelLoadsUpFront) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(LoadScaleKernels(), cudaSuccess);
  EXPECT_EQ(LoadBatchedCopyKernels(), cudaSuccess);
}

TEST(GpuKernelTest, ScaleMatchesTheHostBitForBit) {
  SKIP_WITHOUT_GPU();
  const int64_t count = 100003;
  for (DataType dtype : kScaledTypes) {
    for (double factor : {0.25, 1.0 / 3.0, -2.5, 1e10, -1e300, 0.0}) {
      std::vector<uint8_t> expected = Values(dtype, count, 7);
      DeviceBytes device(expected.size());
      ASSERT_EQ(cudaMemcpy(device.get(), expected.data(), expected.size(), cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(ScaleDeviceBuffer(device.get(), count, dtype, factor, nullptr), cudaSuccess);
      std::vector<uint8_t> got(expected.size());
      ASSERT_EQ(cudaMemcpy(got.data(), device.get(), got.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      ScaleInPlace(expected.data(), count, dtype, factor);
      EXPECT_TRUE(SameElements(got, expected, dtype)) << DataTypeName(dtype) << " x " << factor;
    }
  }
}

TEST(GpuKernelTest, BatchedCopyPacksAndScalesEveryPieceWhateverItsAlignment) {
  SKIP_WITHOUT_GPU();
  // Sizes and offsets that hit the vector path, its byte tail and the byte-only path.
  const std::vector<int64_t> sizes = {4, 12, 1024, 4096 + 4, 40, 1 << 20, 8};
  const std::vector<int64_t> src_offsets = {0, 4, 64, 20, 8, 256, 44};
  for (double factor : {1.0, 0.5}) {
    std::vector<uint8_t> host = Values(DataType::kFloat32, (3 << 20) / 4, 11);
    DeviceBytes src(host.size()), dst(host.size());
    ASSERT_EQ(cudaMemcpy(src.get(), host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dst.get(), 0, host.size()), cudaSuccess);
    std::vector<DeviceCopy> copies;
    std::vector<uint8_t> expected(host.size(), 0);
    int64_t src_at = 0, dst_at = 4;  // a destination 4 bytes off 16-byte alignment
    for (size_t i = 0; i < sizes.size(); ++i) {
      src_at += src_offsets[i];
      copies.push_back({src.get() + src_at, dst.get() + dst_at, sizes[i]});
      std::memcpy(&expected[dst_at], &host[src_at], sizes[i]);
      ScaleInPlace(&expected[dst_at], sizes[i] / 4, DataType::kFloat32, factor);
      src_at += sizes[i];
      dst_at += sizes[i] + (i % 2 ? 64 : 12);
    }
    ASSERT_EQ(BatchedCopy(copies.data(), static_cast<int>(copies.size()), DataType::kFloat32,
                          factor, nullptr),
              cudaSuccess);
    std::vector<uint8_t> got(host.size());
    ASSERT_EQ(cudaMemcpy(got.data(), dst.get(), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, expected) << "factor " << factor;
  }
}

}  // namespace
}  // namespace lockstep
