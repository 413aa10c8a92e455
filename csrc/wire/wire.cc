#include "wire/wire.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace lockstep {

namespace {

constexpr size_t kLengthBytes = 4;

std::string Describe(const char* what, size_t needed, size_t remaining) {
  return std::string("wire message truncated reading ") + what + ": needs " +
         std::to_string(needed) + " bytes, " + std::to_string(remaining) + " remain";
}

}  // namespace

// ---- WireWriter -------------------------------------------------------------

void WireWriter::WriteLittleEndian(uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
  }
}

void WireWriter::WriteU8(uint8_t value) { bytes_.push_back(value); }

void WireWriter::WriteU16(uint16_t value) { WriteLittleEndian(value, 2); }

void WireWriter::WriteU32(uint32_t value) { WriteLittleEndian(value, 4); }

void WireWriter::WriteI32(int32_t value) { WriteLittleEndian(static_cast<uint32_t>(value), 4); }

void WireWriter::WriteI64(int64_t value) { WriteLittleEndian(static_cast<uint64_t>(value), 8); }

void WireWriter::WriteF64(double value) {
  // Bit copy, so NaN payloads and signed zeros survive the trip unchanged.
  uint64_t bits;
  static_assert(sizeof(bits) == sizeof(value), "double must be 64 bits");
  std::memcpy(&bits, &value, sizeof(bits));
  WriteLittleEndian(bits, 8);
}

void WireWriter::WriteBool(bool value) { WriteU8(value ? 1 : 0); }

void WireWriter::WriteCount(size_t count) {
  if (count > std::numeric_limits<uint32_t>::max()) {
    throw WireError("wire length " + std::to_string(count) + " exceeds the u32 limit");
  }
  WriteU32(static_cast<uint32_t>(count));
}

void WireWriter::WriteString(const std::string& value) {
  WriteCount(value.size());
  bytes_.insert(bytes_.end(), value.begin(), value.end());
}

void WireWriter::WriteI64Vector(const std::vector<int64_t>& values) {
  WriteCount(values.size());
  for (int64_t value : values) WriteI64(value);
}

void WireWriter::WriteI32Vector(const std::vector<int32_t>& values) {
  WriteCount(values.size());
  for (int32_t value : values) WriteI32(value);
}

void WireWriter::WriteStringVector(const std::vector<std::string>& values) {
  WriteCount(values.size());
  for (const std::string& value : values) WriteString(value);
}

void WireWriter::WriteHeader(uint8_t kind) {
  for (char c : kWireMagic) WriteU8(static_cast<uint8_t>(c));
  WriteU16(kWireVersion);
  WriteU8(kind);
}

std::vector<uint8_t> WireWriter::Take() {
  std::vector<uint8_t> out;
  out.swap(bytes_);
  return out;
}

// ---- WireReader -------------------------------------------------------------

WireReader::WireReader(const uint8_t* data, size_t size) : data_(data), size_(size) {
  if (data == nullptr && size != 0) throw WireError("wire reader given null data");
}

void WireReader::Require(size_t bytes, const char* what) const {
  if (bytes > remaining()) throw WireError(Describe(what, bytes, remaining()));
}

uint64_t WireReader::ReadLittleEndian(size_t bytes, const char* what) {
  Require(bytes, what);
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) {
    value |= static_cast<uint64_t>(data_[offset_ + i]) << (8 * i);
  }
  offset_ += bytes;
  return value;
}

uint8_t WireReader::ReadU8() { return static_cast<uint8_t>(ReadLittleEndian(1, "u8")); }

uint16_t WireReader::ReadU16() { return static_cast<uint16_t>(ReadLittleEndian(2, "u16")); }

uint32_t WireReader::ReadU32() { return static_cast<uint32_t>(ReadLittleEndian(4, "u32")); }

int32_t WireReader::ReadI32() { return static_cast<int32_t>(ReadLittleEndian(4, "i32")); }

int64_t WireReader::ReadI64() { return static_cast<int64_t>(ReadLittleEndian(8, "i64")); }

double WireReader::ReadF64() {
  uint64_t bits = ReadLittleEndian(8, "f64");
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

bool WireReader::ReadBool() {
  uint8_t raw = static_cast<uint8_t>(ReadLittleEndian(1, "bool"));
  if (raw > 1) throw WireError("invalid bool byte " + std::to_string(raw) + " in wire message");
  return raw == 1;
}

size_t WireReader::ReadCount(size_t min_item_bytes, const char* what) {
  size_t count = static_cast<size_t>(ReadLittleEndian(kLengthBytes, what));
  // Division, not multiplication, so the check itself cannot overflow; every item is
  // taken to need at least one byte so no count can escape the bound.
  if (count > remaining() / std::max<size_t>(min_item_bytes, 1)) {
    throw WireError(std::string("wire length ") + std::to_string(count) + " of " + what +
                    " exceeds the " + std::to_string(remaining()) + " bytes remaining");
  }
  return count;
}

std::string WireReader::ReadString() {
  size_t length = ReadCount(1, "string");
  if (length == 0) return std::string();
  std::string value(reinterpret_cast<const char*>(data_ + offset_), length);
  offset_ += length;
  return value;
}

std::vector<int64_t> WireReader::ReadI64Vector() {
  size_t count = ReadCount(8, "i64 vector");
  std::vector<int64_t> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) values.push_back(ReadI64());
  return values;
}

std::vector<int32_t> WireReader::ReadI32Vector() {
  size_t count = ReadCount(4, "i32 vector");
  std::vector<int32_t> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) values.push_back(ReadI32());
  return values;
}

std::vector<std::string> WireReader::ReadStringVector() {
  // Each string costs at least its length prefix, which bounds the count.
  size_t count = ReadCount(kLengthBytes, "string vector");
  std::vector<std::string> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) values.push_back(ReadString());
  return values;
}

void WireReader::ReadHeader(uint8_t expected_kind) {
  Require(sizeof(kWireMagic), "magic");
  if (std::memcmp(data_ + offset_, kWireMagic, sizeof(kWireMagic)) != 0) {
    throw WireError("not a lockstep wire message (bad magic bytes)");
  }
  offset_ += sizeof(kWireMagic);
  uint16_t version = ReadU16();
  if (version != kWireVersion) {
    throw WireError("wire format version " + std::to_string(version) + " not supported (expected " +
                    std::to_string(kWireVersion) + ")");
  }
  uint8_t kind = ReadU8();
  if (kind != expected_kind) {
    throw WireError("wire message kind " + std::to_string(kind) + " where kind " +
                    std::to_string(expected_kind) + " was expected");
  }
}

void WireReader::ExpectEnd() const {
  if (remaining() != 0) {
    throw WireError(std::to_string(remaining()) + " unexpected trailing bytes in wire message");
  }
}

}  // namespace lockstep
