#include "backends/result_layout.h"

namespace lockstep {

int64_t RowElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::vector<int64_t> WithFirstDim(std::vector<int64_t> shape, int64_t first) {
  if (shape.empty()) return {first};
  shape[0] = first;
  return shape;
}

AllgatherLayout PlanAllgather(const Response& r, const OpSpec& spec) {
  const int64_t row_bytes = RowElements(spec.shape) * static_cast<int64_t>(DataTypeSize(r.dtype));
  AllgatherLayout layout;
  int64_t rows = 0;
  for (int64_t n : r.sizes) {
    layout.bytes_per_rank.push_back(n * row_bytes);
    rows += n;
  }
  layout.bytes = rows * row_bytes;
  layout.shape = WithFirstDim(spec.shape, rows);
  return layout;
}

AlltoallLayout PlanAlltoall(const Response& r, const OpSpec& spec, int rank, int size) {
  const int64_t row_bytes = RowElements(spec.shape) * static_cast<int64_t>(DataTypeSize(r.dtype));
  AlltoallLayout layout;
  int64_t rows = 0, sent = 0;
  for (int peer = 0; peer < size; ++peer) {
    const int64_t out_rows = r.sizes[rank * size + peer];
    const int64_t in_rows = r.sizes[peer * size + rank];
    layout.send_at.push_back(sent);
    layout.recv_at.push_back(layout.recv_total);
    layout.send_bytes.push_back(out_rows * row_bytes);
    layout.recv_bytes.push_back(in_rows * row_bytes);
    layout.received_splits.push_back(in_rows);
    sent += out_rows * row_bytes;
    layout.recv_total += in_rows * row_bytes;
    rows += in_rows;
  }
  layout.shape = WithFirstDim(spec.shape, rows);
  return layout;
}

ReducescatterLayout PlanReducescatter(const OpSpec& spec, int rank, int size) {
  const int64_t rows = spec.shape.empty() ? 1 : spec.shape[0];
  const int64_t row_elements = RowElements(spec.shape);
  ReducescatterLayout layout;
  for (int i = 0; i < size; ++i) {
    layout.counts.push_back((rows / size + (i < rows % size ? 1 : 0)) * row_elements);
  }
  layout.total_elements = rows * row_elements;
  layout.shape = WithFirstDim(spec.shape, rows / size + (rank < rows % size ? 1 : 0));
  return layout;
}

}  // namespace lockstep
