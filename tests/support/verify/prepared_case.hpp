// One operation of a conformance case on one rank: its buffers filled with reference patterns, the
// tensors it is called with (in every in-place and out-of-place layout of communicator.hpp), and
// the expected content of every buffer afterwards. Nothing here calls the runtime: drivers
// (api_driver.hpp for the public API, backend_args.hpp for a backend driven directly) issue the
// operation, possibly on device copies of the buffers (device_mirror.hpp), then call verify().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "elements.hpp"
#include "values.hpp"

namespace mcr::test {

struct OpCase {
  OpType op = OpType::barrier;  ///< OpType::send stands for a send/recv exchange (see root)
  DType dtype = DType::f32;
  ReduceOp reduce = ReduceOp::sum;
  std::size_t count = 0;  ///< the base element count; v-ops derive per-rank counts from it
  bool in_place = false;
  bool async = false;
  /// Rooted collectives: the root. Send/recv: every rank sends to rank + root and receives from
  /// rank - root (mod size); a synchronous exchange needs 0 < root < size.
  int root = 0;
  std::string backend;  ///< forced through CallOptions::backend; empty: the runtime's selection
  int salt = 0;         ///< varies values between cases
  /// Send/recv tag. The conformance cases use 0, which every backend matches (NCCL has no tags);
  /// tag matching has tests of its own, and the mixing test varies tags.
  int tag = 0;
};

/// Whether `op` has an in-place form (communicator.hpp documents each one's convention).
bool has_in_place_form(OpType op);
/// Whether `op` has an out-of-place form (broadcast and barrier have only one form).
bool has_out_of_place_form(OpType op);
/// The ops a test matrix covers: every OpType, with send standing for the send/recv pair.
std::vector<OpType> tested_ops();

/// "all_reduce fp32 sum count=7 in-place async backend=mpi" (root/shift where it applies).
std::string describe(const OpCase& c);
/// "all_reduce fp32 sum": the combination a backend supports or not.
std::string combination(const OpCase& c);

/// Which of a case's two buffers a tensor lies in.
enum class Target : std::uint8_t { none, input, output };

/// Elements [offset, offset + count) of one buffer; Target::none is the null tensor that
/// non-roots pass where the API allows it.
struct Region {
  Target target = Target::none;
  std::size_t offset = 0;
  std::size_t count = 0;
};

/// The tensors the operation is called with on this rank. For send/recv, `in` is the send buffer
/// and `out` the receive buffer.
struct Operands {
  Region in;
  Region out;
  /// The one-tensor overload (broadcast; reduce and all_reduce in place): `in` and `out` coincide.
  bool single_tensor = false;
  /// What the communicator derives from the aliasing (and passes to backends as OpArgs::in_place).
  bool in_place = false;
  std::span<const std::size_t> counts_a;  ///< all_gather_v counts / all_to_all_v send counts
  std::span<const std::size_t> counts_b;  ///< all_to_all_v receive counts
};

/// Where a case's buffers live while the operation runs: the case's own host buffers, or device
/// copies of them (device_mirror.hpp). Regions resolve against these base addresses.
struct Placement {
  void* input = nullptr;
  void* output = nullptr;
  Device device = Device::cpu();
};

class PreparedCase {
 public:
  PreparedCase(const OpCase& c, int rank, int size);
  PreparedCase(const PreparedCase&) = delete;  // Operands point into the counts vectors
  PreparedCase& operator=(const PreparedCase&) = delete;

  const OpCase& spec() const noexcept { return case_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  Buffer& buffer(Target t) { return t == Target::input ? input_ : output_; }
  const Buffer& buffer(Target t) const { return t == Target::input ? input_ : output_; }

  Operands operands() const;
  /// The case's own host buffers.
  Placement host() { return {input_.data(), output_.data(), Device::cpu()}; }
  /// Address of `r` under `p`; null for Target::none.
  void* address(const Placement& p, const Region& r) const;
  /// Send/recv exchange: the rank this one sends to and the one it receives from.
  int p2p_destination() const { return (rank_ + case_.root) % size_; }
  int p2p_source() const { return ((rank_ - case_.root) % size_ + size_) % size_; }

  /// Empty when every output on this rank matches the reference, every input of an out-of-place
  /// form is unchanged and no guard was overwritten; otherwise what differs, by buffer region.
  std::string verify() const;

 private:
  struct Check {
    Target target;
    std::size_t offset;
    Buffer expected;                   // exact comparison...
    std::vector<double> expected_avg;  // ...or, for avg, within a few ulps
    std::string what;
  };

  void prepare_p2p();
  void prepare_broadcast();
  void prepare_reduction();
  void prepare_gather_like();
  void prepare_scatter();
  void prepare_all_to_all();
  void prepare_all_to_all_v();

  /// Records that `target` elements [offset, offset + n) must equal value(i).
  template <class F>
  void expect(Target target, std::size_t offset, std::size_t n, const std::string& what, F&& value);
  /// Records that `target` must still hold exactly what it holds now.
  void expect_unchanged(Target target, const std::string& what);
  void fill_sentinel(Buffer& b);
  std::int64_t data(int rank, std::size_t index) const {
    return data_value(case_.dtype, rank, index, case_.salt);
  }
  std::int64_t operand(int rank, std::size_t index) const {
    return reduce_operand(case_.reduce, case_.dtype, rank, index, size_, case_.salt);
  }

  OpCase case_;
  int rank_ = 0;
  int size_ = 1;
  Buffer input_;
  Buffer output_;
  std::vector<std::size_t> counts_a_;
  std::vector<std::size_t> counts_b_;
  std::vector<Check> checks_;
};

}  // namespace mcr::test
