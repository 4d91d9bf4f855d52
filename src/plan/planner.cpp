#include "mcr/plan/planner.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <string>

#include "mcr/codesign/calculators.hpp"
#include "mcr/errors.hpp"
#include "stage_cost.hpp"

namespace mcr::plan {

namespace {
double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

}  // namespace

namespace {

constexpr BreakdownTerm kTerms[] = {
    {&Breakdown::forward_gemm, "forward_gemm", "forward GEMMs", nullptr},
    {&Breakdown::backward_gemm, "backward_gemm", "backward GEMMs", nullptr},
    {&Breakdown::memory_bound, "memory_bound", "memory-bound kernels", nullptr},
    {&Breakdown::fp8_casts, "fp8_casts", "FP8 casts",
     [](const Layout& l) { return l.fp8 != Fp8::none; }},
    {&Breakdown::recompute, "recompute", "recomputation", nullptr},
    {&Breakdown::logits_embedding, "logits_embedding", "embedding and logits", nullptr},
    {&Breakdown::tp_comm, "tp_comm", "TP/SP collectives", nullptr},
    {&Breakdown::cp_comm, "cp_comm", "CP K/V exchange", [](const Layout& l) { return l.cp > 1; }},
    {&Breakdown::ep_comm, "ep_comm", "EP all_to_all", [](const Layout& l) { return l.ep > 1; }},
    {&Breakdown::pp_comm, "pp_comm", "pipeline p2p", nullptr},
    {&Breakdown::bubble, "bubble", "pipeline bubble", nullptr},
    {&Breakdown::dp_comm, "dp_comm", "DP reduction (exposed)", nullptr},
    {&Breakdown::optimizer, "optimizer", "optimizer step", nullptr},
};
// A Breakdown field without a row here would be left out of the total and of every output.
static_assert(sizeof(Breakdown) == std::size(kTerms) * sizeof(double),
              "every Breakdown field needs a row in kTerms");

}  // namespace

std::span<const BreakdownTerm> breakdown_terms() noexcept {
  return kTerms;
}

double Breakdown::total() const {
  double sum = 0;
  for (const BreakdownTerm& t : breakdown_terms())
    sum += this->*t.field;
  return sum;
}

double bubble_fraction(int pp, std::int64_t microbatches, int interleave) {
  if (pp <= 1 || microbatches <= 0) return 0;
  return (pp - 1.0) / (as_double(microbatches) * std::max(1, interleave));
}

namespace {
/// The NVIDIA compute capability an arch names ("hopper sm90": 90), 0 when it names none.
int sm_version(const std::string& arch) {
  for (std::size_t at = arch.find("sm"); at != std::string::npos; at = arch.find("sm", at + 1)) {
    std::size_t digits = at + 2;
    if (digits < arch.size() && arch[digits] == '_') ++digits;  // "sm_90" as well as "sm90"
    std::size_t end = digits;
    while (end < arch.size() && std::isdigit(static_cast<unsigned char>(arch[end])) != 0)
      ++end;
    if (end > digits) return std::stoi(arch.substr(digits, end - digits));
  }
  return 0;
}
}  // namespace

codesign::DType peak_dtype(codesign::DType model, Fp8 recipe) {
  return recipe != Fp8::none || model == codesign::DType::fp8 ? codesign::DType::fp8 : model;
}

PlanResult plan_step(const codesign::ModelShape& model, const codesign::DeviceSpec& catalog_device,
                     const CommModel& comm, const Layout& layout, const PlanOptions& options) {
  Layout l = layout;
  codesign::ModelShape m = model;
  m.t = l.tp;
  m.b = l.micro_batch;
  std::vector<std::string> notes;
  // An FP8 model is trained as Transformer Engine does it: 16-bit weights and activations, the
  // linear layers' GEMMs in FP8.
  bool fp8_implied = false;
  if (m.dtype == codesign::DType::fp8) {
    m.dtype = codesign::DType::bf16;
    fp8_implied = l.fp8 == Fp8::none;
    if (fp8_implied) l.fp8 = Fp8::delayed;
    notes.push_back(fmt::format(
        "dtype fp8: trained as bf16 with FP8 linear layers (fp8 recipe '{}')", to_string(l.fp8)));
  }
  // GEMMs inside a training step run at the system's sustained fraction of the single-GEMM model;
  // FP8 GEMMs at the system's further FP8 factor.
  const SystemSpec& sys = comm.system();
  codesign::DeviceSpec device = catalog_device;
  device.efficiency.peak_fraction *= sys.compute_efficiency;
  codesign::DeviceSpec fp8_device = device;
  fp8_device.efficiency.peak_fraction *= sys.efficiency_of("fp8");
  if (auto e = layout_error(l, m, sys); !e.empty()) throw InvalidArgument(e);
  if (l.fp8 != Fp8::none && !device.supports(codesign::DType::fp8)) {
    throw InvalidArgument(
        fmt::format("layout.fp8 {}{}: device '{}' has no FP8 peak (peak_tflops.fp8 in its "
                    "catalog entry): FP8 GEMMs cannot be priced on it",
                    to_string(l.fp8), fp8_implied ? " (set by model.dtype fp8)" : "", device.name));
  }
  if (l.fp8 == Fp8::mxfp8) {
    // Transformer Engine's MXFP8 recipe runs on Blackwell's block-scaled tensor cores only.
    if (const int sm = sm_version(device.arch); sm > 0 && sm < 100) {
      throw InvalidArgument(
          fmt::format("layout.fp8 mxfp8: device '{}' is {} (arch in its catalog entry), and MXFP8 "
                      "needs Blackwell (sm100 or later): use delayed, current or blockwise there",
                      device.name, device.arch));
    }
  }
  m.validate();

  PlanResult r;
  r.model = m;
  r.layout = l;
  r.device = device.name;
  r.system = sys.name;
  r.dp_bucket_bytes = options.dp_bucket_bytes;
  r.moe_glu_clamp = options.moe_glu_clamp;
  r.notes = std::move(notes);
  const detail::Context ctx{m, device, fp8_device, comm, l, options};
  const auto c = detail::layer_cost(ctx);
  const auto ends = detail::ends_cost(ctx);
  const double mb = as_double(l.microbatches());
  const double n_l = as_double(m.L) / l.pp;
  const double e = codesign::dtype_bytes(m.dtype);
  const DType dt = detail::comm_dtype(m.dtype);
  const int g = sys.gpus_per_node;

  // One microbatch on one stage.
  const double fwd = n_l * (c.fwd_gemm + c.fwd_mem + c.fp8_fwd + c.tp_fwd + c.cp_fwd + c.ep_fwd);
  const double bwd = n_l * (c.bwd_gemm + c.bwd_mem + c.fp8_bwd + c.tp_bwd + c.cp_bwd + c.ep_bwd);
  double rec = 0;
  if (l.recompute == Recompute::full) rec = fwd;
  if (l.recomputes("core_attn")) rec += n_l * (c.attn_core_fwd + c.attn_mem_fwd + c.cp_fwd);
  if (l.recomputes("layernorm")) rec += n_l * c.norm_fwd;
  if (l.recomputes("moe_act")) rec += n_l * c.moe_act_fwd;
  // Pipeline transfers: the b*s/cp*h activation, split over the TP ranks (Megatron's scatter/gather
  // optimisation; with sequence parallelism it is split already), once forward and once backward
  // per model chunk; hidden behind compute when overlapped.
  double p2p = 0;
  std::string p2p_source;
  if (l.pp > 1) {
    const Placement pipe = place_group(l.pp, l.tp * l.cp * l.dp, g);
    const Placement pair{2, pipe.nodes > 1 ? 1 : 2, pipe.nodes > 1 ? 2 : 1};
    const double bytes = ctx.tokens() * as_double(m.h) * e / l.tp;
    const auto cost = comm.cost(Collective::p2p, bytes, pair, dt);
    p2p = l.pp_comm_overlap ? 0.0 : 2.0 * l.interleave * cost.time_s;
    p2p_source = detail::origin(cost) + (l.pp_comm_overlap ? " (overlapped with compute)" : "");
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
  b.fp8_casts = mb * n_l * (c.fp8_fwd + c.fp8_bwd);
  b.recompute = mb * rec;
  b.tp_comm = mb * n_l * (c.tp_fwd + c.tp_bwd);
  b.cp_comm = mb * n_l * (c.cp_fwd + c.cp_bwd);
  b.ep_comm = mb * n_l * (c.ep_fwd + c.ep_bwd);
  b.pp_comm = mb * p2p;
  // An uneven pipeline layout gives the embedding and the loss their own share of a stage, so that
  // the stages balance; otherwise the first and last stage carry them on top of their layers.
  const double ends_total = ends.embedding + ends.logits_gemm + ends.cross_entropy;
  b.logits_embedding = l.uneven_pipeline && l.pp > 1 ? mb * ends_total / l.pp
                                                     : mb * std::max(first_extra, last_extra);
  b.bubble = fill * t_avg;
  r.embedding_s = ends.embedding;
  r.logits_gemm_s = ends.logits_gemm;
  r.cross_entropy_s = ends.cross_entropy;

  // Data parallelism, and tied embeddings on different stages (the first and last stage sum their
  // gradients).
  codesign::ModelShape whole = m;
  whole.t = 1;
  r.params = codesign::count_parameters(whole).total;
  const MemoryBreakdown mem = plan_memory(m, device, l, options);
  const auto params = detail::stage_params(m, l);
  const auto dp = detail::data_parallel(ctx, params, fwd, bwd + rec);
  r.dp_reductions = dp.reductions;
  for (const auto& red : dp.reductions)
    r.dp_buckets += red.buckets;
  double dp_exposed = dp.exposed;
  const double grad = detail::gradient_bytes(options, m.dtype);
  if (m.tied_embeddings && l.pp > 1) {
    // The embedding's gradient, shared by the first and the last stage, in the gradients' width.
    const Placement pipe = place_group(l.pp, l.tp * l.cp * l.dp, g);
    const Placement pair{2, pipe.nodes > 1 ? 1 : 2, pipe.nodes > 1 ? 2 : 1};
    const double bytes = as_double(m.v) * as_double(m.h) / l.tp * grad;
    dp_exposed += comm.cost(Collective::all_reduce, bytes, pair,
                            detail::gradient_comm_dtype(options, m.dtype))
                      .time_s;
  }
  b.dp_comm = dp_exposed;
  // The optimizer on the local shard: read the gradient and its states (Adam: master, m and v, 12
  // bytes), write the states and the low-precision weights. The states' bytes are the option's,
  // as in memory (24 fixed priced Adam for --optimizer-bytes 6 or 0 too).
  const bool shard = l.zero >= 1 || l.distributed_optimizer;
  const double local = params.dense / (shard ? l.dense_replicas() : 1) +
                       params.expert / (shard ? std::max(1, l.expert_replicas()) : 1);
  b.optimizer = detail::kernel_time("optimizer", false,
                                    local * (grad + e + 2 * options.optimizer_bytes_per_param),
                                    local, 4, device, sys);

  r.step_time_s = b.total();
  r.bubble_fraction = bubble_fraction(l.pp, l.microbatches(), l.interleave);
  r.memory = mem;

  // FLOPs: the model's (3 x forward, logits included; attention over every score, as Megatron-LM
  // and NeMo count it, and with causal masking's half) and the hardware's (plus recomputation).
  const double tokens = as_double(l.global_batch) * as_double(m.s);
  whole.b = 1;
  const auto fc = codesign::count_flops(whole);
  r.model_flops = fc.forward_per_token * tokens * 3;
  const double ranks_per_microbatch = as_double(l.gpus) / l.dp;  // one microbatch's ranks
  r.model_flops_causal =
      r.model_flops - 3 * c.causal_saving_flops * n_l * ranks_per_microbatch * mb * l.dp;
  double recompute_flops = 0;
  if (l.recompute == Recompute::full) recompute_flops = c.fwd_flops * n_l * mb * l.gpus;
  if (l.recomputes("core_attn")) recompute_flops = c.attn_core_flops * n_l * mb * l.gpus;
  r.hardware_flops = r.model_flops + recompute_flops;
  r.tokens_per_s = tokens / r.step_time_s;
  r.tokens_per_s_per_gpu = r.tokens_per_s / l.gpus;
  r.tflops_per_gpu = r.hardware_flops / r.step_time_s / l.gpus / 1e12;
  r.model_tflops_per_gpu = r.model_flops / r.step_time_s / l.gpus / 1e12;
  r.peak_tflops = device.peak_for(peak_dtype(m.dtype, l.fp8));
  r.mfu = r.model_tflops_per_gpu / r.peak_tflops;
  r.mfu_causal = r.model_flops_causal / r.step_time_s / l.gpus / 1e12 / r.peak_tflops;
  r.hfu = r.tflops_per_gpu / r.peak_tflops;

  detail::add_notes(r, ctx, dp.source, p2p_source);
  return r;
}

}  // namespace mcr::plan
