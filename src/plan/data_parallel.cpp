// Data parallelism of one step: the gradient reduction (all-reduce, or reduce-scatter under ZeRO
// and Megatron's distributed optimizer) and the parameter all-gather, bucket by bucket as DDP and
// Megatron-Core issue them, for the dense parameters over the dp * cp ranks that share them and for
// the experts over their expert-data-parallel ranks; and what the step does not hide of it.
#include <algorithm>
#include <cmath>
#include <utility>

#include "stage_cost.hpp"

namespace mcr::plan {

GradientBuckets gradient_buckets(double bytes, double bucket_bytes) {
  GradientBuckets out;
  if (!(bytes > 0)) return out;
  if (!(bucket_bytes > 0) || bucket_bytes >= bytes) {
    out.rest = bytes;
    return out;
  }
  const double full = std::floor(bytes / bucket_bytes);
  out.full = static_cast<std::uint64_t>(full);  // at most bytes: request.cpp keeps buckets >= 1 B
  out.size = bucket_bytes;
  out.rest = bytes - full * bucket_bytes;
  return out;
}

CommCost bucketed_cost(const CommModel& comm, Collective op, double bytes, double bucket_bytes,
                       const Placement& where, DType dtype, CallForm form) {
  CommCost total{0, "none", "local"};
  const GradientBuckets b = gradient_buckets(bytes, bucket_bytes);
  // Every full bucket has the same size and so the same price.
  for (const auto& [n, size] : {std::pair<double, double>{static_cast<double>(b.full), b.size},
                                {b.rest > 0 ? 1.0 : 0.0, b.rest}}) {
    if (n == 0) continue;
    const CommCost c = comm.cost(op, size, where, dtype, form);
    total.time_s += n * c.time_s;
    total.backend = c.backend;
    total.source = c.source;
  }
  return total;
}

namespace detail {
namespace {

// The gradient reduction that an interleaved pipeline leaves exposed. Megatron-Core launches each
// model chunk's reduction once the last microbatch's backward pass through that chunk is done
// (megatron/core/pipeline_parallel/schedules.py, the grad_sync_func of the interleaved schedule;
// offset by the stage's pipeline rank so that every stage launches at the same time, i.e. when the
// first stage does), not bucket by bucket inside it. In the cool-down a stage runs the last
// `group` microbatches' backward passes chunk after chunk, so the chunk that finishes c-th from
// last has `c * group` chunk passes still to run when its reduction starts; the reductions queue
// one after another. What still runs after the stage's last backward pass is exposed.
double interleaved_exposed(double reduce, double bwd, int chunks, double group) {
  const double per_chunk = reduce / chunks, pass = bwd / chunks;
  double worst = 0;
  for (int c = 0; c < chunks; ++c)
    worst = std::max(worst, (c + 1) * per_chunk - c * group * pass);
  return worst;
}

}  // namespace

DataParallel data_parallel(const Context& c, const StageParams& params, double fwd,
                           double bwd_window) {
  const codesign::ModelShape& m = c.model;
  const CommModel& comm = c.comm;
  const Layout& l = c.layout;
  const PlanOptions& options = c.options;
  const double mb = static_cast<double>(l.microbatches());
  DataParallel out;
  const int g = comm.system().gpus_per_node;
  const double e = codesign::dtype_bytes(m.dtype);
  const double grad = gradient_bytes(options, m.dtype);
  const DType gdt = gradient_comm_dtype(options, m.dtype);
  const DType pdt = l.fp8_params ? DType::u8 : comm_dtype(m.dtype);
  const double param_bytes = l.fp8_params ? 1.0 : e;
  struct Group {
    const char* name;
    double params;
    Placement where;
  };
  std::vector<Group> groups;
  if (l.dense_replicas() > 1) {
    groups.push_back({"dense", params.dense, place_group(l.dense_replicas(), l.tp, g)});
  }
  if (params.expert > 0 && l.expert_replicas() > 1) {
    groups.push_back(
        {"expert", params.expert, place_group(l.expert_replicas(), l.expert_tp() * l.ep, g)});
  }
  double reduce = 0, gather = 0, zero3 = 0;
  // Overlapped with compute, the frameworks issue these collectives asynchronously and wait later:
  // priced from the table's asynchronous entries where it has them.
  const CallForm form = l.dp_overlap ? CallForm::async : CallForm::sync;
  for (const auto& grp : groups) {
    const double bytes = grp.params * grad;
    // The gradients are reduced bucket by bucket, as DDP and Megatron's distributed optimizer
    // issue them: full buckets from the end of the flat gradient, the remainder last.
    const auto buckets = gradient_buckets(bytes, options.dp_bucket_bytes);
    const bool scatter = l.zero >= 1 || l.distributed_optimizer;
    // What is priced: ZeRO-3's exposed time comes from one reduce-scatter of the stage's gradients
    // per microbatch (below), not from the buckets.
    if (l.zero >= 3) {
      out.reductions.push_back({grp.name, "reduce_scatter", bytes, 1, bytes});
    } else {
      out.reductions.push_back({grp.name, scatter ? "reduce_scatter" : "all_reduce", bytes,
                                static_cast<std::size_t>(buckets.count()), buckets.last()});
    }
    const auto red =
        bucketed_cost(comm, scatter ? Collective::reduce_scatter : Collective::all_reduce, bytes,
                      options.dp_bucket_bytes, grp.where, gdt, form);
    reduce += red.time_s;
    out.source = origin(red);
    if (scatter) {
      gather +=
          comm.cost(Collective::all_gather, grp.params * param_bytes, grp.where, pdt, form).time_s;
    }
    if (l.zero >= 3) {
      // ZeRO-3 gathers the weights for every forward and backward pass and reduce-scatters the
      // gradients of every microbatch; prefetching hides what the compute covers.
      // Parameters in their stored width (FP8 under --fp8-params), gradients in theirs
      // (--grad-dtype), as the bucketed reduction above prices them.
      const double ag =
          comm.cost(Collective::all_gather, grp.params * param_bytes, grp.where, pdt, form).time_s;
      const double rs =
          comm.cost(Collective::reduce_scatter, grp.params * grad, grp.where, gdt, form).time_s;
      zero3 += 2 * ag + rs;
    }
  }
  if (groups.empty()) return out;
  // The gradients are final once the last microbatch's backward pass has run through the stage.
  // On the first pipeline stage nothing follows that pass: the stage ends the step (later stages
  // finished theirs earlier and idle in the drain, which hides their reductions, not its own).
  // So the window is the last backward pass alone (bwd_window), not part of the bubble's drain,
  // which only later stages have.
  // With an interleaved pipeline, `group` chunk passes run between a chunk's passes.
  const double group = std::min<double>(l.pp, mb);
  // The reduction's exposed part: against the last microbatch's backward pass, or, with an
  // interleaved pipeline, chunk by chunk through the cool-down.
  const auto reduce_exposed = [&] {
    if (!l.dp_overlap) return reduce;
    if (l.pp > 1 && l.interleave > 1)
      return interleaved_exposed(reduce, bwd_window, l.interleave, group);
    return std::max(0.0, reduce - bwd_window);
  };
  if (l.zero >= 3) {
    const double cover = l.dp_overlap ? fwd + bwd_window : 0.0;
    out.exposed = mb * std::max(0.0, zero3 - cover);
  } else if (l.distributed_optimizer) {
    // Megatron-Core overlaps each bucket's reduce-scatter with the rest of the backward pass and
    // the parameter all-gathers with the next step's first forward pass; on the first stage no
    // fill comes before that pass, and a delay there delays every later stage. With an interleaved
    // pipeline (align_param_gather, as Megatron-Bridge's recipes set it) Megatron-Core dispatches
    // chunks 0 and 1 at the step's start and chunk k+1 at chunk k's first forward pass; on one
    // data-parallel communicator they run one after another, so chunk 0's is exposed and each
    // later one has `group` forward passes of a chunk (fwd / v) to hide behind. Chunks are priced
    // equal: the first stage's chunk 0 also holds the embedding, which this leaves out.
    double gather_exposed = gather;
    if (l.dp_overlap) {
      if (l.pp > 1 && l.interleave > 1) {
        const double v = l.interleave;
        gather_exposed = gather / v + (v - 1) * std::max(0.0, (gather - group * fwd) / v);
      } else {
        gather_exposed = std::max(0.0, gather - fwd);
      }
    }
    out.exposed = reduce_exposed() + gather_exposed;
  } else if (l.zero == 2) {
    // ZeRO 2 keeps only its shard of the gradients (as memory prices it), so it reduce-scatters
    // them after every microbatch's backward pass, as DeepSpeed's stage 2 does at each micro-step,
    // each behind that pass at most (ZeRO 2 excludes pipelining: no interleaving here).
    out.exposed = mb * reduce_exposed() + gather;
  } else {
    // Bucketed reduction overlaps the backward pass of the last microbatch; the parameter
    // all-gather after the optimizer step (ZeRO 1) waits for it.
    out.exposed = reduce_exposed() + gather;
  }
  return out;
}

}  // namespace detail
}  // namespace mcr::plan
