#include "common/tensor_list.h"

namespace lockstep {

std::string TensorList(const std::vector<std::string>& names) {
  constexpr size_t kShown = 4;
  std::string text;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) {
    text += (i ? ", '" : "'") + names[i] + "'";
  }
  if (names.size() > kShown) text += " and " + std::to_string(names.size() - kShown) + " more";
  return text;
}

}  // namespace lockstep
