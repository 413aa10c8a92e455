// Where each rank's rows go in the collectives whose result size negotiation decided
// (allgather, alltoall, reducescatter): byte counts per rank, the result's shape and
// the rows this rank receives. Shared by every memory kind, so the host and the GPU
// collectives cannot disagree on a layout.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/values.h"
#include "wire/message.h"

namespace lockstep {

// Elements in one row: the product of every dimension but the first.
int64_t RowElements(const std::vector<int64_t>& shape);
// `shape` with its first dimension replaced (a scalar becomes a vector of `first`).
std::vector<int64_t> WithFirstDim(std::vector<int64_t> shape, int64_t first);

struct AllgatherLayout {
  std::vector<int64_t> bytes_per_rank;  // rank r's rows, back to back in rank order
  int64_t bytes = 0;                    // the whole result
  std::vector<int64_t> shape;
};
// r.sizes[k] is rank k's first dimension.
AllgatherLayout PlanAllgather(const Response& r, const OpSpec& spec);

struct AlltoallLayout {
  std::vector<int64_t> send_bytes, recv_bytes;  // per peer
  std::vector<int64_t> send_at, recv_at;        // byte offsets of each peer's part
  std::vector<int64_t> received_splits;         // rows from each peer
  int64_t recv_total = 0;                       // bytes of the result
  std::vector<int64_t> shape;
};
// r.sizes is the size x size matrix of rows: sizes[i * size + j] from rank i to j.
AlltoallLayout PlanAlltoall(const Response& r, const OpSpec& spec, int rank, int size);

struct ReducescatterLayout {
  std::vector<int64_t> counts;  // elements of the reduction each rank receives
  int64_t total_elements = 0;   // of the input
  std::vector<int64_t> shape;   // this rank's result
};
// Uneven splits give the extra rows to the first ranks (Horovod's rule).
ReducescatterLayout PlanReducescatter(const OpSpec& spec, int rank, int size);

}  // namespace lockstep
