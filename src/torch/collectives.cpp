// ProcessGroupMCR's operations: each checks what torch can check locally, stages contiguous
// buffers, and hands an mcr call to the communication thread. Buffers and count vectors are
// captured by the closures, so they live until the operation completed.
#include <memory>

#include <c10/util/Exception.h>

#include "process_group.hpp"
#include "tensors.hpp"

namespace mcr::torch_ext {
namespace {

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "mcr ", op, ": expects exactly one tensor per call, got ",
              tensors.size());
  check_tensor(tensors[0], op);
  return tensors[0];
}

void check_same(const std::vector<at::Tensor>& tensors, const at::Tensor& like, const char* op,
                bool same_numel) {
  check_same_device(tensors, like.device(), op);
  for (const auto& t : tensors) {
    check_tensor(t, op);
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "mcr ", op, ": all tensors must have dtype ",
                like.scalar_type(), ", got ", t.scalar_type());
    TORCH_CHECK(!same_numel || t.numel() == like.numel(), "mcr ", op, ": every tensor must have ",
                like.numel(), " elements, got ", t.numel());
  }
}

// A root or peer outside the group is refused on the calling thread, before anything is posted
// (torch's gloo refuses it there too), rather than by the Work when the operation is issued.
int checked_rank(int64_t r, int size, const char* what, const char* op) {
  TORCH_CHECK(r >= 0 && r < size, "mcr ", op, ": ", what, " ", r,
              " is outside the group (ranks 0 to ", size - 1, ")");
  return static_cast<int>(r);
}

void check_list_size(const std::vector<at::Tensor>& list, int size, const char* op) {
  TORCH_CHECK(static_cast<int>(list.size()) == size, "mcr ", op, ": the tensor list has ",
              list.size(), " entries, the group has ", size, " ranks");
}

// Copies slot r of `flat` (n elements each) into list[r].
void split_into(const at::Tensor& flat, const std::vector<at::Tensor>& list) {
  if (list.empty()) return;
  const auto n = list[0].numel();
  for (std::size_t r = 0; r < list.size(); ++r) {
    list[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(list[r].sizes()));
  }
}

mcr::Tensor empty_view(const at::Tensor& like) {
  mcr::Tensor v = view(like);
  return mcr::Tensor(nullptr, 0, v.dtype(), v.device(), v.stream());
}

at::Tensor flat_buffer(int64_t numel, const at::Tensor& like) {
  return at::empty({numel}, like.options());
}

// mcr element counts of an all_to_all_v side: split sizes in rows of `t`, or equal rows per rank.
std::vector<std::size_t> counts_of(const at::Tensor& t, const std::vector<int64_t>& splits,
                                   int size, const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t row = rows == 0 ? 0 : t.numel() / rows * static_cast<int64_t>(lanes(t));
  std::vector<std::size_t> counts(static_cast<std::size_t>(size));
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "mcr alltoall_base: ", what, " has ", rows,
                " rows, not divisible by the group size ", size);
    for (auto& c : counts)
      c = static_cast<std::size_t>(rows / size * row);
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "mcr alltoall_base: ", what,
              " split sizes have ", splits.size(), " entries, the group has ", size, " ranks");
  int64_t total = 0;
  for (std::size_t j = 0; j < counts.size(); ++j) {
    TORCH_CHECK(splits[j] >= 0, "mcr alltoall_base: negative split size ", splits[j]);
    counts[j] = static_cast<std::size_t>(splits[j] * row);
    total += splits[j];
  }
  TORCH_CHECK(total == rows, "mcr alltoall_base: ", what, " split sizes sum to ", total,
              ", the tensor has ", rows, " rows");
  return counts;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  const auto& t = single(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "mcr broadcast: rootTensor must be 0");
  auto s = stage(t, true);
  const int root = checked_rank(opts.rootRank, size_, "root", "broadcast");
  return enqueue(
      c10d::OpType::BROADCAST, {t}, timing(opts),
      [s, root](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.ibroadcast(view(s.buffer), root, o);
      },
      [s] { s.finish(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  const auto& t = single(tensors, "allreduce");
  const Reduction red(opts.reduceOp, t.scalar_type(), "allreduce");
  const auto op = red.op();
  auto s = stage(t, true);
  if (red.premultiplies()) check_open();  // a refused call must not have scaled the tensor
  red.scale_in_place(s.buffer);           // the tensor takes the result: no copy kept
  return enqueue(
      c10d::OpType::ALLREDUCE, {t}, timing(opts),
      [s, op](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.iall_reduce(view(s.buffer), op, o);
      },
      [s] { s.finish(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "mcr allreduce_coalesced: no tensors");
  check_same(tensors, tensors[0], "allreduce_coalesced", false);
  const Reduction red(opts.reduceOp, tensors[0].scalar_type(), "allreduce_coalesced");
  const auto op = red.op();
  // One operation over the concatenation: one selection and one message instead of many.
  auto flat = flatten(tensors);
  red.scale_in_place(flat);
  return enqueue(
      c10d::OpType::ALLREDUCE_COALESCED, tensors, timing(opts),
      [flat, op](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.iall_reduce(view(flat), op, o);
      },
      [flat, tensors] { unflatten_into(flat, tensors); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  const auto& t = single(tensors, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "mcr reduce: rootTensor must be 0");
  const Reduction red(opts.reduceOp, t.scalar_type(), "reduce");
  const auto op = red.op();
  const int root = checked_rank(opts.rootRank, size_, "root", "reduce");
  // A PREMUL_SUM input is scaled into a copy: only the root's tensor takes the result.
  auto s = red.premultiplies() ? Staged{t, red.scaled(t), rank_ == root} : stage(t, true);
  return enqueue(
      c10d::OpType::REDUCE, {t}, timing(opts),
      [s, op, root](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.ireduce(view(s.buffer), op, root, o);
      },
      [s] { s.finish(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const auto in = single(inputs, "allgather").contiguous();
  TORCH_CHECK(outputs.size() == 1, "mcr allgather: expects one output list, got ", outputs.size());
  auto list = outputs[0];
  check_list_size(list, size_, "allgather");
  check_same(list, in, "allgather", true);
  auto flat = flat_buffer(in.numel() * size_, in);
  return enqueue(
      c10d::OpType::ALLGATHER, list, timing(opts),
      [in, flat](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.iall_gather(view(in), view(flat), o);
      },
      [flat, list] { split_into(flat, list); });
}

namespace {

// What an all-gather's and a reduce-scatter's (output, input) share: both carried, one dtype, one
// device. Their element counts differ by the group's size, the other way round in each.
void check_pair_alike(const at::Tensor& output, const at::Tensor& input, const char* op) {
  check_tensor(input, op);
  check_tensor(output, op);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "mcr ", op, ": dtypes differ");
  check_same_device({output}, input.device(), op);
}

}  // namespace

void ProcessGroupMCR::check_allgather_pair(const at::Tensor& output, const at::Tensor& input,
                                           const char* op) const {
  check_pair_alike(output, input, op);
  TORCH_CHECK(output.numel() == input.numel() * size_, "mcr ", op, ": output has ", output.numel(),
              " elements, expected ", input.numel() * size_);
}

Reduction ProcessGroupMCR::check_reduce_scatter_pair(const at::Tensor& output,
                                                     const at::Tensor& input,
                                                     const c10d::ReduceOp& reduce,
                                                     const char* op) const {
  check_pair_alike(output, input, op);
  TORCH_CHECK(input.numel() == output.numel() * size_, "mcr ", op, ": input has ", input.numel(),
              " elements, expected ", output.numel() * size_);
  return Reduction(reduce, output.scalar_type(), op);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  check_allgather_pair(output, input, "_allgather_base");
  auto in = input.contiguous();
  auto s = stage(output, false);
  return enqueue(
      c10d::OpType::_ALLGATHER_BASE, {output}, timing(opts),
      [in, s](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.iall_gather(view(in), view(s.buffer), o);
      },
      [s] { s.finish(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "mcr allgather_coalesced: no tensors");
  check_same(inputs, inputs[0], "allgather_coalesced", false);
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_,
              "mcr allgather_coalesced: ", outputs.size(), " output lists for ", size_, " ranks");
  auto flat_in = flatten(inputs);
  auto flat_out = flat_buffer(flat_in.numel() * size_, flat_in);
  std::vector<at::Tensor> all;
  for (std::size_t r = 0; r < outputs.size(); ++r) {
    const auto& l = outputs[r];
    TORCH_CHECK(l.size() == inputs.size(), "mcr allgather_coalesced: output list ", r, " has ",
                l.size(), " tensors, for ", inputs.size(), " inputs");
    check_same_device(l, inputs[0].device(), "allgather_coalesced");
    for (std::size_t i = 0; i < l.size(); ++i) {
      // Rank r's copy of input i lands in outputs[r][i]: same dtype and element count.
      check_tensor(l[i], "allgather_coalesced");
      TORCH_CHECK(
          l[i].scalar_type() == inputs[i].scalar_type() && l[i].numel() == inputs[i].numel(),
          "mcr allgather_coalesced: output [", r, "][", i, "] is ", l[i].scalar_type(), " with ",
          l[i].numel(), " elements; input ", i, " is ", inputs[i].scalar_type(), " with ",
          inputs[i].numel());
    }
    all.insert(all.end(), l.begin(), l.end());
  }
  return enqueue(
      c10d::OpType::ALLGATHER_COALESCED, all, timing(opts),
      [flat_in, flat_out](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.iall_gather(view(flat_in), view(flat_out), o);
      },
      [flat_out, all] { unflatten_into(flat_out, all); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const auto in = single(inputs, "gather").contiguous();
  const int root = checked_rank(opts.rootRank, size_, "root", "gather");
  std::vector<at::Tensor> list;
  at::Tensor flat;
  if (root == rank_) {
    TORCH_CHECK(outputs.size() == 1, "mcr gather: the root expects one output list");
    list = outputs[0];
    check_list_size(list, size_, "gather");
    check_same(list, in, "gather", true);
    flat = flat_buffer(in.numel() * size_, in);
  } else {
    TORCH_CHECK(outputs.empty(), "mcr gather: only the root takes an output list");
  }
  // Ordered by the input: a rank other than the root has no output, and a CUDA input must still
  // be read after the work on the caller's current stream that produces it.
  return enqueue(
      c10d::OpType::GATHER, list, timing(opts),
      [in, flat, root](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.igather(view(in), flat.defined() ? view(flat) : empty_view(in), root, o);
      },
      [flat, list] { split_into(flat, list); }, 0, in);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const auto& out = single(outputs, "scatter");
  const int root = checked_rank(opts.rootRank, size_, "root", "scatter");
  at::Tensor flat;
  if (root == rank_) {
    TORCH_CHECK(inputs.size() == 1, "mcr scatter: the root expects one input list");
    check_list_size(inputs[0], size_, "scatter");
    check_same(inputs[0], out, "scatter", true);
    flat = flatten(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty(), "mcr scatter: only the root takes an input list");
  }
  auto s = stage(out, false);
  return enqueue(
      c10d::OpType::SCATTER, {out}, timing(opts),
      [flat, s, root](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.iscatter(flat.defined() ? view(flat) : empty_view(s.buffer), view(s.buffer), root,
                          o);
      },
      [s] { s.finish(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const auto& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "mcr reduce_scatter: expects one input list");
  check_list_size(inputs[0], size_, "reduce_scatter");
  check_same(inputs[0], out, "reduce_scatter", true);
  const Reduction red(opts.reduceOp, out.scalar_type(), "reduce_scatter");
  const auto op = red.op();
  auto flat = flatten(inputs[0]);
  red.scale_in_place(flat);
  auto s = stage(out, false);
  return enqueue(
      c10d::OpType::REDUCE_SCATTER, {out}, timing(opts),
      [flat, s, op](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.ireduce_scatter(view(flat), view(s.buffer), op, o);
      },
      [s] { s.finish(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const Reduction red =
      check_reduce_scatter_pair(output, input, opts.reduceOp, "_reduce_scatter_base");
  const auto op = red.op();
  auto in = red.premultiplies() ? red.scaled(input) : input.contiguous();
  auto s = stage(output, false);
  return enqueue(
      c10d::OpType::_REDUCE_SCATTER_BASE, {output}, timing(opts),
      [in, s, op](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.ireduce_scatter(view(in), view(s.buffer), op, o);
      },
      [s] { s.finish(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& output_splits,
                                                              std::vector<int64_t>& input_splits,
                                                              const c10d::AllToAllOptions& opts) {
  check_tensor(input, "alltoall_base");
  check_tensor(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "mcr alltoall_base: dtypes differ");
  check_same_device({output}, input.device(), "alltoall_base");
  auto in = input.contiguous();
  auto s = stage(output, false);
  if (output_splits.empty() && input_splits.empty()) {
    // Whole rows (dim 0) go to each rank, as torch's own backends split them (checkSplitSizes).
    for (const at::Tensor* t : {&input, &output}) {
      TORCH_CHECK(t->dim() > 0 && t->size(0) % size_ == 0, "mcr alltoall_base: the ",
                  t == &input ? "input" : "output", "'s dim 0 (",
                  t->dim() > 0 ? t->size(0) : int64_t{0},
                  ") does not divide equally across the group's ", size_,
                  " ranks (without split sizes each rank gets dim 0 / ", size_, " rows)");
    }
    TORCH_CHECK(in.numel() == output.numel(), "mcr alltoall_base: input has ", in.numel(),
                " elements, output ", output.numel());
    TORCH_CHECK(in.numel() % size_ == 0, "mcr alltoall_base: ", in.numel(),
                " elements do not split evenly over ", size_, " ranks");
    return enqueue(
        c10d::OpType::ALLTOALL_BASE, {output}, timing(opts),
        [in, s](mcr::Communicator& c, const mcr::CallOptions& o) {
          return c.iall_to_all(view(in), view(s.buffer), o);
        },
        [s] { s.finish(); });
  }
  auto send =
      std::make_shared<std::vector<std::size_t>>(counts_of(in, input_splits, size_, "input"));
  auto recv =
      std::make_shared<std::vector<std::size_t>>(counts_of(output, output_splits, size_, "output"));
  return enqueue(
      c10d::OpType::ALLTOALL_BASE, {output}, timing(opts),
      [in, s, send, recv](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.iall_to_all_v(view(in), *send, view(s.buffer), *recv, o);
      },
      [s, send, recv] { s.finish(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions& opts) {
  check_list_size(inputs, size_, "alltoall");
  check_list_size(outputs, size_, "alltoall");
  check_same(inputs, inputs[0], "alltoall", false);
  check_same(outputs, inputs[0], "alltoall", false);
  auto send = std::make_shared<std::vector<std::size_t>>();
  auto recv = std::make_shared<std::vector<std::size_t>>();
  const std::size_t per = lanes(inputs[0]);  // mcr elements per tensor element
  int64_t total = 0;                         // tensor elements received
  for (const auto& t : inputs)
    send->push_back(static_cast<std::size_t>(t.numel()) * per);
  for (const auto& t : outputs) {
    recv->push_back(static_cast<std::size_t>(t.numel()) * per);
    total += t.numel();
  }
  auto flat_in = flatten(inputs);
  auto flat_out = flat_buffer(total, inputs[0]);
  return enqueue(
      c10d::OpType::ALLTOALL, outputs, timing(opts),
      [flat_in, flat_out, send, recv](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.iall_to_all_v(view(flat_in), *send, view(flat_out), *recv, o);
      },
      [flat_out, outputs, send, recv] { unflatten_into(flat_out, outputs); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::send(std::vector<at::Tensor>& tensors, int dst,
                                                     int tag) {
  auto in = single(tensors, "send").contiguous();
  checked_rank(dst, size_, "destination", "send");
  return enqueue(
      c10d::OpType::SEND, {}, Timing{},
      [in, dst](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.isend(view(in), dst, o);
      },
      {}, tag, in);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::recv(std::vector<at::Tensor>& tensors, int src,
                                                     int tag) {
  const auto& t = single(tensors, "recv");
  checked_rank(src, size_, "source", "recv");
  auto s = stage(t, false);
  return enqueue(
      c10d::OpType::RECV, {t}, Timing{},
      [s, src](mcr::Communicator& c, const mcr::CallOptions& o) {
        return c.irecv(view(s.buffer), src, o);
      },
      [s] { s.finish(); }, tag);
}

// As torch's own backends: the barrier completes once the group's collectives posted before it
// have (gloo waits for them, NCCL orders them on its stream, MPI runs one at a time), so code after
// dist.barrier() may read what an earlier async_op collective writes. The runtime completes
// operations in any order (Gloo runs two at once), so the barrier's Work covers them. Sends and
// receives are left out, as gloo leaves them: one matched only after the barrier would deadlock.
c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::barrier(const c10d::BarrierOptions& opts) {
  std::vector<c10::intrusive_ptr<c10d::Work>> earlier = outstanding_collectives();
  auto work =
      enqueue(c10d::OpType::BARRIER, {}, timing(opts),
              [](mcr::Communicator& c, const mcr::CallOptions& o) { return c.ibarrier(o); }, {});
  if (earlier.empty()) return work;
  earlier.push_back(std::move(work));
  return combine(c10d::OpType::BARRIER, std::move(earlier), /*keep_outputs=*/false);
}

}  // namespace mcr::torch_ext
