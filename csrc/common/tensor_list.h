// How messages name the tensors of a collective.
#pragma once

#include <string>
#include <vector>

namespace lockstep {

// "'a'", "'a', 'b'", or the first four names and how many more.
std::string TensorList(const std::vector<std::string>& names);

}  // namespace lockstep
