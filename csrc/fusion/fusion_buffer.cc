#include "fusion/fusion_buffer.h"

#include <cstdlib>
#include <map>
#include <new>
#include <tuple>

namespace lockstep {
namespace {

using FusionKey = std::tuple<DataType, ReduceOp, double, double, int32_t>;

FusionKey KeyOf(const Response& r) {
  return FusionKey(r.dtype, r.reduce_op, r.prescale, r.postscale, r.device);
}

}  // namespace

int64_t ResponseBytes(const Response& response) {
  int64_t elements = 0;
  for (int64_t n : response.sizes) elements += n;
  return elements * static_cast<int64_t>(DataTypeSize(response.dtype));
}

std::vector<Response> PlanFusion(std::vector<Response> responses, int64_t threshold_bytes,
                                 int64_t standalone_bytes) {
  const FusionLimits limits{threshold_bytes, standalone_bytes};
  return PlanFusion(std::move(responses), limits, limits);
}

std::vector<Response> PlanFusion(std::vector<Response> responses, const FusionLimits& host,
                                 const FusionLimits& device) {
  if (host.threshold_bytes <= 0 && device.threshold_bytes <= 0) return responses;
  std::vector<Response> planned;
  std::vector<int64_t> planned_bytes;
  std::map<FusionKey, size_t> open_bin;  // key -> index in planned
  for (Response& response : responses) {
    const int64_t bytes = ResponseBytes(response);
    const FusionLimits& limits = response.device >= 0 ? device : host;
    const bool fusable = response.type == ResponseType::kAllreduce &&
                         bytes < limits.threshold_bytes &&
                         (limits.standalone_bytes <= 0 || bytes < limits.standalone_bytes);
    if (!fusable) {
      planned.push_back(std::move(response));
      planned_bytes.push_back(bytes);
      continue;
    }
    const FusionKey key = KeyOf(response);
    auto it = open_bin.find(key);
    if (it != open_bin.end() && planned_bytes[it->second] + bytes <= limits.threshold_bytes) {
      Response& bin = planned[it->second];
      bin.names.insert(bin.names.end(), response.names.begin(), response.names.end());
      bin.sizes.insert(bin.sizes.end(), response.sizes.begin(), response.sizes.end());
      planned_bytes[it->second] += bytes;
      continue;
    }
    open_bin[key] = planned.size();
    planned.push_back(std::move(response));
    planned_bytes.push_back(bytes);
  }
  return planned;
}

void* FusionBuffer::Get(int64_t bytes) {
  if (bytes > capacity_) {
    int64_t rounded = (bytes + 4095) / 4096 * 4096;
    void* memory = std::aligned_alloc(64, static_cast<size_t>(rounded));
    if (memory == nullptr) throw std::bad_alloc();
    data_ = std::unique_ptr<char, void (*)(void*)>(static_cast<char*>(memory), std::free);
    capacity_ = rounded;
  }
  return data_.get();
}

}  // namespace lockstep
