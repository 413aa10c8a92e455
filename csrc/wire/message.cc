#include "wire/message.h"

#include <cstring>

#include "wire/process_set_change.h"
#include "wire/wire.h"

namespace lockstep {

namespace {

// Distinct kinds so one list type can never be parsed as the other.
constexpr uint8_t kRequestListKind = 1;
constexpr uint8_t kResponseListKind = 2;

// Equality means "encodes to the same bytes", so a NaN scale equals itself and a
// message equals its own round trip.
bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

bool IsValidResponseType(uint8_t raw) { return raw <= static_cast<uint8_t>(ResponseType::kError); }

// A change travels on change messages only; on those it must decode, except on a
// response that reports the change's failure instead.
std::vector<int32_t> CheckedChange(std::vector<int32_t> words, bool change_message, bool failed) {
  if (!change_message || failed) {
    if (!words.empty()) throw WireError("process set change on a message that carries none");
    return words;
  }
  DecodeChange(words);
  return words;
}

template <typename Enum>
Enum ReadEnum(WireReader& reader, bool (*is_valid)(uint8_t), const char* what) {
  uint8_t raw = reader.ReadU8();
  if (!is_valid(raw)) {
    throw WireError(std::string("invalid ") + what + " value " + std::to_string(raw) +
                    " in wire message");
  }
  return static_cast<Enum>(raw);
}

int32_t ReadI32AtLeast(WireReader& reader, int32_t minimum, const char* what) {
  int32_t value = reader.ReadI32();
  if (value < minimum) {
    throw WireError(std::string("invalid ") + what + " " + std::to_string(value) +
                    " in wire message");
  }
  return value;
}

template <typename Int>
std::vector<Int> RequireNonNegative(std::vector<Int> values, const char* what) {
  for (Int value : values) {
    if (value < 0) {
      throw WireError(std::string("negative ") + what + " entry " + std::to_string(value) +
                      " in wire message");
    }
  }
  return values;
}

void WriteRequest(WireWriter& writer, const Request& request) {
  writer.WriteI32(request.rank);
  writer.WriteU8(static_cast<uint8_t>(request.op));
  writer.WriteU8(static_cast<uint8_t>(request.dtype));
  writer.WriteU8(static_cast<uint8_t>(request.reduce_op));
  writer.WriteI32(request.root_rank);
  writer.WriteI32(request.device);
  writer.WriteF64(request.prescale);
  writer.WriteF64(request.postscale);
  writer.WriteString(request.name);
  writer.WriteI64Vector(request.shape);
  writer.WriteI64Vector(request.splits);
  writer.WriteI64(request.group_id);
  writer.WriteI32(request.group_size);
  writer.WriteI32Vector(request.change);
}

Request ReadRequest(WireReader& reader) {
  Request request;
  request.rank = ReadI32AtLeast(reader, 0, "rank");
  request.op = ReadEnum<OpType>(reader, IsValidOpType, "op type");
  request.dtype = ReadEnum<DataType>(reader, IsValidDataType, "data type");
  request.reduce_op = ReadEnum<ReduceOp>(reader, IsValidReduceOp, "reduce op");
  request.root_rank = reader.ReadI32();
  request.device = ReadI32AtLeast(reader, -1, "device");
  request.prescale = reader.ReadF64();
  request.postscale = reader.ReadF64();
  request.name = reader.ReadString();
  request.shape = RequireNonNegative(reader.ReadI64Vector(), "shape");
  request.splits = RequireNonNegative(reader.ReadI64Vector(), "splits");
  request.group_id = reader.ReadI64();
  request.group_size = ReadI32AtLeast(reader, 0, "group size");
  request.change = CheckedChange(reader.ReadI32Vector(), request.op == OpType::kProcessSetChange,
                                 /*failed=*/false);
  return request;
}

void WriteResponse(WireWriter& writer, const Response& response) {
  writer.WriteU8(static_cast<uint8_t>(response.type));
  writer.WriteU8(static_cast<uint8_t>(response.dtype));
  writer.WriteU8(static_cast<uint8_t>(response.reduce_op));
  writer.WriteI32(response.root_rank);
  writer.WriteI32(response.device);
  writer.WriteF64(response.prescale);
  writer.WriteF64(response.postscale);
  writer.WriteStringVector(response.names);
  writer.WriteI64Vector(response.sizes);
  writer.WriteI64Vector(response.shape);
  writer.WriteString(response.error_message);
  writer.WriteI32(response.last_joined_rank);
  writer.WriteI64(response.group_id);
  writer.WriteI32Vector(response.change);
}

Response ReadResponse(WireReader& reader) {
  Response response;
  response.type = ReadEnum<ResponseType>(reader, IsValidResponseType, "response type");
  response.dtype = ReadEnum<DataType>(reader, IsValidDataType, "data type");
  response.reduce_op = ReadEnum<ReduceOp>(reader, IsValidReduceOp, "reduce op");
  response.root_rank = reader.ReadI32();
  response.device = ReadI32AtLeast(reader, -1, "device");
  response.prescale = reader.ReadF64();
  response.postscale = reader.ReadF64();
  response.names = reader.ReadStringVector();
  response.sizes = RequireNonNegative(reader.ReadI64Vector(), "sizes");
  response.shape = RequireNonNegative(reader.ReadI64Vector(), "shape");
  response.error_message = reader.ReadString();
  response.last_joined_rank = ReadI32AtLeast(reader, -1, "last joined rank");
  response.group_id = reader.ReadI64();
  response.change =
      CheckedChange(reader.ReadI32Vector(), response.type == ResponseType::kProcessSetChange,
                    !response.error_message.empty());
  return response;
}

// The encoded size of a record with empty strings and vectors: no record is smaller,
// which bounds how many a message of a given length can hold.
template <typename Record>
size_t MinEncodedBytes(void (*write)(WireWriter&, const Record&)) {
  WireWriter writer;
  write(writer, Record{});
  return writer.Take().size();
}

}  // namespace

bool IsControl(OpType op) { return op == OpType::kJoin || op == OpType::kProcessSetChange; }

bool IsControl(ResponseType type) {
  return type == ResponseType::kJoin || type == ResponseType::kProcessSetChange;
}

bool Request::operator==(const Request& other) const {
  return rank == other.rank && op == other.op && dtype == other.dtype &&
         reduce_op == other.reduce_op && root_rank == other.root_rank && device == other.device &&
         SameBits(prescale, other.prescale) && SameBits(postscale, other.postscale) &&
         name == other.name && shape == other.shape && splits == other.splits &&
         group_id == other.group_id && group_size == other.group_size && change == other.change;
}

bool RequestList::operator==(const RequestList& other) const {
  return requests == other.requests && pending_cache_ids == other.pending_cache_ids;
}

bool Response::operator==(const Response& other) const {
  return type == other.type && dtype == other.dtype && reduce_op == other.reduce_op &&
         root_rank == other.root_rank && device == other.device &&
         SameBits(prescale, other.prescale) && SameBits(postscale, other.postscale) &&
         names == other.names && sizes == other.sizes && shape == other.shape &&
         error_message == other.error_message && last_joined_rank == other.last_joined_rank &&
         group_id == other.group_id && change == other.change;
}

bool ResponseList::operator==(const ResponseList& other) const {
  return responses == other.responses && evict_cache_ids == other.evict_cache_ids;
}

std::vector<uint8_t> SerializeRequestList(const RequestList& list) {
  WireWriter writer;
  writer.WriteHeader(kRequestListKind);
  writer.WriteCount(list.requests.size());
  for (const Request& request : list.requests) WriteRequest(writer, request);
  writer.WriteI32Vector(list.pending_cache_ids);
  return writer.Take();
}

RequestList ParseRequestList(const uint8_t* data, size_t size) {
  static const size_t kMinRequestBytes = MinEncodedBytes<Request>(WriteRequest);
  WireReader reader(data, size);
  reader.ReadHeader(kRequestListKind);
  RequestList list;
  size_t count = reader.ReadCount(kMinRequestBytes, "request list");
  list.requests.reserve(count);
  for (size_t i = 0; i < count; ++i) list.requests.push_back(ReadRequest(reader));
  list.pending_cache_ids = RequireNonNegative(reader.ReadI32Vector(), "pending cache id");
  reader.ExpectEnd();
  return list;
}

std::vector<uint8_t> SerializeResponseList(const ResponseList& list) {
  WireWriter writer;
  writer.WriteHeader(kResponseListKind);
  writer.WriteCount(list.responses.size());
  for (const Response& response : list.responses) WriteResponse(writer, response);
  writer.WriteI32Vector(list.evict_cache_ids);
  return writer.Take();
}

ResponseList ParseResponseList(const uint8_t* data, size_t size) {
  static const size_t kMinResponseBytes = MinEncodedBytes<Response>(WriteResponse);
  WireReader reader(data, size);
  reader.ReadHeader(kResponseListKind);
  ResponseList list;
  size_t count = reader.ReadCount(kMinResponseBytes, "response list");
  list.responses.reserve(count);
  for (size_t i = 0; i < count; ++i) list.responses.push_back(ReadResponse(reader));
  list.evict_cache_ids = RequireNonNegative(reader.ReadI32Vector(), "evict cache id");
  reader.ExpectEnd();
  return list;
}

}  // namespace lockstep
