// The memory-bound kernels of a mixture-of-experts layer as Megatron-Core (its 26.04-alpha branch,
// nearest the NeMo 26.04 containers) and Transformer Engine (v2.14) run them: each priced by the
// bytes it reads and writes at the device's achievable bandwidth, plus one launch. Counts are per
// microbatch on one rank, for the tokens of MoeTokens (balanced routing).
#include "stage_cost.hpp"

namespace mcr::plan::detail {

namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

}  // namespace

void add_moe_kernels(const Context& c, const codesign::ModelShape& shape, const MoeTokens& t,
                     LayerCost& cost) {
  const Layout& l = c.layout;
  const SystemSpec& sys = c.comm.system();
  const double e = c.elem();
  const double row = as_double(shape.h) * e;  // one token's hidden state
  const auto both = [&](double fwd_bytes, int fwd_kernels, double bwd_bytes, int bwd_kernels) {
    cost.fwd_mem += memory_time(fwd_bytes, fwd_kernels, c.device, sys);
    cost.bwd_mem += memory_time(bwd_bytes, bwd_kernels, c.device, sys);
  };

  // Permutation (Transformer Engine's fused permute with a routing mask, triton/permutation.py):
  // one program per token reads its row once and writes it once per routed copy; unpermutation
  // reads the copies and writes one row per token (Megatron-Core applies the routing
  // probabilities in the experts' activation, so unpermute merges no probabilities). Three small
  // kernels build the row map from the T x E routing mask. The backward pass runs the same two
  // kernels the other way round. The all_to_all dispatcher permutes the rank's own tokens before
  // sending them; the flex dispatcher (HybridEP without moe_permute_fusion_into_hybridep)
  // permutes the rows it delivered, one per token and receiving rank, into the experts' rows.
  const bool flex = l.moe_dispatcher == Dispatcher::flex;
  const double permute = (flex ? t.delivered + t.expert_rows : t.own + t.own_copies) * row;
  both(2 * permute, 2 + 3, 2 * permute, 2);

  // Megatron-Core's all_to_all dispatcher receives the copies ordered by source rank, then by
  // expert, and sorts them by local expert (token_dispatcher.py dispatch_postprocess, "Permutation
  // 2"), and back before the combine (combine_preprocess): each reads and writes every row the
  // experts process, forward and backward. DeepEP and HybridEP (flex) deliver them grouped.
  if (!flex && t.local_experts > 1) {
    const double sort = 2 * t.expert_rows * row;
    both(2 * sort, 2, 2 * sort, 2);
  }

  // Router: the fused score function and top-k reads the rank's T x E logits and writes the
  // probabilities (and the routing mask); backward, the probabilities' gradient in, the logits'
  // out.
  const double router = 2 * e * t.own * as_double(shape.experts);
  both(router, 1, 2 * router, 1);

  // The experts' activation over their rows (Megatron-Core's weighted SwiGLU / GeGLU: the gated
  // input 2 d_e wide read, d_e written, the token's probability multiplied in), and the shared
  // experts' over every token.
  const double gate = shape.gated_mlp() ? 3 : 2;
  const auto add_act = [&](double elements) {
    const double bytes = gate * e * elements;
    const double f = kernel_time("activation", false, bytes, elements, 1, c.device, sys);
    cost.fwd_mem += f;
    cost.bwd_mem += kernel_time("activation", true, 2 * bytes, elements, 1, c.device, sys);
    return f;
  };
  const double ff = as_double(shape.expert_width() / l.expert_tp());
  cost.moe_act_fwd += add_act(t.expert_rows * ff);
  // A clamped GLU (gpt-oss) clamps its gate and linear halves and concatenates them again in
  // eager PyTorch before the fused kernel (fused_bias_geglu.py weighted_bias_quick_geglu_impl):
  // per element of one half, each clamp reads and writes it and the concatenation both halves,
  // 8 e. Backward: each clamp's gradient reads the gradient and the saved input and writes (3 e
  // each), and the split of the fused kernel's input gradient is concatenated (4 e). Recomputing
  // moe_act repeats the forward part.
  if (c.options.moe_glu_clamp && shape.gated_mlp()) {
    const double half = t.expert_rows * ff;
    const double f = memory_time(8 * e * half, 3, c.device, sys);
    cost.fwd_mem += f;
    cost.moe_act_fwd += f;
    cost.bwd_mem += memory_time(10 * e * half, 3, c.device, sys);
  }
  if (shape.d_ff_shared > 0) add_act(c.tokens() * as_double(shape.d_ff_shared) / l.tp);

  // Linear biases: linear_fc1's is added in the GEMM's epilogue, but linear_fc2 returns its bias
  // (skip_bias_add) and TEGroupedMLP adds it outside the GEMM (experts.py _apply_bias): per local
  // expert the bias times each token's probability (written), added to the expert's output (two
  // read, one written), then the experts' pieces concatenated (read, written): 6 e per element of
  // the rows x h, two kernels per expert and one. Backward: the bias's and the probability's
  // gradients, each a product (read, written) and a sum (read): 6 e, four kernels per expert.
  if (shape.linear_bias) {
    const double bias = 6 * e * t.expert_rows * as_double(shape.h);
    const int kernels = static_cast<int>(t.local_experts);
    both(bias, 2 * kernels + 1, bias, 4 * kernels);
  }

  // FP8 alignment (TEGroupedMLP's quantization_padding, Transformer Engine's Fp8Padding): the
  // experts' input is copied into rows padded per expert and their output copied back out
  // (fused_multi_row_padding / _unpadding), each a read and a write; the backward pass undoes
  // both. The GEMMs' M is the padded count (moe_tokens).
  if (t.fp8_pad_copy) {
    const double pad = 2 * 2 * t.expert_rows * row;
    both(pad, 2, pad, 2);
  }
}

}  // namespace mcr::plan::detail
