#include "fusion/device_layout.h"

#include <algorithm>

namespace lockstep {

DeviceFusionLayout PlanDeviceFusion(const std::vector<int64_t>& bytes) {
  DeviceFusionLayout layout;
  int64_t offset = 0;
  for (int64_t size : bytes) {
    offset =
        (offset + kDeviceFusionAlignment - 1) / kDeviceFusionAlignment * kDeviceFusionAlignment;
    layout.offsets.push_back(offset);
    offset += size;
    layout.total_bytes = offset;
  }
  const int count = static_cast<int>(bytes.size());
  for (int first = 0; first < count; first += kMaxCopiesPerLaunch) {
    layout.launches.emplace_back(first, std::min(count, first + kMaxCopiesPerLaunch));
  }
  return layout;
}

}  // namespace lockstep
