// A small versioned, bounds-checked byte serializer. Everything is little-endian
// regardless of the host, so mixed hosts in one job agree on the bytes. Readers never
// trust a length from the wire: they check it against the bytes that remain before
// allocating, so a hostile or corrupt message costs at most its own size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockstep {

// Malformed input: truncated, oversized, wrong header or an invalid value.
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every message starts with kWireMagic, a u16 format version and a u8 message kind.
// Version 2: process-set changes became their own request and response type (the
// error response's type byte moved from 7 to 8) and every record carries a change.
constexpr char kWireMagic[4] = {'L', 'K', 'S', 'T'};
constexpr uint16_t kWireVersion = 2;

class WireWriter {
 public:
  void WriteU8(uint8_t value);
  void WriteU16(uint16_t value);
  void WriteU32(uint32_t value);
  void WriteI32(int32_t value);
  void WriteI64(int64_t value);
  void WriteF64(double value);
  void WriteBool(bool value);
  // Lengths and counts are u32; larger inputs throw WireError.
  void WriteString(const std::string& value);
  void WriteI64Vector(const std::vector<int64_t>& values);
  void WriteI32Vector(const std::vector<int32_t>& values);
  void WriteStringVector(const std::vector<std::string>& values);
  void WriteHeader(uint8_t kind);
  // The u32 item count that precedes a list of records the caller writes itself.
  void WriteCount(size_t count);

  // Hands over the bytes written so far and leaves the writer empty.
  std::vector<uint8_t> Take();

 private:
  void WriteLittleEndian(uint64_t value, size_t bytes);

  std::vector<uint8_t> bytes_;
};

class WireReader {
 public:
  // Does not copy: `data` must outlive the reader.
  WireReader(const uint8_t* data, size_t size);

  uint8_t ReadU8();
  uint16_t ReadU16();
  uint32_t ReadU32();
  int32_t ReadI32();
  int64_t ReadI64();
  double ReadF64();
  bool ReadBool();  // only 0 and 1 are accepted
  std::string ReadString();
  std::vector<int64_t> ReadI64Vector();
  std::vector<int32_t> ReadI32Vector();
  std::vector<std::string> ReadStringVector();
  // Checks magic, version and kind, naming whichever is wrong.
  void ReadHeader(uint8_t expected_kind);
  // Throws if any bytes remain unread.
  void ExpectEnd() const;
  // Reads a u32 count of items that each take at least `min_item_bytes`, rejecting
  // counts the remaining bytes cannot possibly hold, so callers may reserve() it.
  size_t ReadCount(size_t min_item_bytes, const char* what);

  size_t remaining() const { return size_ - offset_; }

 private:
  void Require(size_t bytes, const char* what) const;
  uint64_t ReadLittleEndian(size_t bytes, const char* what);

  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

}  // namespace lockstep
