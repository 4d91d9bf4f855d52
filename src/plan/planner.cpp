#include "mcr/plan/planner.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "mcr/codesign/calculators.hpp"
#include "mcr/errors.hpp"
#include "stage_cost.hpp"

namespace mcr::plan {

namespace {
double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

/// "gloo, table:intra (tuning)" or "alpha-beta": where a collective's time came from.
std::string origin(const CommCost& c) {
  return c.backend == "alpha-beta" ? c.source : c.backend + ", " + c.source;
}
}  // namespace

std::vector<double> gradient_buckets(double bytes, double bucket_bytes) {
  std::vector<double> out;
  if (!(bytes > 0)) return out;
  if (!(bucket_bytes > 0) || bucket_bytes >= bytes) return {bytes};
  const auto full = static_cast<std::int64_t>(std::floor(bytes / bucket_bytes));
  out.assign(static_cast<std::size_t>(full), bucket_bytes);
  const double rest = bytes - static_cast<double>(full) * bucket_bytes;
  if (rest > 0) out.push_back(rest);
  return out;
}

CommCost bucketed_cost(const CommModel& comm, Collective op, double bytes, double bucket_bytes,
                       const Placement& where, DType dtype) {
  CommCost total{0, "none", "local"};
  for (const double part : gradient_buckets(bytes, bucket_bytes)) {
    const CommCost c = comm.cost(op, part, where, dtype);
    total.time_s += c.time_s;
    total.backend = c.backend;
    total.source = c.source;
  }
  return total;
}

double Breakdown::total() const {
  return forward_gemm + backward_gemm + memory_bound + recompute + logits_embedding + tp_comm +
         pp_comm + bubble + dp_comm + optimizer;
}

double bubble_fraction(int pp, std::int64_t microbatches, int interleave) {
  if (pp <= 1 || microbatches <= 0) return 0;
  return (pp - 1.0) / (as_double(microbatches) * std::max(1, interleave));
}

PlanResult plan_step(const codesign::ModelShape& model, const codesign::DeviceSpec& catalog_device,
                     const CommModel& comm, const Layout& l, const PlanOptions& options) {
  // GEMMs inside a training step run at the system's sustained fraction of the single-GEMM model.
  codesign::DeviceSpec device = catalog_device;
  device.efficiency.peak_fraction *= comm.system().compute_efficiency;
  if (auto e = layout_error(l, model, comm.system()); !e.empty()) throw InvalidArgument(e);
  codesign::ModelShape m = model;
  m.t = l.tp;
  m.b = l.micro_batch;
  m.validate();

  PlanResult r;
  r.model = m;
  r.layout = l;
  r.device = device.name;
  r.system = comm.system().name;
  r.dp_bucket_bytes = options.dp_bucket_bytes;
  const auto c = detail::layer_cost(m, device, comm, l);
  const auto ends = detail::ends_cost(m, device, comm, l);
  const double mb = as_double(l.microbatches());
  const double n_l = as_double(m.L) / l.pp;
  const double e = codesign::dtype_bytes(m.dtype);
  const DType dt = detail::comm_dtype(m.dtype);
  const int g = comm.system().gpus_per_node;

  // One microbatch on one stage.
  const double fwd = n_l * (c.fwd_gemm + c.fwd_mem + c.tp_fwd);
  const double bwd = n_l * (c.bwd_gemm + c.bwd_mem + c.tp_bwd);
  double rec = 0;
  if (l.recompute == Recompute::full) rec = fwd;
  if (l.recompute == Recompute::selective) rec = n_l * (c.attn_core_fwd + c.attn_mem_fwd);
  // Pipeline transfers: the b*s*h activation, split over the TP ranks (Megatron's scatter/gather
  // optimisation; with sequence parallelism it is split already), once forward and once backward
  // per model chunk.
  double p2p = 0;
  std::string p2p_source;
  if (l.pp > 1) {
    const Placement pipe = place_group(l.pp, l.tp * l.dp, g);
    const Placement pair{2, pipe.nodes > 1 ? 1 : 2, pipe.nodes > 1 ? 2 : 1};
    const double bytes = as_double(m.s * m.b * m.h) * e / l.tp;
    const auto cost = comm.cost(Collective::p2p, bytes, pair, dt);
    p2p = 2.0 * l.interleave * cost.time_s;
    p2p_source = origin(cost);
  }
  const double base = fwd + bwd + rec + p2p;
  const double first_extra =
      ends.embedding + (l.pp == 1 ? ends.logits_gemm + ends.cross_entropy : 0);
  const double last_extra =
      ends.logits_gemm + ends.cross_entropy + (l.pp == 1 ? ends.embedding : 0);
  const double t_avg = base + (ends.embedding + ends.logits_gemm + ends.cross_entropy) / l.pp;
  const double fill = (l.pp - 1.0) / l.interleave;  // 1F1B fill and drain, in stage-times

  Breakdown& b = r.breakdown;
  b.forward_gemm = mb * n_l * c.fwd_gemm;
  b.backward_gemm = mb * n_l * c.bwd_gemm;
  b.memory_bound = mb * n_l * (c.fwd_mem + c.bwd_mem);
  b.recompute = mb * rec;
  b.tp_comm = mb * n_l * (c.tp_fwd + c.tp_bwd);
  b.pp_comm = mb * p2p;
  b.logits_embedding = mb * std::max(first_extra, last_extra);
  b.bubble = fill * t_avg;
  r.embedding_s = ends.embedding;
  r.logits_gemm_s = ends.logits_gemm;
  r.cross_entropy_s = ends.cross_entropy;

  // Data parallelism. Parameters on the larger stage, not sharded over dp.
  codesign::ModelShape whole = m;
  whole.t = 1;
  const auto pc = codesign::count_parameters(whole);
  r.params = pc.total;
  const MemoryBreakdown mem = plan_memory(m, device, l, options);
  const double stage_params = mem.gradients * (l.zero >= 2 ? l.dp : 1) / e;
  const double grad_bytes = stage_params * e;
  const Placement dpg = place_group(l.dp, l.tp, g);
  double dp_exposed = 0;
  std::string dp_source;
  if (l.dp > 1) {
    // The gradients are reduced bucket by bucket, as DDP and Megatron's distributed optimizer
    // issue them: full buckets from the end of the flat gradient, the remainder last.
    const auto buckets = gradient_buckets(grad_bytes, options.dp_bucket_bytes);
    r.dp_buckets = buckets.size();
    r.dp_last_bucket_bytes = buckets.empty() ? 0.0 : buckets.back();
    const auto ar =
        bucketed_cost(comm, Collective::all_reduce, grad_bytes, options.dp_bucket_bytes, dpg, dt);
    const auto rs = bucketed_cost(comm, Collective::reduce_scatter, grad_bytes,
                                  options.dp_bucket_bytes, dpg, dt);
    const auto ag = comm.cost(Collective::all_gather, grad_bytes, dpg, dt);
    // Bucketed reduction overlaps the backward pass of the last microbatch; the parameter
    // all-gather after the optimizer step (ZeRO 1, 2) waits for it.
    const double window = l.dp_overlap ? bwd + rec : 0.0;
    if (l.zero == 0) {
      dp_exposed = std::max(0.0, ar.time_s - window);
      dp_source = origin(ar);
    } else if (l.zero <= 2) {
      dp_exposed = std::max(0.0, rs.time_s - window) + ag.time_s;
      dp_source = origin(rs);
    } else {
      // ZeRO-3 gathers the weights for every forward and backward pass and reduce-scatters the
      // gradients of every microbatch; prefetching hides what the compute covers.
      const double per_mb = 2 * ag.time_s + rs.time_s;
      const double cover = l.dp_overlap ? fwd + bwd + rec : 0.0;
      dp_exposed = mb * std::max(0.0, per_mb - cover);
      dp_source = origin(ag);
    }
  }
  // Tied embeddings on different stages: the first and last stage sum their gradients.
  if (m.tied_embeddings && l.pp > 1) {
    const Placement pipe = place_group(l.pp, l.tp * l.dp, g);
    const Placement pair{2, pipe.nodes > 1 ? 1 : 2, pipe.nodes > 1 ? 2 : 1};
    const double bytes = as_double(m.v) * as_double(m.h) / l.tp * e;
    dp_exposed += comm.cost(Collective::all_reduce, bytes, pair, dt).time_s;
  }
  b.dp_comm = dp_exposed;
  // Adam on the local shard: read grad, master, m, v; write master, m, v and the low-precision
  // weights.
  const double local = stage_params / (l.zero >= 1 ? l.dp : 1);
  b.optimizer = detail::kernel_time("optimizer", false, local * (2 * e + 24), local, 4, device,
                                    comm.system());

  r.step_time_s = b.total();
  r.bubble_fraction = bubble_fraction(l.pp, l.microbatches(), l.interleave);
  r.memory = mem;

  // FLOPs: the model's (3 x forward, logits included) and the hardware's (plus recomputation).
  const double tokens = as_double(l.global_batch) * as_double(m.s);
  whole.b = 1;
  const auto fc = codesign::count_flops(whole);
  r.model_flops = fc.forward_per_token * tokens * 3;
  double recompute_flops = 0;
  const double replicas = mb * l.dp;
  if (l.recompute == Recompute::full)
    recompute_flops = c.fwd_flops * l.tp * as_double(m.L) * replicas;
  if (l.recompute == Recompute::selective) {
    recompute_flops = c.attn_core_flops * l.tp * as_double(m.L) * replicas;
  }
  r.hardware_flops = r.model_flops + recompute_flops;
  r.tokens_per_s = tokens / r.step_time_s;
  r.tflops_per_gpu = r.hardware_flops / r.step_time_s / l.gpus / 1e12;
  r.model_tflops_per_gpu = r.model_flops / r.step_time_s / l.gpus / 1e12;
  const double peak = device.peak_for(m.dtype);
  r.mfu = r.model_tflops_per_gpu / peak;
  r.hfu = r.tflops_per_gpu / peak;

  if (l.tp > 1) {
    const Placement tp = place_group(l.tp, 1, g);
    const auto op = l.sequence_parallel ? Collective::all_gather : Collective::all_reduce;
    r.notes.push_back("tp collectives: " +
                      origin(comm.cost(op, as_double(m.s * m.b * m.h) * e, tp, dt)));
  }
  if (!comm.system().elementwise_ns.empty()) {
    r.notes.push_back(
        fmt::format("element-wise kernels: the system's measured per-element rates ({} classes)",
                    comm.system().elementwise_ns.size()));
  }
  if (!p2p_source.empty()) r.notes.push_back("pipeline p2p: " + p2p_source);
  if (!dp_source.empty()) {
    // Which sizes the reduction was priced at, so that a table can be checked against them.
    const std::string sizes =
        r.dp_buckets <= 1 ? fmt::format("one all-reduce of {:.4g} MB", r.dp_last_bucket_bytes / 1e6)
                          : fmt::format("{} buckets ({} x {:.4g} MB, last {:.4g} MB)", r.dp_buckets,
                                        r.dp_buckets - 1, options.dp_bucket_bytes / 1e6,
                                        r.dp_last_bucket_bytes / 1e6);
    const std::string cap = options.dp_bucket_bytes > 0
                                ? fmt::format("--dp-bucket-mb {:g}", options.dp_bucket_bytes / 1e6)
                                : std::string("no bucketing");
    r.notes.push_back(fmt::format("dp reduction: {} ({}); {}", sizes, cap, dp_source));
  }
  if (m.tied_embeddings && l.pp > 1) {
    r.notes.push_back(
        "dp reduction includes the tied-embedding all-reduce of the first and last stage");
  }
  if (!mem.fits) {
    r.notes.push_back(fmt::format("does not fit: {:.1f} GiB needed, {:.1f} GiB per GPU",
                                  mem.total / (1 << 30), mem.capacity / (1 << 30)));
  }
  return r;
}

}  // namespace mcr::plan
