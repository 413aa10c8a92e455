// When a device result's stream is made to wait on lockstep's done event: at Wait()
// for a handle a user thread waits on (so the framework's later kernels, the rest of
// backward, are not queued behind the collective), at completion for a callback. A
// test double stands in for the CUDA call, so this runs without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "submit/handle_table.h"

namespace lockstep {
namespace {

std::vector<void*>& Ordered() {
  static std::vector<void*> streams;
  return streams;
}

void RecordOrder(const OpResult& result) { Ordered().push_back(result.gpu_stream); }

void FailOrder(const OpResult&) { throw Error("GPU path failed: restart the process"); }

// A done event of an incomplete type: the table never looks inside it.
OpResult DeviceResult(void* stream) {
  static int token = 0;
  OpResult result;
  result.gpu_done =
      std::shared_ptr<GpuEvent>(reinterpret_cast<GpuEvent*>(&token), [](GpuEvent*) {});
  result.gpu_stream = stream;
  return result;
}

void* Stream(uintptr_t id) { return reinterpret_cast<void*>(id); }

class GpuCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override { Ordered().clear(); }
};

TEST_F(GpuCompletionTest, AWaitedHandleOrdersItsStreamAtWaitNotAtCompletion) {
  HandleTable table(&RecordOrder);
  Handle handle = table.Allocate();
  table.Complete(handle, Status::Ok(), DeviceResult(Stream(7)));
  EXPECT_TRUE(Ordered().empty()) << "the stream must not wait while the handle is unclaimed";
  EXPECT_TRUE(table.Poll(handle));
  EXPECT_TRUE(Ordered().empty()) << "poll() must not order the stream either";
  OpResult result = table.Wait(handle);
  EXPECT_EQ(Ordered(), std::vector<void*>{Stream(7)});
  EXPECT_NE(result.gpu_done, nullptr) << "kept, so a frontend can order another stream too";
  EXPECT_EQ(result.gpu_stream, Stream(7));
}

TEST_F(GpuCompletionTest, ACallbackHandleOrdersItsStreamBeforeTheCallbackRuns) {
  HandleTable table(&RecordOrder);
  size_t ordered_when_called = 99;
  Handle handle = table.Allocate([&](const Status& status, OpResult) {
    EXPECT_TRUE(status.ok());
    ordered_when_called = Ordered().size();
  });
  table.Complete(handle, Status::Ok(), DeviceResult(Stream(3)));
  EXPECT_EQ(ordered_when_called, 1u);
  EXPECT_EQ(Ordered(), std::vector<void*>{Stream(3)});
}

TEST_F(GpuCompletionTest, HostResultsAndFailedOpsOrderNothing) {
  HandleTable table(&RecordOrder);
  Handle host = table.Allocate();
  table.Complete(host, Status::Ok(), OpResult{});
  table.Wait(host);
  Handle failed = table.Allocate();
  table.Complete(failed, Status::Aborted("peer gone"), DeviceResult(Stream(1)));
  EXPECT_THROW(table.Wait(failed), Error);
  EXPECT_TRUE(Ordered().empty());
}

TEST_F(GpuCompletionTest, AFailureToOrderFailsTheWaitNamingTheCause) {
  HandleTable table(&FailOrder);
  Handle handle = table.Allocate();
  table.Complete(handle, Status::Ok(), DeviceResult(Stream(2)));
  try {
    table.Wait(handle);
    FAIL() << "Wait returned a result whose GPU work may not have run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("restart the process"), std::string::npos) << e.what();
  }
  EXPECT_THROW(table.Poll(handle), Error) << "the handle is forgotten after a failed wait";
}

TEST_F(GpuCompletionTest, AFailureToOrderReachesTheCallbackAsAnError) {
  HandleTable table(&FailOrder);
  Status seen;
  Handle handle = table.Allocate([&](const Status& status, OpResult result) {
    seen = status;
    EXPECT_EQ(result.gpu_done, nullptr) << "no result is handed on with a failure";
  });
  table.Complete(handle, Status::Ok(), DeviceResult(Stream(2)));
  EXPECT_EQ(seen.code(), Status::Code::kAborted);
  EXPECT_NE(seen.message().find("restart"), std::string::npos) << seen.message();
}

}  // namespace
}  // namespace lockstep
