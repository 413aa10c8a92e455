// Process-set changes on the wire: the proposal's encoding, and requests and
// responses of type kProcessSetChange, which carry it (round trips, and rejection of
// every malformed change and of a change on a message of another type).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "wire/message.h"
#include "wire/process_set_change.h"
#include "wire/wire.h"

namespace lockstep {
namespace {

ProcessSetChange Add(std::vector<int> ranks) {
  ProcessSetChange change;
  change.kind = ProcessSetChange::Kind::kAdd;
  change.ranks = std::move(ranks);
  return change;
}

ProcessSetChange Remove(int32_t id) {
  ProcessSetChange change;
  change.kind = ProcessSetChange::Kind::kRemove;
  change.id = id;
  return change;
}

Request Proposal(int rank, const ProcessSetChange& change) {
  Request r;
  r.rank = rank;
  r.op = OpType::kProcessSetChange;
  r.name = DescribeChange(change);
  r.change = EncodeChange(change);
  return r;
}

std::vector<uint8_t> Encoded(const Request& request) {
  return SerializeRequestList(RequestList{{request}, {}});
}

std::vector<uint8_t> Encoded(const Response& response) {
  return SerializeResponseList(ResponseList{{response}, {}});
}

bool Parses(const std::vector<uint8_t>& bytes, bool requests) {
  try {
    if (requests) {
      ParseRequestList(bytes.data(), bytes.size());
    } else {
      ParseResponseList(bytes.data(), bytes.size());
    }
  } catch (const WireError&) {
    return false;
  }
  return true;
}

TEST(ChangeEncoding, RoundTripsAndDescribesTheCall) {
  for (const ProcessSetChange& change : {Add({0}), Add({0, 2, 7}), Remove(1), Remove(42)}) {
    EXPECT_EQ(DecodeChange(EncodeChange(change)), change) << DescribeChange(change);
  }
  EXPECT_EQ(EncodeChange(Add({0, 2})), (std::vector<int32_t>{1, 0, 2, 0, 2}));
  EXPECT_EQ(DescribeChange(Add({0, 2})), "add_process_set([0, 2])");
  EXPECT_EQ(DescribeChange(Remove(3)), "remove_process_set(3)");
  EXPECT_EQ(DescribeRanks({}), "[]");
}

TEST(ChangeEncoding, MalformedWordsAreRejected) {
  const std::vector<std::vector<int32_t>> malformed = {
      {},               // no header
      {1, 0},           // truncated header
      {3, 0, 1, 0},     // unknown kind
      {0, 0, 1, 0},     // unknown kind
      {1, 0, 2, 0},     // count says two ranks, one follows
      {1, 0, 1, 0, 1},  // count says one rank, two follow
      {1, 0, -1},       // negative count
      {1, 0, 0},        // an addition of no ranks
      {1, 5, 1, 0},     // an addition naming an id
      {1, 0, 2, 2, 1},  // ranks not ascending
      {1, 0, 2, 1, 1},  // duplicate rank
      {1, 0, 1, -1},    // negative rank
      {2, 0, 0},        // removal of id 0
      {2, -3, 0},       // removal of a negative id
      {2, 1, 1, 0},     // removal naming ranks
  };
  for (const auto& words : malformed) {
    EXPECT_THROW(DecodeChange(words), WireError) << ::testing::PrintToString(words);
  }
}

TEST(ChangeMessage, RequestsAndResponsesRoundTrip) {
  RequestList requests{{Proposal(0, Add({0, 1})), Proposal(3, Remove(9))}, {}};
  std::vector<uint8_t> bytes = SerializeRequestList(requests);
  EXPECT_EQ(ParseRequestList(bytes.data(), bytes.size()), requests);

  Response agreed;
  agreed.type = ResponseType::kProcessSetChange;
  agreed.change = EncodeChange(Add({1, 2}));
  Response failed;
  failed.type = ResponseType::kProcessSetChange;
  failed.error_message = "process sets must be changed by every rank alike";
  ResponseList responses{{agreed, failed}, {}};
  bytes = SerializeResponseList(responses);
  EXPECT_EQ(ParseResponseList(bytes.data(), bytes.size()), responses);
}

TEST(ChangeMessage, AChangeOnAnyOtherRequestTypeIsRejected) {
  for (uint8_t op = 0; op < static_cast<uint8_t>(OpType::kProcessSetChange); ++op) {
    Request r = Proposal(0, Add({0}));
    r.op = static_cast<OpType>(op);
    EXPECT_FALSE(Parses(Encoded(r), true)) << OpTypeName(r.op);
  }
}

TEST(ChangeMessage, AChangeRequestNeedsAWellFormedChange) {
  Request r = Proposal(0, Add({0, 1}));
  EXPECT_TRUE(Parses(Encoded(r), true));
  for (const std::vector<int32_t>& words : {std::vector<int32_t>{}, std::vector<int32_t>{9, 0, 0},
                                            std::vector<int32_t>{1, 0, 3, 0, 1}}) {
    r.change = words;
    EXPECT_FALSE(Parses(Encoded(r), true)) << ::testing::PrintToString(words);
  }
}

TEST(ChangeMessage, AChangeResponseCarriesAChangeOrAnErrorNeverBoth) {
  Response r;
  r.type = ResponseType::kProcessSetChange;
  EXPECT_FALSE(Parses(Encoded(r), false));  // neither
  r.change = {1, 0, 2, 1, 0};               // malformed: ranks descending
  EXPECT_FALSE(Parses(Encoded(r), false));
  r.change = EncodeChange(Remove(2));
  EXPECT_TRUE(Parses(Encoded(r), false));
  r.error_message = "stalled";
  EXPECT_FALSE(Parses(Encoded(r), false));  // both
  r.change.clear();
  EXPECT_TRUE(Parses(Encoded(r), false));

  Response error;
  error.type = ResponseType::kError;
  error.names = {"x"};
  error.error_message = "mismatch";
  error.change = EncodeChange(Remove(2));
  EXPECT_FALSE(Parses(Encoded(error), false));  // a change on another type
}

TEST(ChangeMessage, ControlTypesAreJoinAndChangesOnly) {
  for (uint8_t op = 0; op <= static_cast<uint8_t>(OpType::kProcessSetChange); ++op) {
    const OpType type = static_cast<OpType>(op);
    EXPECT_EQ(IsControl(type), type == OpType::kJoin || type == OpType::kProcessSetChange);
  }
  for (uint8_t raw = 0; raw <= static_cast<uint8_t>(ResponseType::kError); ++raw) {
    const ResponseType type = static_cast<ResponseType>(raw);
    EXPECT_EQ(IsControl(type),
              type == ResponseType::kJoin || type == ResponseType::kProcessSetChange);
  }
}

}  // namespace
}  // namespace lockstep
