// What can be benchmarked and one benchmark point: the ops, size sweeps, buffer layouts, the
// verifiable data pattern, and the buffers of one (op, dtype, size, place) with their timed loop
// and their check. See docs/bench.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "mcr/comm/communicator.hpp"
#include "mcr/comm/device_buffer.hpp"
#include "mcr/comm/types.hpp"
#include "mcr/comm/work.hpp"

namespace mcr::bench {

// ---- what can be benchmarked -------------------------------------------------------------------

/// Every operation the benchmark runs. `send` stands for a matched send/recv pair: each rank sends
/// to rank+1 and receives from rank-1 (the nccl-tests sendrecv pattern).
std::vector<OpType> benchmark_ops();
/// An op name as in the API; "recv" and "send_recv" mean `send`. Throws InvalidArgument naming
/// `argument` and the value.
OpType parse_bench_op(std::string_view name, std::string_view argument = "--op");
/// Whether the op has a root rank (broadcast, reduce, gather, scatter).
bool has_root(OpType op) noexcept;
/// Whether an in-place form exists apart from the out-of-place one (every op except send/recv,
/// barrier and broadcast, whose one form uses one buffer).
bool has_in_place(OpType op) noexcept;
/// Whether to leave out `op` on `ranks` ranks: send/recv needs a peer, so it is not run on 1 rank
/// (a self-exchange is not a message, and NCCL rejects a self-receive posted on its own).
bool skip_single_rank_p2p(int ranks, OpType op) noexcept;

/// begin, begin*factor, ... up to end (inclusive); a begin of 0 is followed by 1. Throws
/// InvalidArgument on begin > end or factor <= 1.
std::vector<std::size_t> geometric_sizes(std::size_t begin, std::size_t end, double factor);

// ---- one benchmark point -----------------------------------------------------------------------

/// Buffer layout for a nominal byte count: element counts per rank and the op's actual byte count
/// (the nominal size rounded so every rank holds a whole number of elements, at least one).
struct Layout {
  std::size_t in_count = 0;   ///< elements in the input buffer of this rank
  std::size_t out_count = 0;  ///< elements in the output buffer of this rank
  std::size_t chunk = 0;      ///< per-rank slot for chunked ops, else the message count
  std::size_t bytes = 0;      ///< the op's byte count S (equal on every rank)
};
Layout layout_for(OpType op, std::size_t nominal_bytes, DType dtype, int ranks);
/// The nominal sizes whose actual byte counts differ (the first of each), so that rounding (e.g.
/// 4 B and 8 B all_gather of f32 on 2 ranks are both 8 B) does not measure a point twice.
std::vector<std::size_t> distinct_sizes(OpType op, const std::vector<std::size_t>& nominal,
                                        DType dtype, int ranks);

/// How many ranks' inputs one output element of `op` adds up, for pattern_value(): `ranks` for a
/// sum (all_reduce, reduce, reduce_scatter), else 1. Only a sum grows past its inputs; data
/// movement and min/max keep the full range of values at any number of ranks, so a block moved
/// to the wrong place is still seen.
int summed_ranks(OpType op, ReduceOp reduce, int ranks) noexcept;

/// The value at element `index` of rank `rank`'s input where `ranks` such values are summed
/// (summed_ranks()): a small integer in [-6, 6] (u8: [0, 12]), so that sums over up to 21 ranks
/// are exact in every dtype, f16/bf16/i8 included; over more ranks a narrower range that keeps the
/// sum exact in `dtype` (i8 and u8 beyond 127 ranks: zeros, which still tell written outputs from
/// unwritten ones).
double pattern_value(std::uint64_t seed, int rank, std::size_t index, DType dtype,
                     int ranks = 1) noexcept;

struct PointConfig {
  OpType op = OpType::all_reduce;
  DType dtype = DType::f32;
  std::size_t nominal_bytes = 4;
  bool in_place = false;
  int root = 0;
  ReduceOp reduce = ReduceOp::sum;
  bool async = false;
  std::uint64_t seed = 1;
  Device device =
      Device::cpu();  ///< cuda: buffers in device memory (filled and checked on the host)
};

/// "cpu", or "cuda": this rank's GPU (local rank modulo the devices visible). Throws
/// InvalidArgument naming options.device when the build has no CUDA or no device is present.
Device bench_device(std::string_view kind);

/// Buffers of one (op, dtype, size, place) on this rank, allocated once and reused across backends
/// and iterations. Every method is collective over the communicator except `layout()`.
class Point {
 public:
  /// Throws InvalidArgument for a root out of range, a reduce op invalid for the dtype, or an op
  /// without an in-place form when in_place is set.
  Point(Communicator comm, const PointConfig& config);
  ~Point() = default;
  Point(const Point&) = delete;
  Point& operator=(const Point&) = delete;

  const Layout& layout() const noexcept { return layout_; }
  const PointConfig& config() const noexcept { return config_; }
  Communicator comm() const { return comm_; }

  /// Runs the op `iterations` times on `backend` ("" = automatic selection) and returns this rank's
  /// seconds per iteration. Async form: issues `in_flight` iterations (0: all of them), then waits
  /// for their handles, and so on, inside the timed region. Throws UnsupportedError (identically
  /// on every rank) if the backend cannot.
  double time(std::string_view backend, int iterations, int in_flight = 0);
  /// Resets the inputs, runs the op once on `backend`, and returns this rank's wrong elements.
  std::size_t verify(std::string_view backend);

  // Building blocks for running many points in one sequence (the trace replay, replay.hpp):
  /// Writes the input pattern and the output sentinel again (untimed; before a checked run).
  void reset();
  /// Issues the op once on `backend` ("" = automatic selection). The async form appends its
  /// handles to `pending` for the caller to wait; the sync form has completed on return.
  void issue(std::string_view backend, std::vector<Work>& pending);
  /// This rank's wrong elements in the result of the last completed run (after reset()).
  std::size_t wrong();

 private:
  void fill();
  void run_once(const CallOptions& opts, std::vector<Work>& pending);
  std::size_t count_wrong() const;

  Communicator comm_;
  PointConfig config_;
  Layout layout_;
  void to_device();
  void from_device();
  void device_sync() const;

  std::vector<std::byte> in_;  ///< host data (the device copy's staging area when on a GPU)
  std::vector<std::byte> out_;
  DeviceBuffer device_in_;  ///< device buffers when config.device is cuda
  DeviceBuffer device_out_;
  std::vector<std::size_t> counts_;  ///< per-rank counts for the _v forms (all equal)
  std::vector<Work> pending_;
};

}  // namespace mcr::bench
