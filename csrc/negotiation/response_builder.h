// Turns the requests that all ranks submitted under one name into the response every
// rank will run, or into an error response that says exactly what disagrees.
#pragma once

#include <vector>

#include "wire/message.h"

namespace lockstep {

// by_rank[r] is rank r's request, or nullptr if rank r has joined. At least one entry
// is non-null.
Response BuildResponse(const std::vector<const Request*>& by_rank);

Response ErrorResponse(const std::string& name, const std::string& message);

}  // namespace lockstep
