// Automatic op names: a counter per kind, restarted in a new generation after a join.
#include <gtest/gtest.h>

#include "submit/op_namer.h"

namespace lockstep {
namespace {

TEST(OpNamerTest, CountsPerKind) {
  OpNamer namer;
  EXPECT_EQ(namer.NameFor("allreduce"), "allreduce.noname.0");
  EXPECT_EQ(namer.NameFor("allgather"), "allgather.noname.0");
  EXPECT_EQ(namer.NameFor("allreduce"), "allreduce.noname.1");
}

TEST(OpNamerTest, NewGenerationRestartsCountersWithDistinctNames) {
  OpNamer namer;
  namer.NameFor("allreduce");
  namer.NameFor("allreduce");
  namer.StartNewGeneration();
  EXPECT_EQ(namer.NameFor("allreduce"), "allreduce.noname.1.0");
  EXPECT_EQ(namer.NameFor("broadcast"), "broadcast.noname.1.0");
  namer.StartNewGeneration();
  EXPECT_EQ(namer.NameFor("allreduce"), "allreduce.noname.2.0");
}

TEST(OpNamerTest, EachProcessSetCountsOnItsOwn) {
  OpNamer namer;
  EXPECT_EQ(namer.NameFor("allreduce", 2), "allreduce.noname.ps2.0");
  EXPECT_EQ(namer.NameFor("allreduce"), "allreduce.noname.0");  // the global set's own counter
  EXPECT_EQ(namer.NameFor("allreduce", 2), "allreduce.noname.ps2.1");
  EXPECT_EQ(namer.NameFor("allreduce", 1), "allreduce.noname.ps1.0");
  namer.StartNewGeneration();
  EXPECT_EQ(namer.NameFor("allreduce", 2), "allreduce.noname.ps2.1.0");
}

}  // namespace
}  // namespace lockstep
