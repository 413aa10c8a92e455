// A test double of negotiation's transport: the ranks of a "job" are threads of this
// process, and each exchange is a round that every rank joins (a generation counter
// under one mutex). A rank that does not come within the hub's patience ends the round
// with PeerTimeout on the others, as the real transport does, so a broken test fails
// instead of hanging. Multi-rank behaviour over MPI is tested under mpirun.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/host/payload_lane.h"
#include "negotiation/exchange.h"

namespace lockstep {

class InProcessHub {
 public:
  using Bytes = Exchange::Bytes;
  explicit InProcessHub(int size, std::chrono::milliseconds patience = std::chrono::seconds(10))
      : size_(size), patience_(patience), slots_(size) {}

  int size() const { return size_; }
  // Exchanges started by each kind, counted once per round (not per rank).
  int and_rounds() const { return Count(and_rounds_); }
  int gather_rounds() const { return Count(gather_rounds_); }
  int combine_rounds() const { return Count(combine_rounds_); }       // with a payload lane
  int bit_rounds() const { return and_rounds() + combine_rounds(); }  // either kind
  int data_rounds() const { return Count(data_rounds_); }
  int broadcast_rounds() const { return Count(broadcast_rounds_); }
  // A round of some other kind (data collectives of an in-process backend).
  std::vector<Bytes> DataRound(int rank, Bytes mine) {
    return Round(rank, std::move(mine), &data_rounds_);
  }

  // Every rank's bytes, by rank, once all ranks have given theirs.
  std::vector<Bytes> Round(int rank, Bytes mine, int* counter) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    slots_[rank] = std::move(mine);
    if (++arrived_ == size_) {
      result_ = std::make_shared<std::vector<Bytes>>(std::move(slots_));
      slots_.assign(size_, Bytes());
      arrived_ = 0;
      ++generation_;
      ++*counter;
      changed_.notify_all();
      return *result_;
    }
    if (!changed_.wait_for(lock, patience_, [&] { return generation_ != generation; })) {
      throw PeerTimeout("in-process exchange: a rank did not come to the round");
    }
    return *result_;
  }

 private:
  friend class InProcessExchange;
  int Count(const int& counter) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counter;
  }

  const int size_;
  const std::chrono::milliseconds patience_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Bytes> slots_;
  std::shared_ptr<std::vector<Bytes>> result_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  int and_rounds_ = 0, gather_rounds_ = 0, broadcast_rounds_ = 0, data_rounds_ = 0;
  int combine_rounds_ = 0;
};

class InProcessExchange : public Exchange {
 public:
  InProcessExchange(InProcessHub& hub, int rank) : hub_(hub), rank_(rank) {}

  void AndAcrossRanks(std::vector<uint64_t>* words, WaitMode) override {
    Bytes mine(words->size() * sizeof(uint64_t));
    std::memcpy(mine.data(), words->data(), mine.size());
    for (const Bytes& theirs : hub_.Round(rank_, std::move(mine), &hub_.and_rounds_)) {
      if (theirs.size() != words->size() * sizeof(uint64_t)) throw Error("AND of unequal lengths");
      for (size_t i = 0; i < words->size(); ++i) {
        uint64_t word = 0;
        std::memcpy(&word, theirs.data() + i * sizeof(uint64_t), sizeof(word));
        (*words)[i] &= word;
      }
    }
  }
  // Every rank folds the vectors in rank order, as one reduction would, so all get the
  // same result.
  void CombineAcrossRanks(std::vector<uint64_t>* words, WaitMode) override {
    Bytes mine(words->size() * sizeof(uint64_t));
    std::memcpy(mine.data(), words->data(), mine.size());
    const std::vector<Bytes> all = hub_.Round(rank_, std::move(mine), &hub_.combine_rounds_);
    std::vector<uint64_t> acc(words->size()), theirs(words->size());
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].size() != words->size() * sizeof(uint64_t)) {
        throw Error("combine of unequal lengths");
      }
      std::memcpy(r == 0 ? acc.data() : theirs.data(), all[r].data(), all[r].size());
      if (r > 0) CombineLaneVectors(theirs.data(), acc.data(), acc.size());
    }
    *words = std::move(acc);
  }
  std::vector<Bytes> GatherAtRoot(Bytes mine) override {
    std::vector<Bytes> all = hub_.Round(rank_, std::move(mine), &hub_.gather_rounds_);
    return rank_ == 0 ? all : std::vector<Bytes>();
  }
  Bytes BroadcastFromRoot(Bytes bytes) override {
    return hub_.Round(rank_, std::move(bytes), &hub_.broadcast_rounds_).front();
  }

 private:
  InProcessHub& hub_;
  int rank_;
};

}  // namespace lockstep
