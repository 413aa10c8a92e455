// Request/response lists: equality over every field, exact round trips, and rejection
// of every kind of malformed input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "wire/message.h"
#include "wire/process_set_change.h"
#include "wire/wire.h"

namespace lockstep {
namespace {

const std::string kUnicodeName = "layer\xC3\xB1/\xE6\x9D\x83\xE9\x87\x8D/\xF0\x9F\x94\xA5";

// Every field away from its default, so a field the encoding forgot cannot hide.
Request FullRequest() {
  Request r;
  r.rank = 3;
  r.op = OpType::kAlltoall;
  r.dtype = DataType::kBFloat16;
  r.reduce_op = ReduceOp::kProduct;
  r.root_rank = 2;
  r.device = 1;
  r.prescale = 0.25;
  r.postscale = -4.0;
  r.name = kUnicodeName;
  r.shape = {6, 0, std::numeric_limits<int64_t>::max()};
  r.splits = {1, 2, 3};
  r.group_id = -77;
  r.group_size = 4;
  return r;
}

Response FullResponse() {
  Response r;
  r.type = ResponseType::kAllgather;
  r.dtype = DataType::kInt16;
  r.reduce_op = ReduceOp::kMax;
  r.root_rank = 5;
  r.device = 0;
  r.prescale = 2.5;
  r.postscale = 1e-300;
  r.names = {"a", "", kUnicodeName};
  r.sizes = {3, 0, std::numeric_limits<int64_t>::max()};
  r.shape = {3, 7};
  r.error_message = "boom \xE2\x9C\x97";
  r.last_joined_rank = 9;
  r.group_id = 1234567890123;
  return r;
}

// A change travels only on a change message, so it has records of its own.
std::vector<int32_t> AddWords(std::vector<int> ranks) {
  ProcessSetChange change;
  change.ranks = std::move(ranks);
  return EncodeChange(change);
}

Request ChangeRequest() {
  Request r;
  r.rank = 1;
  r.op = OpType::kProcessSetChange;
  r.name = "add_process_set([0, 2])";
  r.change = AddWords({0, 2});
  return r;
}

Response ChangeResponse() {
  Response r;
  r.type = ResponseType::kProcessSetChange;
  r.change = AddWords({0, 2});
  return r;
}

RequestList FullRequestList() {
  RequestList list;
  list.requests = {FullRequest(), Request{}, FullRequest(), ChangeRequest()};
  list.requests[2].name = "second";
  list.requests[2].prescale = std::numeric_limits<double>::quiet_NaN();
  list.requests[2].postscale = -std::numeric_limits<double>::infinity();
  list.pending_cache_ids = {0, 5, std::numeric_limits<int32_t>::max()};
  return list;
}

ResponseList FullResponseList() {
  ResponseList list;
  list.responses = {FullResponse(), Response{}, FullResponse(), ChangeResponse()};
  list.responses[2].type = ResponseType::kError;
  list.responses[2].prescale = std::numeric_limits<double>::infinity();
  list.responses[2].postscale = std::numeric_limits<double>::quiet_NaN();
  list.evict_cache_ids = {7, 0};
  return list;
}

RequestList RoundTrip(const RequestList& list) {
  std::vector<uint8_t> bytes = SerializeRequestList(list);
  return ParseRequestList(bytes.data(), bytes.size());
}

ResponseList RoundTrip(const ResponseList& list) {
  std::vector<uint8_t> bytes = SerializeResponseList(list);
  return ParseResponseList(bytes.data(), bytes.size());
}

using RequestMutation = std::function<void(Request&)>;
using ResponseMutation = std::function<void(Response&)>;

// One mutation per field, each changing only that field of FullRequest().
std::vector<RequestMutation> RequestFieldMutations() {
  return {
      [](Request& r) { r.rank = 4; },
      [](Request& r) { r.op = OpType::kAllgather; },
      [](Request& r) { r.dtype = DataType::kFloat32; },
      [](Request& r) { r.reduce_op = ReduceOp::kSum; },
      [](Request& r) { r.root_rank = 0; },
      [](Request& r) { r.device = -1; },
      [](Request& r) { r.prescale = 0.5; },
      [](Request& r) { r.postscale = 4.0; },
      [](Request& r) { r.name = "other"; },
      [](Request& r) { r.shape.pop_back(); },
      [](Request& r) { r.splits[1] = 9; },
      [](Request& r) { r.group_id = 78; },
      [](Request& r) { r.group_size = 5; },
      [](Request& r) { r.change = {1}; },
  };
}

std::vector<ResponseMutation> ResponseFieldMutations() {
  return {
      [](Response& r) { r.type = ResponseType::kBroadcast; },
      [](Response& r) { r.dtype = DataType::kUInt8; },
      [](Response& r) { r.reduce_op = ReduceOp::kMin; },
      [](Response& r) { r.root_rank = 0; },
      [](Response& r) { r.device = 2; },
      [](Response& r) { r.prescale = 1.0; },
      [](Response& r) { r.postscale = 0.0; },
      [](Response& r) { r.names[1] = "b"; },
      [](Response& r) { r.sizes = {}; },
      [](Response& r) { r.shape[1] = 8; },
      [](Response& r) { r.error_message = ""; },
      [](Response& r) { r.last_joined_rank = -1; },
      [](Response& r) { r.group_id = 0; },
      [](Response& r) { r.change = {1}; },
  };
}

TEST(MessageEquality, EveryRequestFieldCounts) {
  EXPECT_EQ(FullRequest(), FullRequest());
  for (const RequestMutation& mutate : RequestFieldMutations()) {
    Request changed = FullRequest();
    mutate(changed);
    EXPECT_FALSE(changed == FullRequest());
  }
}

TEST(MessageEquality, EveryResponseFieldCounts) {
  EXPECT_EQ(FullResponse(), FullResponse());
  for (const ResponseMutation& mutate : ResponseFieldMutations()) {
    Response changed = FullResponse();
    mutate(changed);
    EXPECT_FALSE(changed == FullResponse());
  }
}

TEST(MessageEquality, ListsCompareTheirExtraIds) {
  RequestList requests = FullRequestList();
  requests.pending_cache_ids.push_back(1);
  EXPECT_FALSE(requests == FullRequestList());
  ResponseList responses = FullResponseList();
  responses.evict_cache_ids.clear();
  EXPECT_FALSE(responses == FullResponseList());
}

TEST(MessageEquality, ScalesCompareByBitsSoNaNEqualsItself) {
  Request a;
  a.prescale = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(a, a);
  Request b;
  b.postscale = -0.0;
  Request c;
  c.postscale = 0.0;
  EXPECT_FALSE(b == c);
}

TEST(MessageRoundTrip, FullListsSurviveExactly) {
  EXPECT_EQ(RoundTrip(FullRequestList()), FullRequestList());
  EXPECT_EQ(RoundTrip(FullResponseList()), FullResponseList());
  EXPECT_TRUE(std::isnan(RoundTrip(FullRequestList()).requests[2].prescale));
  EXPECT_TRUE(std::isinf(RoundTrip(FullResponseList()).responses[2].prescale));
}

TEST(MessageRoundTrip, EmptyListsSurvive) {
  EXPECT_EQ(RoundTrip(RequestList{}), RequestList{});
  EXPECT_EQ(RoundTrip(ResponseList{}), ResponseList{});
}

TEST(MessageRoundTrip, EveryEnumValueSurvives) {
  RequestList requests;
  for (uint8_t op = 0; op <= static_cast<uint8_t>(OpType::kProcessSetChange); ++op) {
    for (uint8_t dtype = 0; dtype < kNumDataTypes; ++dtype) {
      for (uint8_t reduce = 0; reduce <= static_cast<uint8_t>(ReduceOp::kProduct); ++reduce) {
        Request r;
        r.op = static_cast<OpType>(op);
        if (r.op == OpType::kProcessSetChange) r.change = AddWords({1});
        r.dtype = static_cast<DataType>(dtype);
        r.reduce_op = static_cast<ReduceOp>(reduce);
        requests.requests.push_back(r);
      }
    }
  }
  EXPECT_EQ(RoundTrip(requests), requests);

  ResponseList responses;
  for (uint8_t type = 0; type <= static_cast<uint8_t>(ResponseType::kError); ++type) {
    Response r;
    r.type = static_cast<ResponseType>(type);
    if (r.type == ResponseType::kProcessSetChange) r.change = AddWords({1});
    responses.responses.push_back(r);
  }
  EXPECT_EQ(RoundTrip(responses), responses);
}

TEST(MessageRoundTrip, LargeListsSurvive) {
  RequestList requests;
  ResponseList responses;
  for (int i = 0; i < 2000; ++i) {
    Request r = FullRequest();
    r.name = "tensor." + std::to_string(i);
    r.shape = std::vector<int64_t>(static_cast<size_t>(i % 9), i);
    requests.requests.push_back(r);
    requests.pending_cache_ids.push_back(i);
    Response s = FullResponse();
    s.names.assign(static_cast<size_t>(i % 5), r.name);
    s.sizes = std::vector<int64_t>(static_cast<size_t>(i), int64_t{1} << 40);
    responses.responses.push_back(s);
  }
  EXPECT_EQ(RoundTrip(requests), requests);
  EXPECT_EQ(RoundTrip(responses), responses);
}

TEST(MessageParse, EveryTruncatedPrefixIsRejected) {
  std::vector<uint8_t> requests = SerializeRequestList(FullRequestList());
  std::vector<uint8_t> responses = SerializeResponseList(FullResponseList());
  for (size_t length = 0; length < requests.size(); ++length) {
    std::vector<uint8_t> prefix(requests.begin(), requests.begin() + length);
    EXPECT_THROW(ParseRequestList(prefix.data(), prefix.size()), WireError) << length;
  }
  for (size_t length = 0; length < responses.size(); ++length) {
    std::vector<uint8_t> prefix(responses.begin(), responses.begin() + length);
    EXPECT_THROW(ParseResponseList(prefix.data(), prefix.size()), WireError) << length;
  }
}

TEST(MessageParse, TrailingGarbageIsRejected) {
  std::vector<uint8_t> requests = SerializeRequestList(FullRequestList());
  requests.push_back(0);
  EXPECT_THROW(ParseRequestList(requests.data(), requests.size()), WireError);
  std::vector<uint8_t> responses = SerializeResponseList(FullResponseList());
  responses.push_back(0);
  EXPECT_THROW(ParseResponseList(responses.data(), responses.size()), WireError);
}

TEST(MessageParse, OneListKindIsNeverTheOther) {
  std::vector<uint8_t> requests = SerializeRequestList(RequestList{});
  std::vector<uint8_t> responses = SerializeResponseList(ResponseList{});
  EXPECT_THROW(ParseResponseList(requests.data(), requests.size()), WireError);
  EXPECT_THROW(ParseRequestList(responses.data(), responses.size()), WireError);
}

TEST(MessageParse, WrongMagicAndVersionAreRejected) {
  std::vector<uint8_t> bytes = SerializeRequestList(FullRequestList());
  std::vector<uint8_t> bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_THROW(ParseRequestList(bad_magic.data(), bad_magic.size()), WireError);
  // Version 1 (process-set changes as allgathers) and any later one are refused.
  for (uint8_t version : {uint8_t{1}, static_cast<uint8_t>(kWireVersion + 1)}) {
    std::vector<uint8_t> bad_version = bytes;
    bad_version[4] = version;
    EXPECT_THROW(ParseRequestList(bad_version.data(), bad_version.size()), WireError);
  }
}

// The offset of the one byte a mutation changes, found by comparing encodings, so the
// test does not hard-code the layout.
size_t OffsetChangedBy(const RequestMutation& mutate) {
  RequestList a{{Request{}}, {}};
  RequestList b = a;
  mutate(b.requests[0]);
  std::vector<uint8_t> x = SerializeRequestList(a), y = SerializeRequestList(b);
  size_t offset = 0;
  while (x[offset] == y[offset]) ++offset;
  return offset;
}

size_t OffsetChangedBy(const ResponseMutation& mutate) {
  ResponseList a{{Response{}}, {}};
  ResponseList b = a;
  mutate(b.responses[0]);
  std::vector<uint8_t> x = SerializeResponseList(a), y = SerializeResponseList(b);
  size_t offset = 0;
  while (x[offset] == y[offset]) ++offset;
  return offset;
}

TEST(MessageParse, InvalidEnumBytesAreRejected) {
  // A change request, so that the last valid op (a change) parses too.
  std::vector<uint8_t> request_bytes = SerializeRequestList(RequestList{{ChangeRequest()}, {}});
  struct Case {
    size_t offset;
    uint8_t first_invalid;
  };
  std::vector<Case> request_cases = {
      {OffsetChangedBy([](Request& r) { r.op = OpType::kJoin; }), 8},
      {OffsetChangedBy([](Request& r) { r.dtype = DataType::kBool; }), kNumDataTypes},
      {OffsetChangedBy([](Request& r) { r.reduce_op = ReduceOp::kProduct; }), 6},
  };
  for (const Case& c : request_cases) {
    for (int raw : {int{c.first_invalid}, 255}) {
      std::vector<uint8_t> bytes = request_bytes;
      bytes[c.offset] = static_cast<uint8_t>(raw);
      EXPECT_THROW(ParseRequestList(bytes.data(), bytes.size()), WireError) << c.offset;
      bytes[c.offset] = static_cast<uint8_t>(c.first_invalid - 1);
      EXPECT_NO_THROW(ParseRequestList(bytes.data(), bytes.size())) << c.offset;
    }
  }

  std::vector<uint8_t> response_bytes = SerializeResponseList(ResponseList{{Response{}}, {}});
  std::vector<Case> response_cases = {
      {OffsetChangedBy([](Response& r) { r.type = ResponseType::kError; }), 9},
      {OffsetChangedBy([](Response& r) { r.dtype = DataType::kBool; }), kNumDataTypes},
      {OffsetChangedBy([](Response& r) { r.reduce_op = ReduceOp::kProduct; }), 6},
  };
  for (const Case& c : response_cases) {
    std::vector<uint8_t> bytes = response_bytes;
    bytes[c.offset] = c.first_invalid;
    EXPECT_THROW(ParseResponseList(bytes.data(), bytes.size()), WireError) << c.offset;
  }
}

TEST(MessageParse, NegativeCountsAndRanksAreRejected) {
  std::vector<RequestMutation> bad_requests = {
      [](Request& r) { r.rank = -1; },       [](Request& r) { r.device = -2; },
      [](Request& r) { r.shape = {4, -1}; }, [](Request& r) { r.splits = {-3}; },
      [](Request& r) { r.group_size = -1; },
  };
  for (const RequestMutation& mutate : bad_requests) {
    RequestList list{{Request{}}, {}};
    mutate(list.requests[0]);
    std::vector<uint8_t> bytes = SerializeRequestList(list);
    EXPECT_THROW(ParseRequestList(bytes.data(), bytes.size()), WireError);
  }
  std::vector<uint8_t> bad_pending = SerializeRequestList(RequestList{{}, {1, -1}});
  EXPECT_THROW(ParseRequestList(bad_pending.data(), bad_pending.size()), WireError);

  std::vector<ResponseMutation> bad_responses = {
      [](Response& r) { r.device = -2; },
      [](Response& r) { r.sizes = {-1}; },
      [](Response& r) { r.shape = {-5}; },
      [](Response& r) { r.last_joined_rank = -2; },
  };
  for (const ResponseMutation& mutate : bad_responses) {
    ResponseList list{{Response{}}, {}};
    mutate(list.responses[0]);
    std::vector<uint8_t> bytes = SerializeResponseList(list);
    EXPECT_THROW(ParseResponseList(bytes.data(), bytes.size()), WireError);
  }
  std::vector<uint8_t> bad_evict = SerializeResponseList(ResponseList{{}, {-4}});
  EXPECT_THROW(ParseResponseList(bad_evict.data(), bad_evict.size()), WireError);
}

// A valid header followed by a list count that the message cannot possibly hold.
std::vector<uint8_t> HostileListCount(std::vector<uint8_t> valid_empty_list, uint32_t count) {
  std::vector<uint8_t> bytes(valid_empty_list.begin(), valid_empty_list.begin() + 7);
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(count >> (8 * i)));
  bytes.resize(bytes.size() + 256, 0);
  return bytes;
}

TEST(MessageParse, HostileListCountsAreRejected) {
  for (uint32_t count : {0xFFFFFFFFu, 1000000u, 10u}) {
    std::vector<uint8_t> requests = HostileListCount(SerializeRequestList(RequestList{}), count);
    EXPECT_THROW(ParseRequestList(requests.data(), requests.size()), WireError) << count;
    std::vector<uint8_t> responses = HostileListCount(SerializeResponseList(ResponseList{}), count);
    EXPECT_THROW(ParseResponseList(responses.data(), responses.size()), WireError) << count;
  }
}

TEST(MessageParse, HostileNameLengthIsRejected) {
  RequestList list{{Request{}}, {}};
  list.requests[0].name = "abcd";
  std::vector<uint8_t> bytes = SerializeRequestList(list);
  // The name's length prefix sits right before its bytes.
  size_t name_at = OffsetChangedBy([](Request& r) { r.name = "x"; });
  for (size_t i = 0; i < 4; ++i) bytes[name_at + i] = 0xFF;
  EXPECT_THROW(ParseRequestList(bytes.data(), bytes.size()), WireError);
}

}  // namespace
}  // namespace lockstep
