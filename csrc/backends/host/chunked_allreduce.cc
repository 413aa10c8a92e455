#include "backends/host/chunked_allreduce.h"

#include <algorithm>
#include <cstring>

#include "reduction/scaling.h"

namespace lockstep {

ChunkedAllreduce::ChunkedAllreduce(Backend& backend, FusionBuffer& staging, int64_t chunk_bytes,
                                   const ChunkedAllreduceHooks& hooks)
    : backend_(backend), staging_(staging), chunk_bytes_(chunk_bytes), hooks_(hooks) {}

void ChunkedAllreduce::Run(const Response& r, const std::vector<AllreduceSegment>& segments,
                           const std::string& collective_phase) {
  if (segments.size() == 1 && segments[0].input != nullptr) {
    RunDirect(r, segments[0], collective_phase.c_str());
  } else {
    RunStaged(r, segments, collective_phase.c_str());
  }
}

void ChunkedAllreduce::RunDirect(const Response& r, const AllreduceSegment& segment,
                                 const char* phase) {
  const int64_t element = DataTypeSize(r.dtype);
  const int64_t chunk = chunk_bytes_ > 0 ? chunk_bytes_ : std::max<int64_t>(segment.bytes, 1);
  const std::vector<const std::string*> names = {segment.name};
  hooks_.begin(names, phase);
  for (int64_t offset = 0; offset < segment.bytes; offset += chunk) {
    const int64_t bytes = std::min(chunk, segment.bytes - offset);
    const char* in = segment.input + offset;
    char* out = segment.output + offset;
    if (r.prescale != 1.0) {  // scale a copy in the output: the input stays untouched
      if (in != out) std::memcpy(out, in, bytes);
      ScaleInPlace(out, bytes / element, r.dtype, r.prescale);
      in = out;
    }
    backend_.Allreduce(in, out, bytes / element, r.dtype, r.reduce_op);
    hooks_.finish(out, bytes / element);
  }
  hooks_.end(names);
}

void ChunkedAllreduce::RunStaged(const Response& r, const std::vector<AllreduceSegment>& segments,
                                 const char* phase) {
  const int64_t element = DataTypeSize(r.dtype);
  int64_t total = 0;
  for (const AllreduceSegment& s : segments) total += s.bytes;
  if (total == 0) return;
  const int64_t chunk = chunk_bytes_ > 0 ? std::min(chunk_bytes_, total) : total;
  char* staging = static_cast<char*>(staging_.Get(chunk));

  size_t first = 0;         // first segment that reaches into the current chunk
  int64_t first_start = 0;  // its offset within the response
  std::vector<const std::string*> touched;
  for (int64_t start = 0; start < total; start += chunk) {
    const int64_t end = std::min(start + chunk, total);
    while (first_start + segments[first].bytes <= start) first_start += segments[first++].bytes;

    // Walk the segments overlapping [start, end), copying in (or out) their part.
    auto for_each_piece = [&](auto&& copy) {
      int64_t seg_start = first_start;
      for (size_t i = first; i < segments.size() && seg_start < end; ++i) {
        const int64_t lo = std::max(start, seg_start);
        const int64_t hi = std::min(end, seg_start + segments[i].bytes);
        if (hi > lo) copy(segments[i], lo - seg_start, staging + (lo - start), hi - lo);
        seg_start += segments[i].bytes;
      }
    };
    touched.clear();
    for_each_piece(
        [&](const AllreduceSegment& s, int64_t, char*, int64_t) { touched.push_back(s.name); });

    hooks_.begin(touched, "MEMCPY_IN_FUSION_BUFFER");
    for_each_piece([](const AllreduceSegment& s, int64_t at, char* dst, int64_t bytes) {
      if (s.input != nullptr) {
        std::memcpy(dst, s.input + at, bytes);
      } else {
        std::memset(dst, 0, bytes);
      }
    });
    hooks_.end(touched);

    const int64_t count = (end - start) / element;
    ScaleInPlace(staging, count, r.dtype, r.prescale);
    hooks_.begin(touched, phase);
    backend_.Allreduce(staging, staging, count, r.dtype, r.reduce_op);
    hooks_.end(touched);
    hooks_.finish(staging, count);

    hooks_.begin(touched, "MEMCPY_OUT_FUSION_BUFFER");
    for_each_piece([](const AllreduceSegment& s, int64_t at, char* src, int64_t bytes) {
      if (s.output != nullptr) std::memcpy(s.output + at, src, bytes);
    });
    hooks_.end(touched);
  }
}

}  // namespace lockstep
