// One operation of a multi-rank test: its parameters, its buffers filled with reference patterns,
// how to issue it through the public API and how to check every output afterwards.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "elements.hpp"
#include "mcr/comm.hpp"

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
  int salt = 0;         ///< varies values (and the p2p tag) between cases
};

/// Whether `op` has an in-place form (communicator.hpp documents each one's convention).
bool has_in_place_form(OpType op);
/// Whether `op` has an out-of-place form (broadcast and barrier have only one form).
bool has_out_of_place_form(OpType op);
/// The ops a test matrix covers: every OpType, with send standing for the send/recv pair.
std::vector<OpType> tested_ops();

/// Per-rank contribution of all_gather_v: uneven, and zero for every rank r with r % 3 == 1.
std::size_t gather_v_count(std::size_t base, int rank);
/// Elements rank `src` sends to rank `dst` in all_to_all_v. The symmetric variant (needed in place,
/// where send_counts == recv_counts) satisfies count(s, d) == count(d, s). Both include zeros.
std::size_t all_to_all_v_count(std::size_t base, int src, int dst, bool symmetric);

/// "all_reduce f32 sum count=7 in-place async backend=mpi" (root/shift where it applies).
std::string describe(const OpCase& c);

/// An operation with its buffers on this rank. Issue it once, then (after every returned handle has
/// completed) verify.
class PreparedOp {
 public:
  PreparedOp(const Communicator& comm, const OpCase& c);

  const OpCase& spec() const noexcept { return case_; }
  /// Issues the operation. A synchronous case has completed when this returns (no handles); an
  /// asynchronous one returns its handles (two for a send/recv exchange: the receive first).
  std::vector<Work> issue(Communicator& comm, std::chrono::milliseconds timeout = {});
  /// Empty when every output on this rank matches the locally computed reference, and every input
  /// of an out-of-place form is unchanged; otherwise what differs.
  std::string verify() const;

 private:
  enum class Target { input, output };
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
  const Buffer& buffer(Target t) const { return t == Target::input ? input_ : output_; }

  OpCase case_;
  int rank_ = 0;
  int size_ = 1;
  Buffer input_;
  Buffer output_;
  std::vector<std::size_t> counts_a_;  // all_gather_v counts / all_to_all_v send counts
  std::vector<std::size_t> counts_b_;  // all_to_all_v receive counts
  std::vector<Check> checks_;
};

}  // namespace mcr::test
