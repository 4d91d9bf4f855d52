#include <nlohmann/json.hpp>

#include "mcr/plan/planner.hpp"

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
                 {"sequence_parallel", l.sequence_parallel},
                 {"zero", l.zero},
                 {"dp_overlap", l.dp_overlap}};
  // Inputs that are not part of the model or the layout.
  j["inputs"] = {{"dp_bucket_bytes", r.dp_bucket_bytes}, {"dp_bucket_mb", r.dp_bucket_bytes / 1e6}};
  j["dp_reduction"] = {{"buckets", r.dp_buckets}, {"last_bucket_bytes", r.dp_last_bucket_bytes}};
  j["step_time_s"] = r.step_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["hfu"] = r.hfu;
  j["model_flops"] = r.model_flops;
  j["hardware_flops"] = r.hardware_flops;
  j["params"] = r.params;
  j["bubble_fraction"] = r.bubble_fraction;
  j["breakdown"] = {{"forward_gemm_s", b.forward_gemm},
                    {"backward_gemm_s", b.backward_gemm},
                    {"memory_bound_s", b.memory_bound},
                    {"recompute_s", b.recompute},
                    {"logits_embedding_s", b.logits_embedding},
                    {"tp_comm_s", b.tp_comm},
                    {"pp_comm_s", b.pp_comm},
                    {"bubble_s", b.bubble},
                    {"dp_comm_s", b.dp_comm},
                    {"optimizer_s", b.optimizer}};
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

}  // namespace mcr::plan
