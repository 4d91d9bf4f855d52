// FLOP and memory calculators against hand-derived values.
#include <gtest/gtest.h>

#include <string>

#include "mcr/codesign/analysis.hpp"
#include "mcr/codesign/calculators.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

TEST(Flops, MegatronFormulaForGpt3) {
  // Narayanan et al. 2021, eq. 3 without recomputation: 72 B s L h^2 (1 + s/(6h) + v/(12 L h)) per
  // iteration of B sequences (forward + backward = 3 x forward; forward = 24 B s L h^2 (...)).
  const ModelShape m = load_preset("gpt3-175b");
  const double B = 1, s = 2048, L = 96, h = 12288, v = 50257;
  const double megatron = 72 * B * s * L * h * h * (1 + s / (6 * h) + v / (12 * L * h));
  EXPECT_NEAR(count_flops(m).training_per_step / megatron, 1.0, 1e-12);
  // With full recomputation (eq. 3 as printed): the layers' forward runs again, the logits' not.
  const double recomputed = 96 * B * s * L * h * h * (1 + s / (6 * h) + v / (16 * L * h));
  EXPECT_NEAR(count_flops(m).training_recompute_per_step / recomputed, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(training_flops(m, 2048, false), count_flops(m).training_per_step);
  EXPECT_DOUBLE_EQ(training_flops(m, 2048, true), count_flops(m).training_recompute_per_step);
}

// The routed experts' FLOPs are those of the b*s*top_k copies: at 5 tokens Mixtral's 10 copies
// over 8 experts were counted as 2 tokens for each of the 8 (16), 53 % too many FLOPs per token.
// Per token, everything but attention (which grows with s) is the same at 4 and 5 tokens.
TEST(Flops, RoutedExpertsCountTheirCopiesExactly) {
  const auto per_token_without_attention = [](std::int64_t s) {
    ModelShape m = load_preset("mixtral-8x7b");
    m.b = 1;
    m.s = s;
    double attention = 0;
    for (const Gemm& g : layer_gemms(m, false, 0)) {
      if (g.role == "attn_flash" || g.role == "attn_score" || g.role == "attn_over_value")
        attention += g.flops() * static_cast<double>(m.L);
    }
    return (count_flops(m).forward_per_step - attention) / static_cast<double>(s);
  };
  EXPECT_NEAR(per_token_without_attention(5) / per_token_without_attention(4), 1.0, 1e-12);
}

// MFU and model TFLOP/s count the model's FLOPs, not what each GPU executes: at t = 2 Mixtral's
// router runs on both GPUs, and each expert is given the busiest one's tokens.
TEST(Flops, ModelThroughputCountsTheModelsFlops) {
  ModelShape m = load_preset("mixtral-8x7b");
  m.t = 2;
  m.s = 1000;  // 2000 copies over 8 experts: even; the router's duplicate stays
  const DeviceSpec d = device_from_catalog("h100-sxm");
  for (const bool training : {false, true}) {
    const AnalysisTotals t = analyze(m, d, training).totals;
    const double model = count_flops(m).forward_per_step * (training ? 3.0 : 1.0) / 2.0;
    EXPECT_NEAR(t.model_tflops * 1e12 * t.step_time_s / model, 1.0, 1e-9) << training;
    EXPECT_GT(t.step_flops, model) << "the router's replica is executed, not the model's";
    EXPECT_NEAR(t.mfu, t.model_tflops / d.peak_for(m.dtype), 1e-12);
  }
}

TEST(Flops, TensorParallelDoesNotChangeModelFlops) {
  ModelShape m = load_preset("llama-2-13b");
  const double one = count_flops(m).forward_per_step;
  m.t = 8;
  EXPECT_DOUBLE_EQ(count_flops(m).forward_per_step, one);
}

TEST(Memory, ModelStatesShardByTpPpAndZero) {
  const ModelShape m = load_preset("llama-2-7b");
  const double P = count_parameters(m).total;
  ParallelLayout l;
  l.dp = 8;
  MemoryEstimate e = training_memory(m, l);
  EXPECT_DOUBLE_EQ(e.weights, 2 * P);
  EXPECT_DOUBLE_EQ(e.gradients, 4 * P);
  EXPECT_DOUBLE_EQ(e.optimizer, 12 * P);
  l.zero_stage = 1;
  EXPECT_DOUBLE_EQ(training_memory(m, l).optimizer, 12 * P / 8);
  EXPECT_DOUBLE_EQ(training_memory(m, l).gradients, 4 * P);
  l.zero_stage = 2;
  EXPECT_DOUBLE_EQ(training_memory(m, l).gradients, 4 * P / 8);
  l.zero_stage = 3;
  EXPECT_DOUBLE_EQ(training_memory(m, l).weights, 2 * P / 8);
  // The cookbook forgets t*pp for gradients and optimizer state; here every model-state term
  // shards.
  ModelShape tp = m;
  tp.t = 2;
  l.zero_stage = 0;
  l.pp = 2;
  e = training_memory(tp, l);
  EXPECT_DOUBLE_EQ(e.gradients, 4 * P / 4);
  EXPECT_DOUBLE_EQ(e.optimizer, 12 * P / 4);
  l.zero_stage = 4;
  EXPECT_THROW(training_memory(m, l), InvalidArgument);
  // More pipeline stages than layers: refused, naming both (the planner refuses it too).
  l.zero_stage = 0;
  l.pp = m.L + 1;
  for (const bool training : {true, false}) {
    try {
      (void)(training ? training_memory(m, l) : inference_memory(m, l));
      ADD_FAILURE() << "pp " << l.pp << " > L " << m.L << " accepted";
    } catch (const InvalidArgument& err) {
      EXPECT_NE(std::string(err.what()).find("exceeds the model's"), std::string::npos)
          << err.what();
    }
  }
  l.pp = m.L;
  EXPECT_NO_THROW(training_memory(m, l));
}

TEST(Memory, KorthikantiActivations) {
  // MHA, GeLU, d_ff = 4h, t = 1, no recomputation: s b h L (34 + 5 a s / h) bytes.
  const ModelShape m = load_preset("gpt3-2.7b");
  const double s = 2048, b = 1, h = 2560, L = 32, a = 32;
  ParallelLayout l;
  EXPECT_DOUBLE_EQ(training_memory(m, l).activations, s * b * h * L * (34 + 5 * a * s / h));
  // Full recomputation keeps each layer's 2sbh input plus one layer's working set.
  l.checkpoint_activations = true;
  EXPECT_DOUBLE_EQ(training_memory(m, l).activations,
                   2 * s * b * h * L + s * b * h * (34 + 5 * a * s / h));
  // Tensor parallel without sequence parallelism: sbh (10 + 24/t + 5as/(ht)) per layer.
  ModelShape tp = m;
  tp.t = 4;
  l.checkpoint_activations = false;
  EXPECT_DOUBLE_EQ(training_memory(tp, l).activations,
                   s * b * h * L * (10 + 24.0 / 4 + 5 * a * s / (h * 4)));
}

// With fewer routed copies than experts (s = 1: decoding) only top_k experts run, one token each:
// the forward FLOPs per token are 2 x the active parameters less the embedding lookup's.
TEST(Flops, FewerTokensThanExpertsRunOnlyTheRoutedExperts) {
  ModelShape m = load_preset("mixtral-8x7b");
  m.s = 1;
  const ParamCount p = count_parameters(m);
  const double want = 2 * (p.active - static_cast<double>(m.v * m.h));
  EXPECT_NEAR(count_flops(m).forward_per_token / want, 1.0, 0.02);
}

// An MoE layer keeps each token's top_k routed copies and the experts' intermediates at their
// width, not the dense d_ff's: Mixtral 8x7B (top 2 of 8 experts of 14336, SwiGLU, GQA 8 of 32
// heads), t = 1: per token and layer 10 + Q 2 + K and V 2 x 2 x 8/32 + projection input 2 +
// experts 8 x 2 x 14336/4096 + routed inputs 2 x 2 + unpermute buffer 2 x 2 (in h bytes).
TEST(Memory, MixtureOfExpertsActivationsFollowTheRouting) {
  const ModelShape m = load_preset("mixtral-8x7b");
  const double sbh = static_cast<double>(m.s) * static_cast<double>(m.b * m.h);
  const double per_layer = 10 + 2 + 2 * 2 * 8.0 / 32 + 2 + 8 * 2 * 14336.0 / 4096 + 4 + 4;
  EXPECT_DOUBLE_EQ(training_memory(m, ParallelLayout{}).activations,
                   sbh * static_cast<double>(m.L) * per_layer);
}

TEST(Memory, KvCacheCountsKAndVAndGqa) {
  // Llama-2-70B: 80 layers, 8 KV heads of 128, bf16, b = 1, s = 4096:
  // 2 * 80 * 4096 * 8 * 128 * 2 bytes = 1,342,177,280 (the cookbook drops the 2 and ignores GQA).
  const ModelShape m = load_preset("llama-2-70b");
  ParallelLayout l;
  EXPECT_DOUBLE_EQ(inference_memory(m, l).kv_cache, 1342177280.0);
  l.generated_tokens = 4096;
  EXPECT_DOUBLE_EQ(inference_memory(m, l).kv_cache, 2 * 1342177280.0);
  // With t = 16 > a_kv = 8 the KV heads are replicated: one head per GPU.
  ModelShape tp = m;
  tp.t = 16;
  l.generated_tokens = 0;
  EXPECT_DOUBLE_EQ(inference_memory(tp, l).kv_cache, 1342177280.0 / 8);
}

// Latent attention caches the compressed latent and the shared rotary key per token and layer:
// DeepSeek-V2-Lite's 512 + 64 = 576 values over 27 layers, bf16, b = 1, s = 4096 is
// 27 * 4096 * 576 * 2 bytes (0.12 GiB); before, 2 * a_kv * h/a (0.84 GiB) was counted.
TEST(Memory, KvCacheOfLatentAttentionIsTheLatent) {
  ModelShape m = import_hf_config_file(std::string(MCR_HF_RECENT) + "/deepseek-v2-lite.json").shape;
  ASSERT_TRUE(m.is_mla());
  m.s = 4096;
  m.b = 1;
  ParallelLayout l;
  EXPECT_DOUBLE_EQ(inference_memory(m, l).kv_cache, 27.0 * 4096 * 576 * 2);
  // Each tensor-parallel rank keeps the whole latent.
  m.t = 2;
  EXPECT_DOUBLE_EQ(inference_memory(m, l).kv_cache, 27.0 * 4096 * 576 * 2);
}

// Latent attention's Q and K are a x (qk_nope + qk_rope) wide and V and the projection input
// a x v_head_dim, not h: DeepSeek-V3 (h = 7168, 128 heads, 128 + 64 and 128), one dense layer at
// t = 1 keeps per token 10 + 2 (128 x 192 + 128 x 320 + 128 x 128) / 7168 + the MLP's
// 8 x 18432 / 7168 (in h bytes); before, h/a = 56 made its attention 8 (2 x 4 x 7168 / 7168)
// instead of 22.9, and the layer 28% smaller than it is.
TEST(Memory, LatentAttentionActivationsAtTheirHeadWidths) {
  ModelShape m = import_hf_config_file(std::string(MCR_HF_RECENT) + "/deepseek-v3.json").shape;
  ASSERT_TRUE(m.is_mla());
  m.experts = 1;
  m.top_k = 1;
  m.dense_layers = 0;
  m.b = 1;
  m.attention = AttentionImpl::flash;
  const double sbh = static_cast<double>(m.s) * static_cast<double>(m.h);
  const double attention = 2.0 * (128 * 192 + 128 * (192 + 128) + 128 * 128) / 7168.0;
  const double per_layer = 10 + attention + 8.0 * static_cast<double>(m.d_ff) / 7168.0;
  EXPECT_DOUBLE_EQ(training_memory(m, ParallelLayout{}).activations,
                   sbh * static_cast<double>(m.L) * per_layer);
}

}  // namespace
}  // namespace mcr::codesign
