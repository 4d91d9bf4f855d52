// Hook for observing completed operations (the communication log builds on it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mcr/comm/types.hpp"

namespace mcr {

/// One completed operation as seen by the calling rank.
struct OpRecord {
  std::uint64_t sequence = 0;  ///< per-communicator sequence number (equal on every rank)
  OpType op = OpType::barrier;
  bool async = false;
  std::string_view backend;  ///< static storage; valid for the life of the process
  DType dtype = DType::f32;
  std::size_t count = 0;       ///< elements as passed (per-rank message for all_gather, etc.)
  std::size_t bytes = 0;       ///< the nccl-tests "size" of this op: see docs/design.md
  std::uint64_t group_id = 0;  ///< equal on every member of a communicator
  int group_rank = 0;
  int group_size = 1;
  int global_rank = 0;
  /// When the call was issued and when completion was observed: read from the CPU counter where
  /// the kernel trusts it and mapped to the steady clock (docs/bench.md), so end - start is exact
  /// and both stay within 2 us of what steady_clock::now() would have read.
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point end;
};

/// Receives every completed operation of the communicators it is attached to. Called on the thread
/// that observed completion; must not call back into the communicator.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_complete(const OpRecord& record) noexcept = 0;
};

}  // namespace mcr
