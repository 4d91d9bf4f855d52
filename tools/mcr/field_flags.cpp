#include "field_flags.hpp"

#include <cctype>
#include <utility>

namespace mcr::cli {
namespace {

// The fields and terms that library errors name, each with the flag that sets it. One name serves
// every command that sets the field with the same flag (options.dtypes: mcr bench and mcr tune both
// take --dtype); fields set by different flags have different names (sweep.backends is --backend,
// tune.backends --backends).
constexpr std::pair<std::string_view, std::string_view> kFieldFlags[] = {
    // mcr::plan: the layout's fields, and the model's terms the planner's errors use.
    {"layout.gpus", "--gpus"},
    {"layout.tp", "--tp"},
    {"layout.pp", "--pp"},
    {"layout.dp", "--dp"},
    {"layout.cp", "--cp"},
    {"layout.ep", "--ep"},
    {"layout.etp", "--etp"},
    {"layout.micro_batch", "--micro-batch"},
    {"layout.global_batch", "--global-batch"},
    {"layout.interleave", "--interleave"},
    {"layout.zero", "--zero"},
    {"layout.recompute", "--recompute"},
    {"layout.recompute_modules", "--recompute-modules"},
    {"layout.sequence_parallel", "--sequence-parallel"},
    {"layout.allow_tp_across_nodes", "--allow-tp-across-nodes"},
    {"layout.uneven_pipeline", "--uneven-pipeline"},
    {"layout.fp8", "--fp8"},
    {"layout.fp8_params", "--fp8-params"},
    {"layout.distributed_optimizer", "--distributed-optimizer"},
    {"layout.tp_comm_overlap", "--tp-comm-overlap"},
    {"layout.moe_dispatcher", "--moe-dispatcher"},
    {"layout.capacity_factor", "--capacity-factor"},
    {"model.heads", "--heads"},
    {"model.kv_heads", "--kv-heads"},
    {"model.ffn", "--ffn"},
    {"model.layers", "--layers"},
    // mcr::codesign: the model's terms (ModelShape::validate), the memory layout
    // (ParallelLayout), the advisor, the shape sweep and the catalogs' names.
    {"model.name", "--preset"},
    {"model.hidden", "--hidden"},
    {"model.vocab", "--vocab"},
    {"model.seq", "--seq"},
    {"model.micro_batch", "--micro-batch"},
    {"model.tp", "--tp"},
    {"model.experts", "--experts"},
    {"model.top_k", "--top-k"},
    {"model.config", "--config"},
    {"model.dtype", "--dtype"},
    {"layout.zero_stage", "--zero"},
    {"layout.generated_tokens", "--gen-tokens"},
    {"advisor.tp_sizes", "--tp-sizes"},
    {"advisor.uncertainty", "--uncertainty"},
    {"advisor.budget", "--budget"},
    {"advisor.top", "--top"},
    {"advisor.min_head_dim", "--min-head-dim"},
    {"advisor.max_head_dim", "--max-head-dim"},
    {"sweep.step", "--step"},
    {"sweep.from", "--from"},
    {"sweep.to", "--to"},
    {"device.name", "--device"},
    {"system.name", "--system"},
    {"space.gpus", "--gpus"},
    {"space.global_batch", "--global-batch"},
    {"space.distributed_optimizer", "--distributed-optimizer"},
    {"space.zero", "--zero"},
    {"space.recompute_modules", "--recompute-modules"},
    {"space.recompute", "--recompute"},
    {"calibration.fixed", "--fix"},
    // mcr::plan::PlanRequest (mcr plan).
    {"request.dp_bucket_mb", "--dp-bucket-mb"},
    {"request.optimizer_bytes", "--optimizer-bytes"},
    {"comm.tables", "--comm-table"},
    // mcr::codesign::bench::GemmRequest (mcr gemm).
    {"request.m", "-m"},
    {"request.n", "-n"},
    {"request.k", "-k"},
    {"request.batch", "--batch"},
    {"request.dtypes", "--dtype"},
    {"request.presets", "--preset"},
    {"request.models", "--model"},
    {"request.threads", "--threads"},
    {"request.device", "--device"},
    {"request.compare", "--compare"},
    {"request.measure.clock", "--clock"},
    {"request.measure.min_samples", "--min-samples"},
    {"request.measure.max_samples", "--max-samples"},
    {"request.measure.min_seconds", "--min-time"},
    {"request.measure.max_seconds", "--max-time"},
    {"request.measure.warmup_iterations", "--warmup"},
    {"request.measure.warmup_seconds", "--warmup-time"},
    {"request.seq", "--seq"},
    {"request.micro_batch", "--micro-batch"},
    {"request.tp", "--tp"},
    {"request.training", "--training"},
    {"request.backend", "--backend"},
    // mcr::bench: options.* for the fields the sweep (mcr bench), the comparison (--compare-auto)
    // and tuning (mcr tune) share; sweep.*, compare.*, tune.*, replay.* for their own.
    {"options.ops", "--op"},
    {"options.sizes", "-b/-e/--sizes"},
    {"options.dtypes", "--dtype"},
    {"options.root", "--root"},
    {"options.reduce", "--reduce"},
    {"options.device", "--device"},
    {"sweep.place", "--place"},
    {"sweep.iterations", "-n"},
    {"sweep.warmup", "-w"},
    {"sweep.min_time_s", "--min-time"},
    {"sweep.backends", "--backend"},
    {"sweep.time", "--time"},
    {"compare.repetitions", "--reps"},
    {"compare.warmup", "-w"},
    {"compare.min_ratio", "--min-ratio"},
    {"compare.precision", "--precision"},
    {"compare.extra_budget_s", "--extra-budget"},
    {"tune.backends", "--backends"},
    {"tune.forms", "--form"},
    {"tune.in_place", "--place"},
    {"tune.in_flight", "--in-flight"},
    {"tune.repetitions", "--reps"},
    {"tune.budget_ms", "--budget-ms"},
    {"tune.hysteresis", "--hysteresis"},
    {"refine.min_ops", "--min-ops"},
    {"refine.hysteresis", "--hysteresis"},
    {"replay.policies", "--backend"},
    {"replay.repetitions", "--reps"},
    {"replay.warmup", "--warmup"},
    {"replay.scale", "--scale"},
};

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

std::string with_flag_names(std::string_view message) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    bool replaced = false;
    if (i == 0 || !identifier_char(message[i - 1])) {
      for (const auto& [field, flag] : kFieldFlags) {
        const std::size_t end = i + field.size();
        // Whole names only: layout.recompute is not the start of layout.recompute_modules.
        if (message.compare(i, field.size(), field) == 0 &&
            (end == message.size() || !identifier_char(message[end]))) {
          out += flag;
          i = end;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += message[i++];
  }
  return out;
}

}  // namespace mcr::cli
