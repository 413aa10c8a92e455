// The byte serializer: exact little-endian layout, round trips at the extremes, and
// rejection of truncated, oversized and mislabelled input.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "wire/wire.h"

// Records the largest single heap allocation while armed, so tests can show that a
// hostile length is rejected before anything is allocated for it. Only the sizes are
// observed; memory still comes from malloc as usual.
namespace {
std::atomic<bool> g_probe_armed{false};
std::atomic<size_t> g_probe_largest{0};
}  // namespace

void* operator new(size_t bytes) {
  if (g_probe_armed.load(std::memory_order_relaxed)) {
    size_t seen = g_probe_largest.load(std::memory_order_relaxed);
    while (bytes > seen && !g_probe_largest.compare_exchange_weak(seen, bytes)) {
    }
  }
  void* memory = std::malloc(bytes == 0 ? 1 : bytes);
  if (memory == nullptr) throw std::bad_alloc();
  return memory;
}
// Out of line so GCC does not pair the free() with the caller's `new` expression and
// warn about a malloc/new mismatch that is in fact consistent.
[[gnu::noinline]] void operator delete(void* memory) noexcept { std::free(memory); }
[[gnu::noinline]] void operator delete(void* memory, size_t) noexcept { std::free(memory); }

namespace lockstep {
namespace {

size_t LargestAllocationDuring(const std::function<void()>& body) {
  g_probe_largest = 0;
  g_probe_armed = true;
  body();
  g_probe_armed = false;
  return g_probe_largest;
}

constexpr uint8_t kTestKind = 42;

std::vector<uint8_t> U32Bytes(uint32_t value) {
  WireWriter writer;
  writer.WriteU32(value);
  return writer.Take();
}

TEST(WireWriter, WritesLittleEndianRegardlessOfHost) {
  WireWriter writer;
  writer.WriteU16(0x0102);
  writer.WriteI32(-2);
  writer.WriteI64(0x0102030405060708);
  writer.WriteBool(true);
  writer.WriteString("ab");
  std::vector<uint8_t> expected = {0x02, 0x01, 0xFE, 0xFF, 0xFF, 0xFF, 0x08, 0x07, 0x06, 0x05, 0x04,
                                   0x03, 0x02, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 'a',  'b'};
  EXPECT_EQ(writer.Take(), expected);
}

TEST(WireWriter, TakeLeavesWriterEmpty) {
  WireWriter writer;
  writer.WriteU8(7);
  EXPECT_EQ(writer.Take().size(), 1u);
  EXPECT_TRUE(writer.Take().empty());
}

TEST(WireRoundTrip, IntegersAtTheirExtremes) {
  WireWriter writer;
  for (uint8_t v : {uint8_t{0}, uint8_t{255}}) writer.WriteU8(v);
  for (uint16_t v : {uint16_t{0}, uint16_t{65535}}) writer.WriteU16(v);
  for (uint32_t v : {0u, 0xFFFFFFFFu}) writer.WriteU32(v);
  for (int32_t v :
       {std::numeric_limits<int32_t>::min(), -1, 0, std::numeric_limits<int32_t>::max()})
    writer.WriteI32(v);
  for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0},
                    std::numeric_limits<int64_t>::max()})
    writer.WriteI64(v);
  writer.WriteBool(false);
  writer.WriteBool(true);
  std::vector<uint8_t> bytes = writer.Take();

  WireReader reader(bytes.data(), bytes.size());
  EXPECT_EQ(reader.ReadU8(), 0);
  EXPECT_EQ(reader.ReadU8(), 255);
  EXPECT_EQ(reader.ReadU16(), 0);
  EXPECT_EQ(reader.ReadU16(), 65535);
  EXPECT_EQ(reader.ReadU32(), 0u);
  EXPECT_EQ(reader.ReadU32(), 0xFFFFFFFFu);
  EXPECT_EQ(reader.ReadI32(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(reader.ReadI32(), -1);
  EXPECT_EQ(reader.ReadI32(), 0);
  EXPECT_EQ(reader.ReadI32(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(reader.ReadI64(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(reader.ReadI64(), -1);
  EXPECT_EQ(reader.ReadI64(), 0);
  EXPECT_EQ(reader.ReadI64(), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(reader.ReadBool());
  EXPECT_TRUE(reader.ReadBool());
  EXPECT_NO_THROW(reader.ExpectEnd());
}

uint64_t BitsOf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

TEST(WireRoundTrip, DoublesKeepTheirExactBits) {
  uint64_t nan_with_payload_bits = 0x7FF800000000BEEF;
  double nan_with_payload;
  std::memcpy(&nan_with_payload, &nan_with_payload_bits, sizeof(double));
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0 / 3.0,
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN(),
                                nan_with_payload,
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::lowest()};
  WireWriter writer;
  for (double v : values) writer.WriteF64(v);
  std::vector<uint8_t> bytes = writer.Take();
  WireReader reader(bytes.data(), bytes.size());
  for (double v : values) EXPECT_EQ(BitsOf(reader.ReadF64()), BitsOf(v));
  reader.ExpectEnd();
}

TEST(WireRoundTrip, Strings) {
  std::string large(1 << 20, 'x');
  large[12345] = 'y';
  std::vector<std::string> values = {"",
                                     "grad/w\xC3\xABight/\xE6\xA2\xAF\xE5\xBA\xA6/\xF0\x9F\x99\x82",
                                     std::string("nul\0inside", 10), large};
  WireWriter writer;
  for (const std::string& v : values) writer.WriteString(v);
  writer.WriteStringVector({});
  writer.WriteStringVector(values);
  std::vector<uint8_t> bytes = writer.Take();

  WireReader reader(bytes.data(), bytes.size());
  for (const std::string& v : values) EXPECT_EQ(reader.ReadString(), v);
  EXPECT_TRUE(reader.ReadStringVector().empty());
  EXPECT_EQ(reader.ReadStringVector(), values);
  reader.ExpectEnd();
}

TEST(WireRoundTrip, IntegerVectors) {
  std::vector<int64_t> large64(100000);
  std::vector<int32_t> large32(100000);
  for (size_t i = 0; i < large64.size(); ++i) {
    large64[i] = static_cast<int64_t>(i) * 1000003 - 7;
    large32[i] = static_cast<int32_t>(i) * -31;
  }
  std::vector<int64_t> extremes64 = {std::numeric_limits<int64_t>::min(), -1, 0,
                                     std::numeric_limits<int64_t>::max()};
  std::vector<int32_t> extremes32 = {std::numeric_limits<int32_t>::min(), -1, 0,
                                     std::numeric_limits<int32_t>::max()};
  WireWriter writer;
  writer.WriteI64Vector({});
  writer.WriteI64Vector(extremes64);
  writer.WriteI64Vector(large64);
  writer.WriteI32Vector({});
  writer.WriteI32Vector(extremes32);
  writer.WriteI32Vector(large32);
  std::vector<uint8_t> bytes = writer.Take();

  WireReader reader(bytes.data(), bytes.size());
  EXPECT_TRUE(reader.ReadI64Vector().empty());
  EXPECT_EQ(reader.ReadI64Vector(), extremes64);
  EXPECT_EQ(reader.ReadI64Vector(), large64);
  EXPECT_TRUE(reader.ReadI32Vector().empty());
  EXPECT_EQ(reader.ReadI32Vector(), extremes32);
  EXPECT_EQ(reader.ReadI32Vector(), large32);
  reader.ExpectEnd();
}

// Writes one of everything, and reads it back the same way.
std::vector<uint8_t> OneOfEverything() {
  WireWriter writer;
  writer.WriteHeader(kTestKind);
  writer.WriteU8(1);
  writer.WriteU16(2);
  writer.WriteU32(3);
  writer.WriteI32(-4);
  writer.WriteI64(-5);
  writer.WriteF64(6.5);
  writer.WriteBool(true);
  writer.WriteString("seven");
  writer.WriteI64Vector({8, 9});
  writer.WriteI32Vector({10, 11});
  writer.WriteStringVector({"twelve", "", "thirteen"});
  return writer.Take();
}

void ReadEverything(const uint8_t* data, size_t size) {
  WireReader reader(data, size);
  reader.ReadHeader(kTestKind);
  reader.ReadU8();
  reader.ReadU16();
  reader.ReadU32();
  reader.ReadI32();
  reader.ReadI64();
  reader.ReadF64();
  reader.ReadBool();
  reader.ReadString();
  reader.ReadI64Vector();
  reader.ReadI32Vector();
  reader.ReadStringVector();
  reader.ExpectEnd();
}

TEST(WireReader, EveryTruncatedPrefixThrows) {
  std::vector<uint8_t> bytes = OneOfEverything();
  ASSERT_NO_THROW(ReadEverything(bytes.data(), bytes.size()));
  for (size_t length = 0; length < bytes.size(); ++length) {
    // A copy of exactly `length` bytes, so any read past it is caught by ASan too.
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + length);
    EXPECT_THROW(ReadEverything(prefix.data(), prefix.size()), WireError) << "length " << length;
  }
}

TEST(WireReader, TrailingBytesAreRejected) {
  std::vector<uint8_t> bytes = OneOfEverything();
  bytes.push_back(0);
  EXPECT_THROW(ReadEverything(bytes.data(), bytes.size()), WireError);
}

TEST(WireReader, EmptyInputIsUsable) {
  WireReader reader(nullptr, 0);
  EXPECT_EQ(reader.remaining(), 0u);
  EXPECT_NO_THROW(reader.ExpectEnd());
  EXPECT_THROW(reader.ReadU8(), WireError);
}

TEST(WireReader, BoolAcceptsOnlyZeroAndOne) {
  std::vector<uint8_t> bytes = {2};
  WireReader reader(bytes.data(), bytes.size());
  EXPECT_THROW(reader.ReadBool(), WireError);
}

// A length prefix followed by `tail` bytes of payload.
std::vector<uint8_t> ClaimedLength(uint32_t length, size_t tail) {
  std::vector<uint8_t> bytes = U32Bytes(length);
  bytes.resize(bytes.size() + tail, 'z');
  return bytes;
}

TEST(WireReader, HostileLengthsAreRejectedBeforeAllocating) {
  std::vector<std::function<void(WireReader&)>> reads = {
      [](WireReader& r) { r.ReadString(); }, [](WireReader& r) { r.ReadI64Vector(); },
      [](WireReader& r) { r.ReadI32Vector(); }, [](WireReader& r) { r.ReadStringVector(); },
      [](WireReader& r) { r.ReadCount(100, "records"); }};
  for (uint32_t length : {0xFFFFFFFFu, 0x80000000u, 0x10000000u}) {
    std::vector<uint8_t> bytes = ClaimedLength(length, 64);
    for (const auto& read : reads) {
      size_t largest = LargestAllocationDuring([&] {
        WireReader reader(bytes.data(), bytes.size());
        EXPECT_THROW(read(reader), WireError) << "length " << length;
      });
      EXPECT_LT(largest, 4096u) << "length " << length;
    }
  }
}

TEST(WireReader, LengthOneBeyondTheDataIsRejected) {
  std::vector<uint8_t> string_bytes = ClaimedLength(5, 4);
  WireReader string_reader(string_bytes.data(), string_bytes.size());
  EXPECT_THROW(string_reader.ReadString(), WireError);

  std::vector<uint8_t> vector_bytes = ClaimedLength(2, 15);
  WireReader vector_reader(vector_bytes.data(), vector_bytes.size());
  EXPECT_THROW(vector_reader.ReadI64Vector(), WireError);
}

TEST(WireReader, CountThatExactlyFitsIsAccepted) {
  std::vector<uint8_t> bytes = ClaimedLength(3, 300);
  WireReader reader(bytes.data(), bytes.size());
  EXPECT_EQ(reader.ReadCount(100, "records"), 3u);
}

std::string HeaderError(std::vector<uint8_t> bytes, uint8_t expected_kind) {
  WireReader reader(bytes.data(), bytes.size());
  try {
    reader.ReadHeader(expected_kind);
  } catch (const WireError& error) {
    return error.what();
  }
  return "";
}

std::vector<uint8_t> Header(uint8_t kind) {
  WireWriter writer;
  writer.WriteHeader(kind);
  return writer.Take();
}

TEST(WireHeader, LayoutIsMagicVersionKind) {
  std::vector<uint8_t> expected = {'L', 'K', 'S', 'T', kWireVersion, 0, kTestKind};
  EXPECT_EQ(Header(kTestKind), expected);
  EXPECT_EQ(HeaderError(expected, kTestKind), "");
}

TEST(WireHeader, WrongMagicIsNamed) {
  std::vector<uint8_t> bytes = Header(kTestKind);
  bytes[3] = 'X';
  EXPECT_NE(HeaderError(bytes, kTestKind).find("magic"), std::string::npos);
}

TEST(WireHeader, WrongVersionIsNamed) {
  std::vector<uint8_t> bytes = Header(kTestKind);
  bytes[4] = 7;
  EXPECT_EQ(HeaderError(bytes, kTestKind), "wire format version 7 not supported (expected 2)");
}

TEST(WireHeader, WrongKindIsNamed) {
  std::string error = HeaderError(Header(kTestKind), kTestKind + 1);
  EXPECT_NE(error.find("kind 42"), std::string::npos) << error;
  EXPECT_NE(error.find("kind 43"), std::string::npos) << error;
}

}  // namespace
}  // namespace lockstep
