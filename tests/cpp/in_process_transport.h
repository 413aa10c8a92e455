// A whole transport in one process, for unit tests of the engine loop: each "rank" is
// an Engine whose communicator is an InProcessCommunicator on a shared hub, and whose
// host collectives (allreduce, allgather, broadcast, barrier on float32/float64/
// int32/int64) are rounds of that hub. Splitting (process sets) and Adasum are left to
// the multi-rank tests under mpirun.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backends/communicator.h"
#include "in_process_exchange.h"

namespace lockstep {

class InProcessBackend : public Backend {
 public:
  InProcessBackend(InProcessHub& hub, int rank) : hub_(hub), rank_(rank) {}
  const char* name() const override { return "in-process"; }

  void Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                 ReduceOp op) override {
    const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
    Bytes mine(static_cast<const uint8_t*>(input), static_cast<const uint8_t*>(input) + bytes);
    const std::vector<Bytes> all = hub_.DataRound(rank_, std::move(mine));
    switch (dtype) {
      case DataType::kFloat32:
        return Reduce<float>(all, output, count, op);
      case DataType::kFloat64:
        return Reduce<double>(all, output, count, op);
      case DataType::kInt32:
        return Reduce<int32_t>(all, output, count, op);
      case DataType::kInt64:
        return Reduce<int64_t>(all, output, count, op);
      default:
        throw Error("in-process backend: dtype not supported");
    }
  }
  void Allgatherv(const void* input, void* output,
                  const std::vector<int64_t>& bytes_per_rank) override {
    const auto* in = static_cast<const uint8_t*>(input);
    auto all = hub_.DataRound(rank_, Bytes(in, in + bytes_per_rank.at(rank_)));
    auto* out = static_cast<uint8_t*>(output);
    for (const Bytes& part : all) out = std::copy(part.begin(), part.end(), out);
  }
  void Broadcast(void* buffer, int64_t bytes, int root_rank) override {
    auto* data = static_cast<uint8_t*>(buffer);
    auto all = hub_.DataRound(rank_, Bytes(data, data + bytes));
    std::copy(all.at(root_rank).begin(), all.at(root_rank).end(), data);
  }
  void Alltoallv(const void*, const std::vector<int64_t>&, void*,
                 const std::vector<int64_t>&) override {
    throw Error("in-process backend: alltoall not supported");
  }
  void ReduceScatter(const void*, void*, const std::vector<int64_t>&, DataType, ReduceOp) override {
    throw Error("in-process backend: reducescatter not supported");
  }
  void Barrier() override { hub_.DataRound(rank_, Bytes()); }
  void Adasum(void*, const std::vector<int64_t>&, DataType) override {
    throw Error("in-process backend: Adasum not supported");
  }

 private:
  using Bytes = InProcessHub::Bytes;
  template <typename T>
  static void Reduce(const std::vector<Bytes>& all, void* output, int64_t count, ReduceOp op) {
    std::vector<T> acc(count), theirs(count);
    std::memcpy(acc.data(), all.front().data(), count * sizeof(T));
    for (size_t r = 1; r < all.size(); ++r) {
      std::memcpy(theirs.data(), all[r].data(), count * sizeof(T));
      for (int64_t i = 0; i < count; ++i) {
        switch (op) {
          case ReduceOp::kMin:
            acc[i] = std::min(acc[i], theirs[i]);
            break;
          case ReduceOp::kMax:
            acc[i] = std::max(acc[i], theirs[i]);
            break;
          case ReduceOp::kProduct:
            acc[i] *= theirs[i];
            break;
          default:
            acc[i] += theirs[i];
            break;  // Sum (Average arrives as Sum)
        }
      }
    }
    std::memcpy(output, acc.data(), count * sizeof(T));
  }

  InProcessHub& hub_;
  int rank_;
};

class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(InProcessHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  std::unique_ptr<Communicator> Split(bool) override {
    throw Error("in-process communicator: process sets are tested under mpirun");
  }
  double MaxAcrossRanks(double value) override {
    InProcessHub::Bytes mine(sizeof(value));
    std::memcpy(mine.data(), &value, sizeof(value));
    for (const auto& theirs : hub_.DataRound(rank_, std::move(mine))) {
      double other = 0;
      std::memcpy(&other, theirs.data(), sizeof(other));
      value = std::max(value, other);
    }
    return value;
  }
  std::unique_ptr<Exchange> NewExchange(ExchangeOptions) override {
    return std::make_unique<InProcessExchange>(hub_, rank_);
  }
  std::unique_ptr<Backend> NewHostBackend(const HostBackendOptions&, CallClock&) override {
    return std::make_unique<InProcessBackend>(hub_, rank_);
  }
  std::unique_ptr<SilenceFinder> NewSilenceFinder() override { return nullptr; }
  [[noreturn]] void Abort() override { throw std::logic_error("in-process job aborted"); }

 private:
  InProcessHub& hub_;
  int rank_;
};

// The world of rank `rank` of a job on `hub`, all ranks on one pretend host.
inline World InProcessWorld(InProcessHub& hub, int rank) {
  World world;
  world.communicator = std::make_shared<InProcessCommunicator>(hub, rank);
  world.topology.rank = world.topology.local_rank = rank;
  world.topology.size = world.topology.local_size = hub.size();
  world.hostnames.assign(hub.size(), "host");
  world.threads_supported = true;
  return world;
}

}  // namespace lockstep
