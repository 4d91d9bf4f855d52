#include "backends/mpi/mpi_ops.hpp"

#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "backends/mpi/mpi_nbc.hpp"
#include "core/kept.hpp"
#include "core/local_reduce.hpp"
#include "core/v_counts.hpp"
#include "mcr/errors.hpp"
#include "mpi_check.hpp"
#include "mpi_types.hpp"

namespace mcr::detail {
namespace {

int as_int(std::size_t n) {
  return static_cast<int>(n);
}  // counts are checked against max_count()

// all_to_all_v selects on CallOptions::size_hint, not on its counts, so selection cannot keep it
// off MPI when a count or displacement exceeds the int that MPI 3.1 takes: refuse it here, before
// MPI is called, instead of truncating. Every rank whose counts exceed it raises alike.
void check_v_counts_fit(const OpArgs& a, int size) {
  constexpr auto kMax = static_cast<std::size_t>(INT_MAX);
  const auto n = static_cast<std::size_t>(size);
  const auto past =
      first_count_past_limit<std::size_t>({a.send_counts, n}, {a.recv_counts, n}, kMax);
  if (!past) return;
  throw UnsupportedError(fmt::format(
      "all_to_all_v on backend 'mpi': {}[{}] = {} elements exceeds MPI's int counts and "
      "displacements (at most {}); nothing was started. Pass CallOptions::size_hint (the "
      "exchange's bytes, alike on every rank) so that selection keeps such exchanges off MPI, "
      "or force a backend without the limit (backend = \"gloo\")",
      past->what, past->peer, past->value, kMax));
}

std::atomic<bool> g_abandoned{false};

}  // namespace

void MpiPending::abandon() noexcept {
  if (request == MPI_REQUEST_NULL) return;
  // A request that has completed (a send the peer received, its handle never waited) leaves
  // nothing for MPI to progress: freed, it keeps MPI safe to finalize. Its copies out of scratch
  // must not run: the caller gave the operation up.
  int completed = 0;
  if (MPI_Test(&request, &completed, MPI_STATUS_IGNORE) == MPI_SUCCESS && completed != 0) {
    request = MPI_REQUEST_NULL;
    finish = {};
    return;
  }
  if (cancellable) {
    // A receive can be cancelled: once MPI confirms it (promptly for an unmatched receive), the
    // request is gone and nothing is left for MPI to progress. Bounded, in case it does not.
    if (MPI_Cancel(&request) == MPI_SUCCESS) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      int done = 0;
      while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done == 0 &&
             std::chrono::steady_clock::now() < until) {
      }
      if (done != 0) {
        request = MPI_REQUEST_NULL;
        finish = {};
        return;
      }
    }
  }
  g_abandoned.store(true);
  // What the request still owns (scratch, count arrays): MPI may use it until the process ends.
  try {
    if (!buffers.scratch.empty()) {
      keep_until_exit(std::make_shared<std::vector<std::byte>>(std::move(buffers.scratch)));
    }
    if (!buffers.ints.empty()) {
      keep_until_exit(std::make_shared<std::vector<int>>(std::move(buffers.ints)));
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory: the buffers go with the object
  }
  finish = {};  // its copies out of scratch must never run
  request = MPI_REQUEST_NULL;
}

bool mpi_request_abandoned() noexcept {
  return g_abandoned.load();
}

void MpiFinish::apply() const noexcept {
  if (copy_to != nullptr) std::memcpy(copy_to, copy_from, copy_bytes);
  if (divide != nullptr) divide_in_place(dtype, divide, divide_count, divisor);
}

std::unique_ptr<PendingOp> run_op(const MpiGroup& g, const OpArgs& a, bool blocking) {
  const MPI_Datatype dt = mpi_datatype(a.dtype);
  const int n = as_int(a.count);
  // A nonblocking request owns its bookkeeping, handed to the runtime. A blocking call builds
  // none unless its op needs memory (count arrays, scratch), and then on this frame: the common
  // blocking collective constructs and allocates nothing.
  std::unique_ptr<MpiPending> heap;
  std::optional<MpiBuffers> local;
  if (!blocking) heap = std::make_unique<MpiPending>();
  auto buffers = [&]() -> MpiBuffers& {
    if (heap) return heap->buffers;
    return local ? *local : local.emplace();
  };
  MPI_Request* req = heap ? &heap->request : nullptr;  // used by the nonblocking calls only
  MpiFinish finish;  // applied below when blocking, by MpiPending::test() otherwise
  const bool avg = is_reduction(a.op) && a.reduce == ReduceOp::avg;
  const MPI_Op op = is_reduction(a.op) ? mpi_op(a.reduce, a.dtype) : MPI_OP_NULL;
  auto divide_output = [&] {
    finish.divide = a.out;
    finish.divide_count = a.count;
    finish.dtype = a.dtype;
    finish.divisor = g.size;
  };

  switch (a.op) {
    case OpType::send:
      if (blocking) return run_op(g, a, false);  // point-to-point never blocks (see the header)
      if (a.tag > g.tag_ub)
        throw UnsupportedError(fmt::format("send: tag {} exceeds MPI_TAG_UB {}", a.tag, g.tag_ub));
      MCR_MPI_CHECK(MPI_Isend(a.in, n, dt, a.root, a.tag, g.comm, req));
      break;
    case OpType::recv:
      if (blocking) return run_op(g, a, false);
      if (a.tag > g.tag_ub)
        throw UnsupportedError(fmt::format("recv: tag {} exceeds MPI_TAG_UB {}", a.tag, g.tag_ub));
      MCR_MPI_CHECK(MPI_Irecv(a.out, n, dt, a.root, a.tag, g.comm, req));
      heap->cancellable = true;
      break;
    case OpType::broadcast:
      if (blocking)
        MCR_MPI_CHECK(MPI_Bcast(a.out, n, dt, a.root, g.comm));
      else
        MCR_MPI_CHECK(MPI_Ibcast(a.out, n, dt, a.root, g.comm, req));
      break;
    case OpType::all_reduce: {
      const void* src = a.in_place ? MPI_IN_PLACE : a.in;
      if (blocking) {
        MCR_MPI_CHECK(MPI_Allreduce(src, a.out, n, dt, op, g.comm));
      } else {
        // libnbc's algorithm for this call only (mpi_nbc.hpp)
        LibnbcIallreduceChoice algorithm(a.count * dtype_size(a.dtype), a.in_place, g.size);
        MCR_MPI_CHECK(MPI_Iallreduce(src, a.out, n, dt, op, g.comm, req));
        algorithm.restore();
      }
      if (avg) divide_output();
      break;
    }
    case OpType::reduce: {
      const bool root = g.rank == a.root;
      const void* src = (root && a.in_place) ? MPI_IN_PLACE : a.in;
      if (blocking)
        MCR_MPI_CHECK(MPI_Reduce(src, a.out, n, dt, op, a.root, g.comm));
      else
        MCR_MPI_CHECK(MPI_Ireduce(src, a.out, n, dt, op, a.root, g.comm, req));
      if (avg && root) divide_output();
      break;
    }
    case OpType::all_gather: {
      const void* src = a.in_place ? MPI_IN_PLACE : a.in;
      if (blocking)
        MCR_MPI_CHECK(MPI_Allgather(src, n, dt, a.out, n, dt, g.comm));
      else
        MCR_MPI_CHECK(MPI_Iallgather(src, n, dt, a.out, n, dt, g.comm, req));
      break;
    }
    case OpType::all_gather_v: {
      auto& ints = buffers().ints;
      ints.resize(2 * static_cast<std::size_t>(g.size));
      int* counts = ints.data();
      int* displs = counts + g.size;
      std::size_t off = 0;
      for (int r = 0; r < g.size; ++r) {
        counts[r] = as_int(a.send_counts[r]);
        displs[r] = as_int(off);
        off += a.send_counts[r];
      }
      const void* src = a.in_place ? MPI_IN_PLACE : a.in;
      if (blocking)
        MCR_MPI_CHECK(MPI_Allgatherv(src, counts[g.rank], dt, a.out, counts, displs, dt, g.comm));
      else
        MCR_MPI_CHECK(
            MPI_Iallgatherv(src, counts[g.rank], dt, a.out, counts, displs, dt, g.comm, req));
      break;
    }
    case OpType::gather: {
      const bool root = g.rank == a.root;
      const void* src = (root && a.in_place) ? MPI_IN_PLACE : a.in;
      if (blocking)
        MCR_MPI_CHECK(MPI_Gather(src, n, dt, a.out, n, dt, a.root, g.comm));
      else
        MCR_MPI_CHECK(MPI_Igather(src, n, dt, a.out, n, dt, a.root, g.comm, req));
      break;
    }
    case OpType::scatter: {
      const bool root = g.rank == a.root;
      void* dst = (root && a.in_place) ? MPI_IN_PLACE : a.out;
      if (blocking)
        MCR_MPI_CHECK(MPI_Scatter(a.in, n, dt, dst, n, dt, a.root, g.comm));
      else
        MCR_MPI_CHECK(MPI_Iscatter(a.in, n, dt, dst, n, dt, a.root, g.comm, req));
      break;
    }
    case OpType::reduce_scatter: {
      // In place (output = input's slot rank) goes through scratch: MPI's own in-place form leaves
      // the result at the start of the buffer instead.
      const std::size_t es = dtype_size(a.dtype);
      void* dst = a.out;
      if (a.in_place) {
        auto& scratch = buffers().scratch;
        scratch.resize(a.count * es);
        dst = scratch.data();
        finish.copy_to = a.out;
        finish.copy_from = dst;
        finish.copy_bytes = a.count * es;
      }
      if (blocking)
        MCR_MPI_CHECK(MPI_Reduce_scatter_block(a.in, dst, n, dt, op, g.comm));
      else
        MCR_MPI_CHECK(MPI_Ireduce_scatter_block(a.in, dst, n, dt, op, g.comm, req));
      if (avg) divide_output();
      break;
    }
    case OpType::all_to_all: {
      // Open MPI's nonblocking all-to-all treats sendbuf == recvbuf as in place and schedules it
      // differently; ranks must agree, so equal pointers (even of empty buffers) go through a copy.
      const void* src = a.in;
      if (a.in_place || a.in == a.out) {
        const std::size_t n_bytes =
            a.count * dtype_size(a.dtype) * static_cast<std::size_t>(g.size);
        auto& scratch = buffers().scratch;
        scratch.assign(static_cast<const std::byte*>(a.in),
                       static_cast<const std::byte*>(a.in) + n_bytes);
        if (scratch.empty()) scratch.resize(1);
        src = scratch.data();
      }
      if (blocking)
        MCR_MPI_CHECK(MPI_Alltoall(src, n, dt, a.out, n, dt, g.comm));
      else
        MCR_MPI_CHECK(MPI_Ialltoall(src, n, dt, a.out, n, dt, g.comm, req));
      break;
    }
    case OpType::all_to_all_v: {
      check_v_counts_fit(a, g.size);
      auto& ints = buffers().ints;
      ints.resize(4 * static_cast<std::size_t>(g.size));
      int* sc = ints.data();
      int* sd = sc + g.size;
      int* rc = sd + g.size;
      int* rd = rc + g.size;
      std::size_t so = 0, ro = 0;
      for (int r = 0; r < g.size; ++r) {
        sc[r] = as_int(a.send_counts[r]);
        sd[r] = as_int(so);
        so += a.send_counts[r];
        rc[r] = as_int(a.recv_counts[r]);
        rd[r] = as_int(ro);
        ro += a.recv_counts[r];
      }
      const void* src = a.in;
      if (a.in_place || a.in == a.out) {  // see all_to_all: never hand MPI equal pointers
        auto& scratch = buffers().scratch;
        scratch.assign(static_cast<const std::byte*>(a.in),
                       static_cast<const std::byte*>(a.in) + so * dtype_size(a.dtype));
        if (scratch.empty()) scratch.resize(1);
        src = scratch.data();
      }
      if (blocking)
        MCR_MPI_CHECK(MPI_Alltoallv(src, sc, sd, dt, a.out, rc, rd, dt, g.comm));
      else
        MCR_MPI_CHECK(MPI_Ialltoallv(src, sc, sd, dt, a.out, rc, rd, dt, g.comm, req));
      break;
    }
    case OpType::barrier:
      if (blocking)
        MCR_MPI_CHECK(MPI_Barrier(g.comm));
      else
        MCR_MPI_CHECK(MPI_Ibarrier(g.comm, req));
      break;
  }
  if (blocking) {
    finish.run();
    return nullptr;
  }
  heap->finish = finish;
  return heap;
}

}  // namespace mcr::detail
