// libFuzzer target: arbitrary bytes decoded as every wire message type. Decoding
// may reject the bytes (WireError) but must never crash, read out of bounds, hang or
// throw anything else; whatever decodes must survive a round trip unchanged
// (decode -> encode gives the same bytes, and decoding those gives an equal object).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "wire/message.h"
#include "wire/wire.h"

namespace {

[[noreturn]] void RoundTripFailed(const char* what) {
  std::fprintf(stderr, "round trip of a decoded %s changed it\n", what);
  std::abort();
}

template <typename Message, typename Parse, typename Serialize>
void DecodeAndRoundTrip(const uint8_t* data, size_t size, const char* what, Parse parse,
                        Serialize serialize) {
  Message decoded;
  try {
    decoded = parse(data, size);
  } catch (const lockstep::WireError&) {
    return;  // rejected cleanly
  }
  std::vector<uint8_t> encoded = serialize(decoded);
  // The encoding is canonical and a parse consumes every byte, so the bytes come back.
  if (encoded.size() != size || !std::equal(encoded.begin(), encoded.end(), data)) {
    RoundTripFailed(what);
  }
  if (!(parse(encoded.data(), encoded.size()) == decoded)) RoundTripFailed(what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeAndRoundTrip<lockstep::RequestList>(data, size, "request list", lockstep::ParseRequestList,
                                            lockstep::SerializeRequestList);
  DecodeAndRoundTrip<lockstep::ResponseList>(
      data, size, "response list", lockstep::ParseResponseList, lockstep::SerializeResponseList);
  return 0;
}
