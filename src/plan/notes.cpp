// The notes of a plan: where each kind of collective's time came from, which assumptions applied
// (overlaps, FP8, expert routing, the distributed optimizer) and what the memory leaves out.
#include <fmt/core.h>

#include "stage_cost.hpp"

namespace mcr::plan::detail {

namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

}  // namespace

std::string origin(const CommCost& c) {
  return c.backend == "alpha-beta" ? c.source : c.backend + ", " + c.source;
}

void add_notes(PlanResult& r, const Context& ctx, const std::string& dp_source,
               const std::string& p2p_source) {
  const codesign::ModelShape& m = ctx.model;
  const Layout& l = ctx.layout;
  const CommModel& comm = ctx.comm;
  const SystemSpec& sys = comm.system();
  const PlanOptions& options = ctx.options;
  const Breakdown& b = r.breakdown;
  const MemoryBreakdown& mem = r.memory;
  const int g = sys.gpus_per_node;
  const double e = ctx.elem();
  const DType dt = comm_dtype(m.dtype);
  if (l.tp > 1) {
    const Placement tp = place_group(l.tp, 1, g);
    const auto op = l.sequence_parallel ? Collective::all_gather : Collective::all_reduce;
    r.notes.push_back(
        "tp collectives: " + origin(comm.cost(op, ctx.tokens() * as_double(m.h) * e, tp, dt)) +
        (l.tp_comm_overlap ? " (overlapped with their GEMMs)" : ""));
  }
  if (l.cp > 1) {
    const Placement ring = place_group(l.cp, l.tp, g);
    r.notes.push_back(
        fmt::format("cp ring: {} ranks {} a node; K/V exchange hidden behind "
                    "attention where it is shorter",
                    l.cp, ring.nodes > 1 ? "across" : "within"));
  }
  if (l.ep > 1) {
    const Placement group = place_group(l.ep, l.expert_tp(), g);
    r.notes.push_back(fmt::format(
        "ep {}: {} ranks on {} node{} ({}); {} experts per rank; {}", to_string(l.moe_dispatcher),
        l.ep, group.nodes, group.nodes > 1 ? "s" : "",
        origin(comm.cost(Collective::all_to_all, 1 << 20, group, dt)), m.experts / l.ep,
        l.capacity_factor > 0
            ? fmt::format("each expert takes {} x its balanced share of tokens", l.capacity_factor)
            : std::string("routing balanced, dropless")));
  }
  if (m.is_moe()) {
    const MoeTokens t = moe_tokens(ctx, m);
    std::string kernels = fmt::format("permutation of {:.0f} rows", t.expert_rows);
    if (l.moe_dispatcher == Dispatcher::alltoall && t.local_experts > 1) {
      kernels += ", sort by local expert";
    }
    if (m.linear_bias) kernels += ", experts' output bias outside the GEMM";
    if (options.moe_glu_clamp && m.gated_mlp()) kernels += ", clamped GLU";
    if (t.fp8_pad_copy) kernels += ", FP8 padding copy";
    r.notes.push_back(fmt::format(
        "moe: {} local experts of {} rows each, one GEMM per expert, up to 4 at once (Transformer "
        "Engine's streams); {}; host-side launch and synchronisation overhead not priced",
        t.local_experts, t.rows_per_expert, kernels));
  }
  if (l.fp8 != Fp8::none) {
    r.notes.push_back(fmt::format(
        "fp8 ({}): linear layers' forward, dgrad and wgrad GEMMs in FP8 at {:.3g} of the model "
        "dtype's efficiency; attention, logits and router in {}; casts {:.3g} s per step{}",
        to_string(l.fp8), sys.efficiency_of("fp8"), codesign::to_string(m.dtype), b.fp8_casts,
        l.fp8_params ? "; FP8 weights" : "; FP8 weight copies cast once per step"));
  }
  if (!sys.elementwise_ns.empty()) {
    r.notes.push_back(
        fmt::format("element-wise kernels: the system's measured per-element rates ({} classes)",
                    sys.elementwise_ns.size()));
  }
  if (!p2p_source.empty()) r.notes.push_back("pipeline p2p: " + p2p_source);
  if (!dp_source.empty()) {
    // Which sizes the reduction was priced at, so that a table can be checked against them.
    // Each group of gradients (dense, experts) is bucketed and reduced on its own ranks.
    std::string sizes;
    for (const auto& red : r.dp_reductions) {
      if (!sizes.empty()) sizes += "; ";
      sizes += red.buckets <= 1
                   ? fmt::format("{} gradients: one {} of {:.4g} MB", red.gradients, red.collective,
                                 red.last_bucket_bytes / 1e6)
                   : fmt::format(
                         "{} gradients: {} buckets ({} x {:.4g} MB, last {:.4g} "
                         "MB), {} each",
                         red.gradients, red.buckets, red.buckets - 1, options.dp_bucket_bytes / 1e6,
                         red.last_bucket_bytes / 1e6, red.collective);
    }
    const std::string cap = options.dp_bucket_bytes > 0
                                ? fmt::format("--dp-bucket-mb {:g}", options.dp_bucket_bytes / 1e6)
                                : std::string("no bucketing");
    r.notes.push_back(fmt::format(
        "dp reduction: {} ({}); {}{}{}", sizes, cap, dp_source,
        l.distributed_optimizer && l.dp_overlap
            ? "; distributed optimizer: reduce-scatter and all-gather overlapped"
        : l.distributed_optimizer
            ? "; distributed optimizer: reduce-scatter and all-gather not overlapped (exposed)"
        : l.zero >= 3 ? "; ZeRO-3: per microbatch, with two all-gathers of the weights"
        : l.zero == 2 ? "; ZeRO-2: these buckets after every microbatch, one all-gather per step"
                      : "",
        l.dp_overlap && l.pp > 1 && l.interleave > 1
            ? "; interleaved: each model chunk's reduction starts after its last backward pass"
            : ""));
  }
  if (m.tied_embeddings && l.pp > 1) {
    r.notes.push_back(
        "dp reduction includes the tied-embedding all-reduce of the first and last stage");
  }
  r.notes.push_back(
      "memory leaves out the CUDA context, allocator caching and fragmentation, communication "
      "buffers (NCCL, userbuffers) and library workspaces: a few GiB per GPU");
  if (!mem.fits) {
    r.notes.push_back(fmt::format("does not fit: {:.1f} GiB needed, {:.1f} GiB per GPU",
                                  mem.total / (1 << 30), mem.capacity / (1 << 30)));
  }
}

}  // namespace mcr::plan::detail
