#include <nlohmann/json.hpp>

#include "mcr/plan/planner.hpp"
#include "mcr/plan/search.hpp"
#include "mcr/plan/validation.hpp"

namespace mcr::plan {

nlohmann::json to_json(const PlanResult& r) {
  const Layout& l = r.layout;
  const Breakdown& b = r.breakdown;
  const MemoryBreakdown& m = r.memory;
  nlohmann::json j;
  j["model"] = r.model;
  j["device"] = r.device;
  j["system"] = r.system;
  j["layout"] = {{"gpus", l.gpus},
                 {"tp", l.tp},
                 {"pp", l.pp},
                 {"dp", l.dp},
                 {"micro_batch", l.micro_batch},
                 {"global_batch", l.global_batch},
                 {"microbatches", l.microbatches()},
                 {"interleave", l.interleave},
                 {"recompute", to_string(l.recompute)},
                 {"recompute_modules", l.recompute_modules},
                 {"sequence_parallel", l.sequence_parallel},
                 {"zero", l.zero},
                 {"dp_overlap", l.dp_overlap},
                 {"allow_tp_across_nodes", l.allow_tp_across_nodes},
                 {"cp", l.cp},
                 {"ep", l.ep},
                 // What layout_from_json reads back: a dense model has no expert TP (0; its
                 // tp there was refused as "etp needs a mixture-of-experts model").
                 {"etp", r.model.is_moe() ? l.expert_tp() : 0},
                 {"capacity_factor", l.capacity_factor},
                 {"moe_dispatcher", to_string(l.moe_dispatcher)},
                 {"fp8", to_string(l.fp8)},
                 {"fp8_params", l.fp8_params},
                 {"distributed_optimizer", l.distributed_optimizer},
                 {"tp_comm_overlap", l.tp_comm_overlap},
                 {"pp_comm_overlap", l.pp_comm_overlap},
                 {"uneven_pipeline", l.uneven_pipeline}};
  // Inputs that are not part of the model or the layout.
  j["inputs"] = {{"dp_bucket_bytes", r.dp_bucket_bytes},
                 {"dp_bucket_mb", r.dp_bucket_bytes / 1e6},
                 {"moe_glu_clamp", r.moe_glu_clamp}};
  // last_bucket_bytes: the dense gradients' last bucket, as earlier versions gave it (0 when the
  // dense parameters are not data-parallel); every group's is in `groups`.
  auto groups = nlohmann::json::array();
  double dense_last = 0;
  for (const auto& red : r.dp_reductions) {
    groups.push_back({{"gradients", red.gradients},
                      {"collective", red.collective},
                      {"bytes", red.bytes},
                      {"buckets", red.buckets},
                      {"last_bucket_bytes", red.last_bucket_bytes}});
    if (red.gradients == "dense") dense_last = red.last_bucket_bytes;
  }
  j["dp_reduction"] = {
      {"buckets", r.dp_buckets}, {"last_bucket_bytes", dense_last}, {"groups", std::move(groups)}};
  j["step_time_s"] = r.step_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["mfu_causal"] = r.mfu_causal;
  j["hfu"] = r.hfu;
  j["peak_tflops"] = r.peak_tflops;
  j["model_flops"] = r.model_flops;
  j["model_flops_causal"] = r.model_flops_causal;
  j["flops_convention"] =
      "model_flops counts 3 x the forward GEMMs with attention over all s x s scores (Megatron-LM "
      "and NeMo's model TFLOP/s); model_flops_causal halves the causal layers' scores; mfu and "
      "hfu divide by peak_tflops (FP8's under an FP8 recipe)";
  j["hardware_flops"] = r.hardware_flops;
  j["params"] = r.params;
  j["bubble_fraction"] = r.bubble_fraction;
  j["breakdown"] = nlohmann::json::object();
  for (const BreakdownTerm& t : breakdown_terms())
    j["breakdown"][std::string(t.key) + "_s"] = b.*t.field;
  j["ends_per_microbatch"] = {{"embedding_s", r.embedding_s},
                              {"logits_gemm_s", r.logits_gemm_s},
                              {"cross_entropy_s", r.cross_entropy_s}};
  j["memory_per_gpu_bytes"] = m.total;
  j["memory"] = {{"weights_bytes", m.weights},     {"gradients_bytes", m.gradients},
                 {"optimizer_bytes", m.optimizer}, {"activations_bytes", m.activations},
                 {"buffers_bytes", m.buffers},     {"total_bytes", m.total},
                 {"capacity_bytes", m.capacity},   {"fits", m.fits}};
  j["notes"] = r.notes;
  return j;
}

nlohmann::json peak_to_json(const codesign::DeviceSpec& device, codesign::DType dtype) {
  nlohmann::json j{{"dtype", codesign::to_string(dtype)},
                   {"source", codesign::peak_source(device, dtype)}};
  j["tflops"] = device.supports(dtype) ? nlohmann::json(device.peak_for(dtype)) : nlohmann::json();
  return j;
}

nlohmann::json to_json(const SearchResult& found, double seconds) {
  nlohmann::json j;
  j["evaluated"] = found.evaluated;
  j["rejected"] = found.rejected;
  j["first_rejection"] = found.first_rejection;
  j["out_of_memory"] = found.out_of_memory;
  j["seconds"] = seconds;
  j["ranked"] = nlohmann::json::array();
  for (const auto& r : found.ranked)
    j["ranked"].push_back(to_json(r));
  j["too_big"] = nlohmann::json::array();
  for (const auto& r : found.too_big)
    j["too_big"].push_back(to_json(r));
  return j;
}

nlohmann::json to_json(const PlanResult& r, const codesign::DeviceSpec& device,
                       codesign::DType dtype) {
  auto j = to_json(r);
  j["device_peak"] = peak_to_json(device, peak_dtype(dtype, r.layout.fp8));
  return j;
}

nlohmann::json to_json(const SearchResult& found, double seconds,
                       const codesign::DeviceSpec& device, codesign::DType dtype) {
  auto j = to_json(found, seconds);
  j["device_peak"] = peak_to_json(device, dtype);
  return j;
}

nlohmann::json to_json(const std::vector<AdvisedPair>& pairs) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : pairs) {
    auto r = to_json(p.best);
    r["changes"] = p.shape.changes;
    r["param_delta"] = p.shape.param_delta;
    j.push_back(std::move(r));
  }
  return j;
}

nlohmann::json to_json(const std::vector<ValidationRow>& rows) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : rows) {
    runs.push_back({{"name", r.run.name},
                    {"source", r.run.source},
                    {"assumptions", r.run.assumptions},
                    {"quantity", r.quantity},
                    {"published", r.published},
                    {"predicted", r.prediction},
                    {"error", r.error},
                    {"step_error", r.step_error},
                    {"plan", to_json(r.predicted)}});
  }
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& g : summarize(rows)) {
    summary.push_back({{"group", g.group},
                       {"runs", g.runs},
                       {"mean_abs_step_error", g.mean_abs},
                       {"max_abs_step_error", g.max_abs},
                       {"mean_step_error", g.mean}});
  }
  return {{"runs", runs}, {"summary", summary}};
}

}  // namespace mcr::plan
