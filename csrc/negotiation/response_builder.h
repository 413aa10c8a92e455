// Turns the requests that all ranks submitted under one name (or, for process-set
// changes, in the same turn) into the response every rank will run, or into an error
// response that says exactly what disagrees.
#pragma once

#include <vector>

#include "wire/message.h"

namespace lockstep {

// by_rank[r] is rank r's request, or nullptr if rank r has joined. At least one entry
// is non-null.
Response BuildResponse(const std::vector<const Request*>& by_rank);

Response ErrorResponse(const std::string& name, const std::string& message);

// The same for process-set change proposals, one per rank (by_rank[r] nullptr: rank
// r has joined): a kProcessSetChange response carrying the change when every rank
// proposed the same one, else carrying the error that fails it on every rank.
Response BuildChangeResponse(const std::vector<const Request*>& by_rank);
// A kProcessSetChange response that fails the change on every rank that proposed it.
Response FailedChangeResponse(const std::string& message);

}  // namespace lockstep
