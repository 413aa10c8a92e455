#include <gtest/gtest.h>

#include "backends/result_layout.h"

namespace lockstep {
namespace {

using Shape = std::vector<int64_t>;

OpSpec SpecOf(Shape shape, DataType dtype = DataType::kFloat32) {
  OpSpec spec;
  spec.shape = std::move(shape);
  spec.dtype = dtype;
  return spec;
}

TEST(ResultLayoutTest, AllgatherStacksEachRanksRowsInRankOrder) {
  Response r;
  r.dtype = DataType::kFloat64;
  r.sizes = {2, 0, 3};  // rows from ranks 0, 1, 2
  const AllgatherLayout layout = PlanAllgather(r, SpecOf({2, 4}, DataType::kFloat64));
  EXPECT_EQ(layout.bytes_per_rank, (Shape{64, 0, 96}));
  EXPECT_EQ(layout.bytes, 160);
  EXPECT_EQ(layout.shape, (Shape{5, 4}));
}

TEST(ResultLayoutTest, AllgatherOfScalarsGivesAVector) {
  Response r;
  r.sizes = {1, 1};
  const AllgatherLayout layout = PlanAllgather(r, SpecOf({}));
  EXPECT_EQ(layout.shape, (Shape{2}));
  EXPECT_EQ(layout.bytes, 8);
}

TEST(ResultLayoutTest, AlltoallReadsTheSplitMatrixBySenderAndReceiver) {
  Response r;
  // Rows sent from rank i (row of the matrix) to rank j (column), 3 ranks.
  r.sizes = {1, 2, 0,  //
             3, 0, 1,  //
             0, 4, 2};
  const AlltoallLayout layout = PlanAlltoall(r, SpecOf({3, 2}), /*rank=*/1, /*size=*/3);
  const int64_t row = 2 * 4;
  EXPECT_EQ(layout.send_bytes, (Shape{3 * row, 0, 1 * row}));
  EXPECT_EQ(layout.send_at, (Shape{0, 3 * row, 3 * row}));
  EXPECT_EQ(layout.recv_bytes, (Shape{2 * row, 0, 4 * row}));
  EXPECT_EQ(layout.recv_at, (Shape{0, 2 * row, 2 * row}));
  EXPECT_EQ(layout.received_splits, (Shape{2, 0, 4}));
  EXPECT_EQ(layout.recv_total, 6 * row);
  EXPECT_EQ(layout.shape, (Shape{6, 2}));
}

TEST(ResultLayoutTest, ReducescatterGivesTheExtraRowsToTheFirstRanks) {
  const OpSpec spec = SpecOf({7, 3});
  const Shape expected_counts{9, 6, 6};  // rows 3, 2, 2 of 3 elements
  for (int rank = 0; rank < 3; ++rank) {
    const ReducescatterLayout layout = PlanReducescatter(spec, rank, 3);
    EXPECT_EQ(layout.counts, expected_counts);
    EXPECT_EQ(layout.total_elements, 21);
    EXPECT_EQ(layout.shape, (Shape{rank == 0 ? 3 : 2, 3}));
  }
}

TEST(ResultLayoutTest, ReducescatterOfEmptyRowsKeepsTheRowCount) {
  const ReducescatterLayout layout = PlanReducescatter(SpecOf({5, 0}), /*rank=*/1, /*size=*/2);
  EXPECT_EQ(layout.counts, (Shape{0, 0}));
  EXPECT_EQ(layout.shape, (Shape{2, 0}));
}

}  // namespace
}  // namespace lockstep
