// `mcr plan`'s layout and pricing flags; the planner's errors name these fields, and
// field_flags.cpp turns them back into the flags.
#include "plan_flags.hpp"

#include <CLI/CLI.hpp>

namespace mcr::cli {

void add_layout_flags(CLI::App* cmd, plan::PlanRequest& r) {
  cmd->add_option("--gpus", r.gpus, "GPUs used (default: tp*cp*pp*dp, or the whole system)");
  cmd->add_option("--pp", r.pp, "pipeline-parallel stages");
  cmd->add_option("--dp", r.dp, "data-parallel replicas (default: gpus / (tp*cp*pp))");
  cmd->add_option("--global-batch", r.global_batch,
                  "sequences per step (default: micro-batch x dp)");
  cmd->add_option("--interleave", r.interleave, "model chunks per stage (interleaved 1F1B)");
  cmd->add_option("--recompute", r.recompute, "activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  cmd->add_option("--recompute-modules", r.recompute_modules,
                  "what --recompute selective reruns: core_attn (default), layernorm, moe_act")
      ->delimiter(',')
      ->check(CLI::IsMember({"core_attn", "layernorm", "moe_act"}));
  cmd->add_flag("--sequence-parallel", r.sequence_parallel,
                "shard norms and dropout over the TP group (Megatron sequence parallelism)");
  cmd->add_option("--zero", r.zero, "ZeRO stage 0-3")->check(CLI::Range(0, 3));
  cmd->add_option("--cp", r.cp,
                  "context-parallel ranks (ring attention over s/cp tokens each; flash attention)");
  cmd->add_option("--ep", r.ep, "expert-parallel ranks (MoE experts spread by all_to_all)");
  cmd->add_option("--etp", r.etp, "expert tensor-parallel size (default: --tp)");
  cmd->add_option("--capacity-factor", r.capacity_factor,
                  "tokens per expert over the balanced share (padding or dropping); 0 = dropless")
      ->capture_default_str();
  cmd->add_option("--moe-dispatcher", r.moe_dispatcher,
                  "alltoall (one copy per routed expert) or flex (DeepEP/HybridEP: once per "
                  "remote node, forwarded over NVLink)")
      ->check(CLI::IsMember({"alltoall", "flex"}))
      ->capture_default_str();
  cmd->add_flag("--moe-glu-clamp", r.moe_glu_clamp,
                "the experts' gated activation clamps its inputs first (gpt-oss): two clamps and "
                "a concatenation priced before the fused kernel");
  cmd->add_option("--fp8", r.fp8,
                  "FP8 linear layers as Transformer Engine runs them: scaling recipe")
      ->check(CLI::IsMember({"none", "delayed", "current", "blockwise", "mxfp8"}));
  cmd->add_flag("--fp8-params", r.fp8_params, "weights kept in FP8 (no per-step weight cast)");
  cmd->add_flag("--distributed-optimizer", r.distributed_optimizer,
                "Megatron's distributed optimizer: gradients reduce-scattered and parameters "
                "all-gathered over dp x cp, overlapped; optimizer state sharded");
  cmd->add_flag("--tp-comm-overlap", r.tp_comm_overlap,
                "TP/SP collectives pipelined with their GEMMs (Transformer Engine userbuffers)");
  cmd->add_flag("--pp-comm-overlap", r.pp_comm_overlap,
                "pipeline sends and receives overlapped with compute");
  cmd->add_flag("--uneven-pipeline", r.uneven_pipeline,
                "layers need not divide pp x interleave (Megatron-Core pipeline layouts); each "
                "stage is priced at L/pp layers");
  cmd->add_option("--grad-dtype", r.grad_dtype,
                  "dtype of the gradient buffer and its reduction (default: the model's; "
                  "Megatron-LM accumulates bf16 models' gradients in fp32)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--optimizer-bytes", r.optimizer_bytes,
                  "optimizer state per parameter in bytes (Adam with fp32 master: 12)")
      ->capture_default_str();
  cmd->add_flag("--allow-tp-across-nodes", r.allow_tp_across_nodes,
                "accept a TP group larger than a node");
  cmd->add_flag_callback(
      "--no-dp-overlap", [&r] { r.dp_overlap = false; },
      "do not overlap the gradient reduction with the last backward pass");
  cmd->add_option("--dp-bucket-mb", r.dp_bucket_mb,
                  "gradient bucket of the data-parallel reduction in MB (10^6 bytes); each "
                  "bucket is priced at its own size")
      ->capture_default_str();
}

}  // namespace mcr::cli
