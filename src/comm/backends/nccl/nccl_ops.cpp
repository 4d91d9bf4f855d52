#include "backends/nccl/nccl_ops.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail::nccl {

SplitArgs split_args(std::span<const int> members, int parent_rank, int parent_size) {
  std::vector<bool> seen(static_cast<std::size_t>(parent_size), false);
  for (int m : members) {
    if (m < 0 || m >= parent_size) {
      throw InvalidArgument(fmt::format(
          "NCCL split: member rank {} is outside the parent group [0, {})", m, parent_size));
    }
    if (seen[static_cast<std::size_t>(m)]) {
      throw InvalidArgument(fmt::format("NCCL split: member rank {} is listed twice", m));
    }
    seen[static_cast<std::size_t>(m)] = true;
  }
  if (auto index = group_rank(members, parent_rank)) return {members.front(), *index};
  return {-1, 0};
}

std::optional<int> group_rank(std::span<const int> members, int parent_rank) noexcept {
  auto it = std::find(members.begin(), members.end(), parent_rank);
  if (it == members.end()) return std::nullopt;
  return static_cast<int>(it - members.begin());
}

std::vector<std::size_t> displacements(const std::size_t* counts, int size) {
  std::vector<std::size_t> displ(static_cast<std::size_t>(size), 0);
  std::size_t running = 0;
  for (int r = 0; r < size; ++r) {
    displ[static_cast<std::size_t>(r)] = running;
    running += counts[r];
  }
  return displ;
}

namespace {

/// Builds a plan; keeps the bookkeeping of element sizes and empty transfers in one place.
class PlanBuilder {
 public:
  explicit PlanBuilder(std::size_t element_size) : esize_(element_size) {
    plan_.steps.push_back({StepKind::order_after_caller});
  }

  BufferRef at(Buffer b, std::size_t elements) const { return {b, elements * esize_}; }

  void copy(BufferRef src, BufferRef dst, std::size_t elements) {
    if (elements == 0 || src == dst) return;
    plan_.steps.push_back({StepKind::copy, src, dst, elements * esize_});
  }
  void send(BufferRef src, std::size_t elements, int peer) {
    if (elements != 0) plan_.steps.push_back({StepKind::send, src, {}, elements, peer});
  }
  void recv(BufferRef dst, std::size_t elements, int peer) {
    if (elements != 0) plan_.steps.push_back({StepKind::recv, {}, dst, elements, peer});
  }
  void collective(BufferRef src, BufferRef dst, std::size_t elements, int root = -1) {
    plan_.steps.push_back({StepKind::collective, src, dst, elements, root});
  }
  void group_start() { plan_.steps.push_back({StepKind::group_start}); }
  void group_end() { plan_.steps.push_back({StepKind::group_end}); }

  /// In-place all_to_all(v) reads and writes the same buffer from every peer at once; NCCL gives no
  /// order among the transfers of a group, so the outgoing data is first copied aside.
  BufferRef stash_output(std::size_t elements) {
    plan_.scratch_bytes = elements * esize_;
    if (elements == 0) return {Buffer::output, 0};
    plan_.steps.push_back({StepKind::alloc_scratch});
    copy({Buffer::output, 0}, {Buffer::scratch, 0}, elements);
    return {Buffer::scratch, 0};
  }

  Plan finish() {
    if (plan_.scratch_bytes != 0) plan_.steps.push_back({StepKind::free_scratch});
    plan_.steps.push_back({StepKind::record_completion});
    return std::move(plan_);
  }

 private:
  std::size_t esize_;
  Plan plan_;
};

BufferRef offset(BufferRef ref, std::size_t bytes) {
  return {ref.buffer, ref.offset + bytes};
}

/// The buffer an in-place operation reads: the input when given, else the caller's own slot.
BufferRef in_place_source(const OpArgs& args, BufferRef own_slot) {
  return args.in != nullptr ? BufferRef{Buffer::input, 0} : own_slot;
}

}  // namespace

Plan plan_operation(const OpArgs& args, int rank, int size) {
  const std::size_t esize = dtype_size(args.dtype);
  PlanBuilder b(esize);
  const std::size_t n = args.count;
  const BufferRef in{Buffer::input, 0};
  const BufferRef out{Buffer::output, 0};
  // Single-buffer operations may carry their buffer in either slot.
  const BufferRef any_in = args.in != nullptr ? in : out;
  const BufferRef any_out = args.out != nullptr ? out : in;

  switch (args.op) {
    case OpType::send:
    case OpType::recv:
      if (args.tag != 0) {
        throw UnsupportedError(fmt::format(
            "NCCL {} with tag {}: NCCL point-to-point has no tags (matching is by order per peer); "
            "use tag 0 or another backend",
            args.op_name.empty() ? to_string(args.op) : args.op_name, args.tag));
      }
      // Refused before NCCL sees it: NCCL fails the unmatched half with ncclInvalidUsage, and a
      // failed NCCL call aborts the communicator, every later operation on it included.
      if (args.root == rank) {
        throw UnsupportedError(fmt::format(
            "NCCL {} with itself (peer {} is this rank): NCCL completes an exchange with itself "
            "only when its send and its recv are in one group, and here they are two operations; "
            "use another backend",
            args.op_name.empty() ? to_string(args.op) : args.op_name, args.root));
      }
      if (args.op == OpType::send) {
        b.send(any_in, n, args.root);
      } else {
        b.recv(any_out, n, args.root);
      }
      break;
    case OpType::broadcast:
    case OpType::all_reduce:
      b.collective(any_in, any_out, n, args.op == OpType::broadcast ? args.root : -1);
      break;
    case OpType::reduce:
      // recvbuff is ignored off the root; pass the send buffer rather than a null pointer there.
      b.collective(any_in, args.out != nullptr ? out : any_in, n, args.root);
      break;
    case OpType::all_gather: {
      const BufferRef src =
          args.in_place ? in_place_source(args, b.at(Buffer::output, rank * n)) : in;
      b.collective(src, out, n);
      break;
    }
    case OpType::reduce_scatter: {
      const BufferRef dst =
          args.in_place && args.out == nullptr ? b.at(Buffer::input, rank * n) : out;
      b.collective(in, dst, n);
      break;
    }
    case OpType::all_to_all: {
      const BufferRef src = args.in_place ? b.stash_output(n * size) : in;
      // In place, the caller's own chunk is already where it belongs.
      if (!args.in_place) b.copy(b.at(Buffer::input, rank * n), b.at(Buffer::output, rank * n), n);
      b.group_start();
      for (int p = 0; p < size; ++p) {
        if (p == rank) continue;
        b.send(offset(src, p * n * esize), n, p);
        b.recv(b.at(Buffer::output, p * n), n, p);
      }
      b.group_end();
      break;
    }
    case OpType::all_to_all_v: {
      const auto sdispl = displacements(args.send_counts, size);
      const auto rdispl = displacements(args.recv_counts, size);
      const auto me = static_cast<std::size_t>(rank);
      std::size_t total_send = 0;
      for (int p = 0; p < size; ++p)
        total_send += args.send_counts[p];
      const BufferRef src = args.in_place ? b.stash_output(total_send) : in;
      if (!args.in_place) {
        b.copy(b.at(Buffer::input, sdispl[me]), b.at(Buffer::output, rdispl[me]),
               args.send_counts[me]);
      }
      b.group_start();
      for (int p = 0; p < size; ++p) {
        if (p == rank) continue;
        const auto q = static_cast<std::size_t>(p);
        b.send(offset(src, sdispl[q] * esize), args.send_counts[p], p);
        b.recv(b.at(Buffer::output, rdispl[q]), args.recv_counts[p], p);
      }
      b.group_end();
      break;
    }
    case OpType::all_gather_v: {
      const auto displ = displacements(args.send_counts, size);
      const std::size_t mine = args.send_counts[rank];
      const BufferRef own = b.at(Buffer::output, displ[static_cast<std::size_t>(rank)]);
      const BufferRef src = args.in_place ? in_place_source(args, own) : in;
      if (!args.in_place) b.copy(src, own, mine);
      b.group_start();
      for (int p = 0; p < size; ++p) {
        if (p == rank) continue;
        b.send(src, mine, p);
        b.recv(b.at(Buffer::output, displ[static_cast<std::size_t>(p)]), args.send_counts[p], p);
      }
      b.group_end();
      break;
    }
    case OpType::gather: {
      // Local copies go before the group: NCCL launches the group's transfers at ncclGroupEnd.
      if (rank == args.root && !args.in_place) b.copy(in, b.at(Buffer::output, rank * n), n);
      b.group_start();
      if (rank == args.root) {
        for (int p = 0; p < size; ++p) {
          if (p != rank) b.recv(b.at(Buffer::output, p * n), n, p);
        }
      } else {
        b.send(in, n, args.root);
      }
      b.group_end();
      break;
    }
    case OpType::scatter: {
      if (rank == args.root && !args.in_place) b.copy(b.at(Buffer::input, rank * n), out, n);
      b.group_start();
      if (rank == args.root) {
        for (int p = 0; p < size; ++p) {
          if (p != rank) b.send(b.at(Buffer::input, p * n), n, p);
        }
      } else {
        b.recv(out, n, args.root);
      }
      b.group_end();
      break;
    }
    case OpType::barrier:
      b.collective({Buffer::barrier_cell, 0}, {Buffer::barrier_cell, 0}, 1);
      break;
  }
  return b.finish();
}

}  // namespace mcr::detail::nccl
