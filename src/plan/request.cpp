#include "mcr/plan/request.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "mcr/codesign/dtype.hpp"
#include "mcr/errors.hpp"
#include "option_rules.hpp"

namespace mcr::plan {

PlanOptions to_plan_options(const PlanRequest& r) {
  // Checked before anything is planned: a bad bucket would otherwise surface as a strange time.
  check_dp_bucket_mb("request.dp_bucket_mb", r.dp_bucket_mb);
  check_bytes_per_param("request.optimizer_bytes", r.optimizer_bytes);
  PlanOptions o;
  o.dp_bucket_bytes = r.dp_bucket_mb * 1e6;
  o.optimizer_bytes_per_param = r.optimizer_bytes;
  o.moe_glu_clamp = r.moe_glu_clamp;
  if (r.grad_dtype) {
    o.grad_dtype = codesign::parse_dtype(*r.grad_dtype);
    o.grad_bytes_per_param = codesign::dtype_bytes(*o.grad_dtype);
  }
  return o;
}

Layout to_layout(const PlanRequest& r) {
  Layout l;
  l.gpus = r.gpus.value_or(0);
  l.tp = r.tp.value_or(1);
  l.pp = r.pp.value_or(1);
  l.dp = r.dp.value_or(0);
  l.micro_batch = r.micro_batch.value_or(1);
  l.global_batch = r.global_batch.value_or(0);
  l.interleave = r.interleave.value_or(1);
  if (r.recompute) l.recompute = parse_recompute(*r.recompute);
  l.recompute_modules = r.recompute_modules;
  l.sequence_parallel = r.sequence_parallel;
  l.zero = r.zero.value_or(0);
  l.allow_tp_across_nodes = r.allow_tp_across_nodes;
  l.dp_overlap = r.dp_overlap;
  l.cp = r.cp.value_or(1);
  l.ep = r.ep.value_or(1);
  l.etp = r.etp.value_or(0);
  l.capacity_factor = r.capacity_factor;
  l.moe_dispatcher = parse_dispatcher(r.moe_dispatcher);
  if (r.fp8) l.fp8 = parse_fp8(*r.fp8);
  l.fp8_params = r.fp8_params;
  l.distributed_optimizer = r.distributed_optimizer;
  l.tp_comm_overlap = r.tp_comm_overlap;
  l.pp_comm_overlap = r.pp_comm_overlap;
  l.uneven_pipeline = r.uneven_pipeline;
  return l;
}

SearchSpace to_search_space(const PlanRequest& r, const SystemSpec& system) {
  SearchSpace s;
  s.gpus = r.gpus.value_or(system.total_gpus());
  // Every factor pinned and no --gpus: the layout's own GPUs, as a single plan reads it (not the
  // whole system, where dp would come out larger than the dp asked for).
  if (!r.gpus && r.tp && r.pp && r.dp) {
    long long pinned = 1;  // stops past the system's GPUs (the search then says why)
    for (const int factor : {*r.tp, r.cp.value_or(1), *r.pp, *r.dp}) {
      if (factor < 1 || pinned > system.total_gpus()) break;
      pinned *= factor;
    }
    if (pinned <= system.total_gpus()) s.gpus = static_cast<int>(pinned);
  }
  s.global_batch = r.global_batch.value_or(0);
  if (r.tp) s.tp = {*r.tp};
  if (r.pp) s.pp = {*r.pp};
  if (r.dp) s.dp = {*r.dp};
  if (r.micro_batch) s.micro_batch = {*r.micro_batch};
  if (r.interleave) s.interleave = {*r.interleave};
  if (r.recompute) s.recompute = {parse_recompute(*r.recompute)};
  s.recompute_modules = r.recompute_modules;
  if (r.sequence_parallel) s.sequence_parallel = {true};
  if (r.zero) s.zero = {*r.zero};
  s.allow_tp_across_nodes = r.allow_tp_across_nodes;
  s.dp_overlap = r.dp_overlap;
  if (r.cp) s.cp = {*r.cp};
  if (r.ep) s.ep = {*r.ep};
  s.etp = r.etp.value_or(0);
  s.capacity_factor = r.capacity_factor;
  s.moe_dispatcher = parse_dispatcher(r.moe_dispatcher);
  if (r.fp8) s.fp8 = parse_fp8(*r.fp8);
  s.uneven_pipeline = r.uneven_pipeline;
  s.fp8_params = r.fp8_params;
  if (r.distributed_optimizer) s.distributed_optimizer = {true};
  s.tp_comm_overlap = r.tp_comm_overlap;
  s.pp_comm_overlap = r.pp_comm_overlap;
  return s;
}

CommModel make_comm_model(const SystemSpec& system, const codesign::DeviceSpec& device,
                          const std::vector<std::string>& tables, const std::string& rules) {
  CommModel comm(system, device.vendor != "cpu");
  for (const auto& arg : tables) {
    auto [tier, path] = parse_table_argument(arg);
    try {
      comm.add_table(tier, TuningTable::load(path));
    } catch (const InvalidArgument& e) {
      // Named by the argument (the message named the path alone), with the tiers where a prefix
      // that is not one was read as part of the file's name.
      const auto eq = arg.find('=');
      const std::string hint =
          tier == Tier::any && eq != std::string::npos && eq > 0 && !std::filesystem::exists(arg)
              ? fmt::format(" ('{}=' is not a tier: give FILE, intra=FILE or inter=FILE)",
                            arg.substr(0, eq))
              : "";
      throw InvalidArgument(fmt::format("comm.tables '{}': {}{}", arg, e.what(), hint));
    }
  }
  if (!rules.empty()) comm.set_rules(RuleSet::parse(rules));
  return comm;
}

}  // namespace mcr::plan
