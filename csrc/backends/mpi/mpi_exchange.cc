#include "backends/mpi/mpi_exchange.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backends/mpi/process_failures.h"
#include "negotiation/peer_deadline.h"

namespace lockstep {
namespace {

// A broadcast's first block: the length, then as much of the message as fits, so a
// typical ResponseList takes one collective and only long ones a second.
constexpr size_t kBlockBytes = 1024;
constexpr size_t kBlockPayload = kBlockBytes - sizeof(uint64_t);

int CountOf(size_t bytes) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    throw Error("negotiation: a message of " + std::to_string(bytes) + " bytes is too long");
  }
  return static_cast<int>(bytes);
}

// MPI hands a user op no context but its datatype, so each exchange's combining
// function (ExchangeOptions::combine) travels as an attribute of its vector datatype:
// the function pointer itself, never a pointer into the exchange, because an abandoned
// collective (a peer stopped answering) may still run the op after the exchange is
// gone.
int CombineKeyval() {
  static const int keyval = [] {
    int created = MPI_KEYVAL_INVALID;
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &created, nullptr);
    return created;
  }();
  return keyval;
}

// The cycle vector's reduction. Only the vector's length comes from the datatype (the
// vector describes its own layout). Each call gets whole vectors (the datatype is one
// vector), `*len` of them.
void CombineVectors(void* in, void* inout, int* len, MPI_Datatype* datatype) {
  int bytes = 0;
  MPI_Type_size(*datatype, &bytes);
  void* attribute = nullptr;
  int found = 0;
  MPI_Type_get_attr(*datatype, CombineKeyval(), &attribute, &found);
  if (!found) std::abort();  // every exchange sets it on the datatype it reduces with
  VectorCombine combine = nullptr;
  static_assert(sizeof(combine) == sizeof(attribute), "a function pointer fits an attribute");
  std::memcpy(&combine, &attribute, sizeof(combine));
  const size_t words = static_cast<size_t>(bytes) / sizeof(uint64_t);
  const bool aligned = reinterpret_cast<uintptr_t>(in) % alignof(uint64_t) == 0 &&
                       reinterpret_cast<uintptr_t>(inout) % alignof(uint64_t) == 0;
  for (int i = 0; i < *len; ++i) {
    char* a = static_cast<char*>(in) + i * words * sizeof(uint64_t);
    char* b = static_cast<char*>(inout) + i * words * sizeof(uint64_t);
    if (aligned) {
      combine(reinterpret_cast<const uint64_t*>(a), reinterpret_cast<uint64_t*>(b), words);
      continue;
    }
    // MPI's own staging buffers are malloc'd, so this is never expected; but cheap.
    std::vector<uint64_t> theirs(words), mine(words);
    std::memcpy(theirs.data(), a, words * sizeof(uint64_t));
    std::memcpy(mine.data(), b, words * sizeof(uint64_t));
    combine(theirs.data(), mine.data(), words);
    std::memcpy(b, mine.data(), words * sizeof(uint64_t));
  }
}

// How often a waiting rank looks for rank 0's verdict (and the deadline): the peer
// timeout is counted in seconds.
constexpr auto kPeerCheckPeriod = std::chrono::milliseconds(1);

class PeerCheckClock {
 public:
  template <typename Fn>
  void Check(Fn check) {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) return;
    next_ = now + kPeerCheckPeriod;
    check();
  }

 private:
  std::chrono::steady_clock::time_point next_{};
};

}  // namespace

MpiExchange::MpiExchange(MPI_Comm comm, ExchangeOptions options, std::shared_ptr<PeerProbe> probe)
    : options_(std::move(options)), probe_(std::move(probe)) {
  if (options_.combine_words > 0 && options_.combine == nullptr) {
    throw Error("internal error: a cycle vector without its combining function");
  }
  // Its own communicator, so its collectives never meet anyone else's.
  Check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  options_.hostnames.resize(size_, "unknown host");
  CheckAgreement();
  if (options_.combine_words > 0) {
    Check(MPI_Type_contiguous(CountOf(options_.combine_words * sizeof(uint64_t)), MPI_BYTE,
                              &vector_type_),
          "MPI_Type_contiguous");
    Check(MPI_Type_commit(&vector_type_), "MPI_Type_commit");
    void* attribute = nullptr;
    std::memcpy(&attribute, &options_.combine, sizeof(attribute));
    Check(MPI_Type_set_attr(vector_type_, CombineKeyval(), attribute), "MPI_Type_set_attr");
    Check(MPI_Op_create(&CombineVectors, /*commute=*/1, &combine_op_), "MPI_Op_create");
  }
}

MpiExchange::~MpiExchange() {
  if (abandoned_) return;  // MPI may still touch what the stuck collective uses
  delete buffers_;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (combine_op_ != MPI_OP_NULL) MPI_Op_free(&combine_op_);
  if (vector_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&vector_type_);
  MPI_Comm_free(&comm_);
}

// An allreduce whose ranks pass different lengths is undefined in MPI (it may hang),
// so the length is agreed once, here, where every rank fails alike.
void MpiExchange::CheckAgreement() {
  const auto and_words = static_cast<int64_t>(options_.and_words);
  const auto combine_words = static_cast<int64_t>(options_.combine_words);
  int64_t bounds[4] = {and_words, -and_words, combine_words, -combine_words};
  Check(MPI_Allreduce(MPI_IN_PLACE, bounds, 4, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
  if (bounds[0] != -bounds[1]) {
    throw Error(
        "negotiation: ranks were configured with different response cache capacities "
        "(LOCKSTEP_CACHE_CAPACITY / HOROVOD_CACHE_CAPACITY must be the same on every rank)",
        Status::Code::kInvalidArgument);
  }
  if (bounds[2] != -bounds[3]) {
    throw Error(
        "negotiation: ranks were configured with different negotiation payloads "
        "(LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES must be the same on every rank)",
        Status::Code::kInvalidArgument);
  }
}

void MpiExchange::AndAcrossRanks(std::vector<uint64_t>* words, WaitMode mode) {
  if (words->size() != options_.and_words) {
    throw Error("negotiation: bit vector of " + std::to_string(words->size()) + " words where " +
                std::to_string(options_.and_words) + " were agreed");
  }
  if (size_ == 1) return;  // combined with nothing, it is the result
  InFlight& b = *buffers_;
  b.words = *words;
  if (size_ == 2) {  // the pairwise swap, for the reason given at CombineAcrossRanks
    SwapWithPeer(MPI_UINT64_T, CountOf(b.words.size()), mode);
    for (size_t i = 0; i < words->size(); ++i) (*words)[i] = b.words[i] & b.peer_words[i];
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  Check(MPI_Iallreduce(MPI_IN_PLACE, b.words.data(), CountOf(b.words.size()), MPI_UINT64_T,
                       MPI_BAND, comm_, &request),
        "MPI_Iallreduce");
  Wait(&request, mode);
  *words = b.words;
}

// At 2 ranks: sends buffers_->words to the other rank and receives its words into
// buffers_->peer_words (`count` elements of `type` each way).
void MpiExchange::SwapWithPeer(MPI_Datatype type, int count, WaitMode mode) {
  constexpr int kSwapTag = 1;
  InFlight& b = *buffers_;
  b.peer_words.resize(b.words.size());
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  Check(MPI_Irecv(b.peer_words.data(), count, type, 1 - rank_, kSwapTag, comm_, &requests[0]),
        "MPI_Irecv");
  Check(MPI_Isend(b.words.data(), count, type, 1 - rank_, kSwapTag, comm_, &requests[1]),
        "MPI_Isend");
  Wait(requests, mode, 2);
}

// At 2 ranks the vectors are swapped pairwise and each rank combines them itself, in
// rank order (rank 0's as `in`), so both get the same bits (AndAcrossRanks does the
// same). MPI's non-blocking
// allreduce runs a binomial tree there: rank 1 completes only once rank 0 has polled
// again after rank 1's vector arrived, so whenever rank 0 sleeps between polls rank 1
// finishes late, starts its next op late, and the two drift out of phase (the data
// collective this replaces, a blocking allreduce, brought them back in step every
// op). With the swap each rank completes as soon as the other has sent.
void MpiExchange::CombineAcrossRanks(std::vector<uint64_t>* words, WaitMode mode) {
  if (combine_op_ == MPI_OP_NULL || words->size() != options_.combine_words) {
    throw Error("negotiation: cycle vector of " + std::to_string(words->size()) + " words where " +
                std::to_string(options_.combine_words) + " were agreed");
  }
  if (size_ == 1) return;  // combined with nothing, it is the result
  InFlight& b = *buffers_;
  b.words = *words;
  if (size_ != 2) {
    MPI_Request request = MPI_REQUEST_NULL;
    Check(
        MPI_Iallreduce(MPI_IN_PLACE, b.words.data(), 1, vector_type_, combine_op_, comm_, &request),
        "MPI_Iallreduce");
    Wait(&request, mode);
    *words = b.words;
    return;
  }
  SwapWithPeer(vector_type_, 1, mode);
  if (rank_ == 0) {
    options_.combine(b.words.data(), b.peer_words.data(), b.words.size());
    *words = b.peer_words;
  } else {
    options_.combine(b.peer_words.data(), b.words.data(), b.words.size());
    *words = b.words;
  }
}

std::vector<Exchange::Bytes> MpiExchange::GatherAtRoot(Bytes mine) {
  InFlight& b = *buffers_;
  b.my_size = static_cast<int64_t>(mine.size());
  b.sizes.assign(rank_ == 0 ? size_ : 1, 0);
  MPI_Request request = MPI_REQUEST_NULL;
  Check(MPI_Igather(&b.my_size, 1, MPI_INT64_T, b.sizes.data(), 1, MPI_INT64_T, 0, comm_, &request),
        "MPI_Igather");
  Wait(&request, WaitMode::kPending);

  b.send = std::move(mine);
  std::vector<int> counts, offsets;
  if (rank_ == 0) {
    size_t total = 0;
    for (int64_t size : b.sizes) {
      counts.push_back(CountOf(static_cast<size_t>(size)));
      offsets.push_back(CountOf(total));
      total += static_cast<size_t>(size);
    }
    b.receive.assign(total, 0);
  }
  Check(MPI_Igatherv(b.send.data(), CountOf(b.send.size()), MPI_BYTE, b.receive.data(),
                     counts.data(), offsets.data(), MPI_BYTE, 0, comm_, &request),
        "MPI_Igatherv");
  Wait(&request, WaitMode::kPending);
  std::vector<Bytes> all;
  if (rank_ != 0) return all;
  for (int r = 0; r < size_; ++r) {
    const auto begin = b.receive.begin() + offsets[r];
    all.emplace_back(begin, begin + counts[r]);
  }
  return all;
}

Exchange::Bytes MpiExchange::BroadcastFromRoot(Bytes bytes) {
  InFlight& b = *buffers_;
  b.block.assign(kBlockBytes, 0);
  if (rank_ == 0) {
    const uint64_t length = bytes.size();
    std::memcpy(b.block.data(), &length, sizeof(length));
    std::memcpy(b.block.data() + sizeof(length), bytes.data(),
                std::min(bytes.size(), kBlockPayload));
  }
  MPI_Request request = MPI_REQUEST_NULL;
  Check(MPI_Ibcast(b.block.data(), CountOf(kBlockBytes), MPI_BYTE, 0, comm_, &request),
        "MPI_Ibcast");
  Wait(&request, WaitMode::kPending);

  uint64_t length = 0;
  std::memcpy(&length, b.block.data(), sizeof(length));
  if (length > kBlockPayload) {  // the rest, in a second broadcast
    if (rank_ == 0) {
      b.receive.assign(bytes.begin() + kBlockPayload, bytes.end());
    } else {
      b.receive.assign(length - kBlockPayload, 0);
    }
    Check(MPI_Ibcast(b.receive.data(), CountOf(b.receive.size()), MPI_BYTE, 0, comm_, &request),
          "MPI_Ibcast");
    Wait(&request, WaitMode::kPending);
  }
  if (rank_ == 0) return bytes;
  Bytes out(b.block.begin() + sizeof(length),
            b.block.begin() + sizeof(length) + std::min<uint64_t>(length, kBlockPayload));
  if (length > kBlockPayload) out.insert(out.end(), b.receive.begin(), b.receive.end());
  return out;
}

bool MpiExchange::Test(MPI_Request* requests, int count) {
  int done = 0;
  MPI_Status statuses[2];
  for (MPI_Status& status : statuses) status.MPI_ERROR = MPI_SUCCESS;  // some are left unset
  int rc = MPI_Testall(count, requests, &done, count <= 2 ? statuses : MPI_STATUSES_IGNORE);
  if (rc == MPI_ERR_IN_STATUS && count <= 2) {  // the request's own error says why
    for (int i = 0; i < count; ++i) {
      const int error = statuses[i].MPI_ERROR;
      if (error != MPI_SUCCESS && error != MPI_ERR_PENDING) rc = error;
    }
  }
  Check(rc, "MPI_Testall");
  return done != 0;
}

// Ranks reach each exchange at different times. Spinning in MPI would steal the core
// a training thread needs, so after a short spin the background thread polls with
// growing sleeps (NextBusyPause: 5 us doubling to 100 us, then, between two ranks, an
// eighth of the time waited). While this rank has no work, nothing of its own rides
// on the cycle: it polls coarsely (up to cycle_time) until local work arrives. A
// caller blocked on its own op has nothing else to run, so it polls as MPI's blocking
// collectives do (for up to 5 ms; a peer that late is busy elsewhere, and polling on
// would only burn the core): sleeping there made whichever rank arrived first wake up
// to 100 us after the other, and the two took turns being late by that much. The
// peers are checked at most once per millisecond: each check is two more calls into
// MPI's progress engine.
void MpiExchange::Wait(MPI_Request* request, WaitMode mode, int count) {
  using std::chrono::microseconds;
  const auto wait = PeerWait(options_.timeout_seconds, rank_);
  auto deadline = wait == Clock::duration::max() ? Clock::time_point::max() : Clock::now() + wait;
  PeerCheckClock peers;
  if (mode == WaitMode::kIdle) {
    auto pause = microseconds(50);
    while (!Test(request, count)) {
      peers.Check([&] { CheckPeers(&deadline); });
      if (options_.idle_wait(pause)) break;  // local work: from now on, latency counts
      pause = std::min(pause * 2, options_.idle_poll_cap);
    }
  }
  const auto started = Clock::now();
  const auto spin_until = started + microseconds(mode == WaitMode::kCaller ? 5000 : 20);
  while (Clock::now() < spin_until) {
    if (Test(request, count)) return;
    if (mode != WaitMode::kCaller) continue;
    // A peer sharing this core gets to run. Where each rank has a core, the yield only
    // costs a system call per poll: 2-3 us more per 4-byte op at 2 ranks on 2 cores.
    if (options_.cores_shared) std::this_thread::yield();
    peers.Check([&] { CheckPeers(&deadline); });
  }
  auto pause = kFirstBusyPause;
  while (!Test(request, count)) {
    peers.Check([&] { CheckPeers(&deadline); });
    std::this_thread::sleep_for(pause);
    pause = NextBusyPause(pause, Clock::now() - started, size_);  // peer_deadline.h
  }
}

void MpiExchange::CheckPeers(Clock::time_point* deadline) {
  if (rank_ != 0) {
    std::vector<int> silent;
    switch (probe_->Poll(&silent)) {
      case PeerProbe::Notice::kVerdict:
        GiveUp(silent, /*reported_by_root=*/true);
      case PeerProbe::Notice::kKeepWaiting:  // every rank answered rank 0: merely slow
        *deadline = Clock::now() + PeerWait(options_.timeout_seconds, rank_);
        break;
      case PeerProbe::Notice::kAsked: {  // rank 0 is there and judging: wait for its verdict
        const auto verdict_due =
            Clock::now() +
            std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(PeerGraceSeconds(options_.timeout_seconds)));
        *deadline = std::max(*deadline, verdict_due);
        break;
      }
      case PeerProbe::Notice::kNone:
        break;
    }
  }
  if (Clock::now() < *deadline) return;
  if (rank_ != 0) GiveUp({0}, /*reported_by_root=*/false);  // rank 0's verdict never came
  const double grace = PeerGraceSeconds(options_.timeout_seconds);
  std::vector<int> silent = probe_->FindSilent(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace / 2)));
  probe_->SendVerdict(silent);
  if (silent.empty()) {
    *deadline = Clock::now() + PeerWait(options_.timeout_seconds, rank_);
    return;
  }
  GiveUp(silent, /*reported_by_root=*/false);
}

void MpiExchange::Check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  const std::string lost = DescribeLostProcesses(rc, comm_, options_.hostnames);
  if (lost.empty())
    throw Error(std::string("negotiation failed in ") + what + ": " + ErrorText(rc));
  abandoned_ = true;  // ULFM: the revoked communicator's collectives never complete
  throw PeerTimeout(lost);
}

void MpiExchange::GiveUp(const std::vector<int>& missing, bool reported_by_root) {
  // The collective never completed: MPI may still use its buffers and communicators,
  // so the destructor frees none of them.
  abandoned_ = true;
  throw PeerTimeout(PeerTimeoutMessage(missing, options_.hostnames, options_.timeout_seconds, rank_,
                                       reported_by_root));
}

}  // namespace lockstep
