#include "backends/mpi/mpi_exchange.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

#include "negotiation/peer_deadline.h"

namespace lockstep {
namespace {

// A broadcast's first block: the length, then as much of the message as fits, so a
// typical ResponseList takes one collective and only long ones a second.
constexpr size_t kBlockBytes = 1024;
constexpr size_t kBlockPayload = kBlockBytes - sizeof(uint64_t);

void CheckMpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("negotiation failed in ") + what);
}

int CountOf(size_t bytes) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    throw Error("negotiation: a message of " + std::to_string(bytes) + " bytes is too long");
  }
  return static_cast<int>(bytes);
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

MpiExchange::MpiExchange(MPI_Comm comm, ExchangeOptions options) : options_(std::move(options)) {
  // Its own communicators, so its collectives and messages never meet anyone else's.
  CheckMpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  CheckMpi(MPI_Comm_dup(comm, &probe_comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(probe_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  options_.hostnames.resize(size_, "unknown host");
  probe_ = new PeerProbe(probe_comm_);
  CheckAgreement();
}

MpiExchange::~MpiExchange() {
  if (abandoned_) return;  // MPI may still touch what the stuck collective uses
  delete probe_;
  delete buffers_;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm_free(&comm_);
  MPI_Comm_free(&probe_comm_);
}

// An allreduce whose ranks pass different lengths is undefined in MPI (it may hang),
// so the length is agreed once, here, where every rank fails alike.
void MpiExchange::CheckAgreement() {
  int64_t bounds[2] = {static_cast<int64_t>(options_.and_words),
                       -static_cast<int64_t>(options_.and_words)};
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
  if (bounds[0] != -bounds[1]) {
    throw Error(
        "negotiation: ranks were configured with different response cache capacities "
        "(LOCKSTEP_CACHE_CAPACITY / HOROVOD_CACHE_CAPACITY must be the same on every rank)",
        Status::Code::kInvalidArgument);
  }
}

void MpiExchange::AndAcrossRanks(std::vector<uint64_t>* words, bool idle) {
  if (words->size() != options_.and_words) {
    throw Error("negotiation: bit vector of " + std::to_string(words->size()) + " words where " +
                std::to_string(options_.and_words) + " were agreed");
  }
  InFlight& b = *buffers_;
  b.words = *words;
  MPI_Request request = MPI_REQUEST_NULL;
  CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, b.words.data(), CountOf(b.words.size()), MPI_UINT64_T,
                          MPI_BAND, comm_, &request),
           "MPI_Iallreduce");
  Wait(&request, idle);
  *words = b.words;
}

std::vector<Exchange::Bytes> MpiExchange::GatherAtRoot(Bytes mine) {
  InFlight& b = *buffers_;
  b.my_size = static_cast<int64_t>(mine.size());
  b.sizes.assign(rank_ == 0 ? size_ : 1, 0);
  MPI_Request request = MPI_REQUEST_NULL;
  CheckMpi(
      MPI_Igather(&b.my_size, 1, MPI_INT64_T, b.sizes.data(), 1, MPI_INT64_T, 0, comm_, &request),
      "MPI_Igather");
  Wait(&request, /*idle=*/false);

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
  CheckMpi(MPI_Igatherv(b.send.data(), CountOf(b.send.size()), MPI_BYTE, b.receive.data(),
                        counts.data(), offsets.data(), MPI_BYTE, 0, comm_, &request),
           "MPI_Igatherv");
  Wait(&request, /*idle=*/false);
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
  CheckMpi(MPI_Ibcast(b.block.data(), CountOf(kBlockBytes), MPI_BYTE, 0, comm_, &request),
           "MPI_Ibcast");
  Wait(&request, /*idle=*/false);

  uint64_t length = 0;
  std::memcpy(&length, b.block.data(), sizeof(length));
  if (length > kBlockPayload) {  // the rest, in a second broadcast
    if (rank_ == 0) {
      b.receive.assign(bytes.begin() + kBlockPayload, bytes.end());
    } else {
      b.receive.assign(length - kBlockPayload, 0);
    }
    CheckMpi(MPI_Ibcast(b.receive.data(), CountOf(b.receive.size()), MPI_BYTE, 0, comm_, &request),
             "MPI_Ibcast");
    Wait(&request, /*idle=*/false);
  }
  if (rank_ == 0) return bytes;
  Bytes out(b.block.begin() + sizeof(length),
            b.block.begin() + sizeof(length) + std::min<uint64_t>(length, kBlockPayload));
  if (length > kBlockPayload) out.insert(out.end(), b.receive.begin(), b.receive.end());
  return out;
}

bool MpiExchange::Test(MPI_Request* request) {
  int done = 0;
  CheckMpi(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

// Ranks reach each exchange at different times. Spinning in MPI would steal the core
// a training thread needs, so after a short spin the wait polls with growing sleeps
// (NextBusyPause: 5 us doubling to 100 us, then, between two ranks, an eighth of the
// time waited). While this
// rank has no work, nothing of its own rides on the cycle: it polls coarsely (up to
// cycle_time) until local work arrives. The peers are checked at most once per
// millisecond: each check is two more calls into MPI's progress engine.
void MpiExchange::Wait(MPI_Request* request, bool idle) {
  using std::chrono::microseconds;
  const auto wait = PeerWait(options_.timeout_seconds, rank_);
  auto deadline = wait == Clock::duration::max() ? Clock::time_point::max() : Clock::now() + wait;
  PeerCheckClock peers;
  if (idle) {
    auto pause = microseconds(50);
    while (!Test(request)) {
      peers.Check([&] { CheckPeers(&deadline); });
      if (options_.idle_wait(pause)) break;  // local work: from now on, latency counts
      pause = std::min(pause * 2, options_.idle_poll_cap);
    }
  }
  const auto started = Clock::now();
  const auto spin_until = started + microseconds(20);
  while (Clock::now() < spin_until) {
    if (Test(request)) return;
  }
  auto pause = kFirstBusyPause;
  while (!Test(request)) {
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

void MpiExchange::GiveUp(const std::vector<int>& missing, bool reported_by_root) {
  // The collective never completed: MPI may still use its buffers and communicators,
  // so the destructor frees none of them.
  abandoned_ = true;
  throw PeerTimeout(PeerTimeoutMessage(missing, options_.hostnames, options_.timeout_seconds, rank_,
                                       reported_by_root));
}

}  // namespace lockstep
