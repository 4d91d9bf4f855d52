// Model shapes -> GEMM lists, presets and Hugging Face config.json parsing.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/model.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

std::map<std::string, Gemm> forward_by_role(const ModelShape& m) {
  std::map<std::string, Gemm> out;
  for (const Gemm& g : layer_gemms(m, false))
    out[g.role] = g;
  return out;
}

TEST(Model, Gpt3_2_7BLayerGemmsMatchTable) {
  // codesign-notes 2.1 with h=2560, a=32, s=2048, b=4, t=1.
  ModelShape m = load_preset("gpt3-2.7b");
  m.b = 4;
  auto g = forward_by_role(m);
  ASSERT_EQ(g.size(), 6u);
  const auto expect = [&g](const char* role, std::int64_t M, std::int64_t N, std::int64_t K,
                           std::int64_t batch) {
    SCOPED_TRACE(role);
    ASSERT_TRUE(g.count(role));
    EXPECT_EQ(g[role].m, M);
    EXPECT_EQ(g[role].n, N);
    EXPECT_EQ(g[role].k, K);
    EXPECT_EQ(g[role].batch, batch);
  };
  expect("qkv", 8192, 7680, 2560, 1);
  expect("attn_score", 2048, 2048, 80, 128);
  expect("attn_over_value", 2048, 80, 2048, 128);
  expect("attn_proj", 8192, 2560, 2560, 1);
  expect("mlp_up", 8192, 10240, 2560, 1);
  expect("mlp_down", 8192, 2560, 10240, 1);
  // Per-layer forward FLOPs = 24 b s h^2 + 4 b s^2 h (notes 2.1).
  double total = 0;
  for (const auto& [role, gemm] : g)
    total += gemm.flops();
  const double b = 4, s = 2048, h = 2560;
  EXPECT_DOUBLE_EQ(total, 24 * b * s * h * h + 4 * b * s * s * h);
  const Gemm logit = logit_gemms(m, false).at(0);
  EXPECT_EQ(logit.n, 50257);
  EXPECT_EQ(logit.k, 2560);
}

TEST(Model, TrainingAddsDgradAndWgrad) {
  const ModelShape m = load_preset("pythia-1.4b");
  const auto fwd = layer_gemms(m, false);
  const auto all = layer_gemms(m, true);
  ASSERT_EQ(all.size(), 3 * fwd.size());
  double f = 0, t = 0;
  for (const auto& g : fwd)
    f += g.flops();
  for (const auto& g : all)
    t += g.flops();
  EXPECT_DOUBLE_EQ(t, 3 * f);
  // qkv dgrad: dX[M x K] = dY[M x N] W^T, reducing over N; wgrad: dW[K x N], reducing over M.
  EXPECT_EQ(all[1].pass, Pass::dgrad);
  EXPECT_EQ(all[1].m, all[0].m);
  EXPECT_EQ(all[1].n, all[0].k);
  EXPECT_EQ(all[1].k, all[0].n);
  EXPECT_EQ(all[2].pass, Pass::wgrad);
  EXPECT_EQ(all[2].m, all[0].k);
  EXPECT_EQ(all[2].n, all[0].n);
  EXPECT_EQ(all[2].k, all[0].m);
}

TEST(Model, TensorParallelGqaSwigluMoe) {
  ModelShape m = load_preset("mixtral-8x7b");
  m.t = 2;
  m.attention = AttentionImpl::unfused;
  auto g = forward_by_role(m);
  // QKV: (32/2 + 2 * 8/2) heads * 128 = 3072 columns per GPU.
  EXPECT_EQ(g["qkv"].n, 3072);
  EXPECT_EQ(g["attn_score"].batch, 16);
  EXPECT_EQ(g["attn_proj"].k, 2048);
  // 4096 tokens * top-2 / 8 experts = 1024 tokens per expert; d_ff/t = 7168.
  EXPECT_EQ(g["moe_up"].m, 1024);
  EXPECT_EQ(g["moe_up"].n, 7168);
  EXPECT_EQ(g["moe_up"].batch, 8);
  EXPECT_TRUE(g.count("moe_gate"));
  EXPECT_EQ(g["moe_down"].k, 7168);
  EXPECT_EQ(g["moe_router"].n, 8);
}

TEST(Model, FlashAttentionKeepsFlops) {
  ModelShape m = load_preset("llama-2-7b");
  m.attention = AttentionImpl::unfused;
  const double unfused = count_flops(m).forward_per_step;
  m.attention = AttentionImpl::flash;
  EXPECT_DOUBLE_EQ(count_flops(m).forward_per_step, unfused);
  EXPECT_TRUE(forward_by_role(m).count("attn_flash"));
}

TEST(Model, PresetsCoverIssueList) {
  for (const char* name :
       {"gpt3-125m",   "gpt3-350m",    "gpt3-760m",   "gpt3-1.3b",   "gpt3-2.7b",
        "gpt3-6.7b",   "gpt3-13b",     "gpt3-175b",   "pythia-70m",  "pythia-160m",
        "pythia-410m", "pythia-1b",    "pythia-1.4b", "pythia-2.8b", "pythia-6.9b",
        "pythia-12b",  "gpt-neox-20b", "llama-2-7b",  "llama-2-13b", "llama-2-70b",
        "llama-3-8b",  "llama-3-70b",  "mistral-7b",  "mixtral-8x7b"}) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(load_preset(name));
  }
  try {
    load_preset("gpt-5");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("gpt3-2.7b"), std::string::npos) << e.what();
  }
}

TEST(Model, HfConfigLlamaFamily) {
  const auto c = nlohmann::json::parse(R"({
    "model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "hidden_act": "silu",
    "num_local_experts": 8, "num_experts_per_tok": 2, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16"})");
  const ModelShape m = from_hf_config(c);
  EXPECT_EQ(m.h, 4096);
  EXPECT_EQ(m.kv_heads(), 8);
  EXPECT_EQ(m.mlp, MlpType::swiglu);
  EXPECT_EQ(m.experts, 8);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.norm, NormType::rmsnorm);
  EXPECT_FALSE(m.linear_bias);
  ModelShape preset = load_preset("mixtral-8x7b");
  preset.s = m.s;
  EXPECT_DOUBLE_EQ(count_parameters(m).total, count_parameters(preset).total);
}

TEST(Model, HfConfigGptNeoXAndGpt2) {
  const auto neox = from_hf_config(nlohmann::json::parse(R"({
    "model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64,
    "num_hidden_layers": 44, "vocab_size": 50432, "intermediate_size": 24576,
    "max_position_embeddings": 2048, "hidden_act": "gelu_fast", "tie_word_embeddings": false,
    "torch_dtype": "float16"})"));
  EXPECT_DOUBLE_EQ(count_parameters(neox).total,
                   count_parameters(load_preset("gpt-neox-20b")).total);
  EXPECT_EQ(neox.dtype, DType::fp16);
  const auto gpt2 = from_hf_config(nlohmann::json::parse(R"({
    "model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257,
    "n_positions": 1024, "n_inner": null, "activation_function": "gelu_new"})"));
  EXPECT_EQ(gpt2.d_ff, 3072);
  EXPECT_TRUE(gpt2.tied_embeddings);
  EXPECT_EQ(gpt2.position, PositionEmbedding::learned);
  // GPT-2 small: 124,439,808 parameters (Hugging Face gpt2 checkpoint, model.num_parameters()).
  EXPECT_DOUBLE_EQ(count_parameters(gpt2).total, 124439808.0);
}

TEST(Model, ValidationNamesField) {
  ModelShape m = load_preset("llama-2-7b");
  m.a_kv = 64;
  try {
    m.validate();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("a_kv (model.kv_heads) = 64"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(from_hf_config(nlohmann::json::parse(R"({"model_type": "llama"})")),
               InvalidArgument);
  EXPECT_THROW(nlohmann::json::parse(R"({"hidden": 5})").get<ModelShape>(), InvalidArgument);
}

// Sizes whose products do not fit in 64 bits are refused naming the fields the user set: h whose
// default MLP width 4h wraps (the error blamed d_ff, never set), and b·s·h (the error blamed the
// first GEMM, whose rows b·s had wrapped to 0).
TEST(Model, OversizedDimensionsNameTheirFields) {
  const auto message = [](auto&& make) {
    try {
      make();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const ModelShape gpt = load_preset("gpt3-2.7b");
  const std::string wide_h = message([&] {
    ModelShape m = gpt;
    apply_overrides(m, {.h = std::int64_t{3} << 61, .a = 1});
    m.validate();
  });
  EXPECT_NE(wide_h.find("h (model.hidden) = 6917529027641081856 is too large"), std::string::npos)
      << wide_h;
  EXPECT_EQ(wide_h.find("d_ff (MLP"), std::string::npos) << wide_h;
  const std::string json_h = message(
      [] { nlohmann::json::parse(R"({"h": 4611686018427387904, "a": 1})").get<ModelShape>(); });
  EXPECT_NE(json_h.find("h (model.hidden) = 4611686018427387904 is too large"), std::string::npos)
      << json_h;
  const std::string tokens = message([&] {
    ModelShape m = gpt;
    apply_overrides(m, {.s = std::int64_t{1} << 32, .b = std::int64_t{1} << 32});
    m.validate();
  });
  EXPECT_NE(tokens.find("b (model.micro_batch) = 4294967296, s (model.seq) = 4294967296 and h "
                        "(model.hidden) = 2560"),
            std::string::npos)
      << tokens;
  // The bound is exact: the largest b for this s and h validates, one more does not.
  ModelShape big = gpt;
  big.h = 1024;
  big.d_ff = 4096;
  big.a = 8;
  big.a_kv = 8;
  big.s = std::int64_t{1} << 25;
  big.b = (std::numeric_limits<std::int64_t>::max() / 8) / (big.s * big.h);
  EXPECT_NO_THROW(big.validate());
  big.b += 1;
  EXPECT_THROW(big.validate(), InvalidArgument);
}

// The divisors an error message lists are searched within 2^20 of where they start: a mistyped
// head count of 10^12 took hours of trial division before the message came.
TEST(Model, DivisorHintsOfHugeSizesComeAtOnce) {
  const auto message = [](const ModelShape& m) {
    try {
      m.validate();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ModelShape m = load_preset("gpt3-2.7b");
  m.h = 64;
  m.d_head = 64;
  m.a = 1'000'000'000'000;
  m.a_kv = 7;
  const std::string kv = message(m);
  EXPECT_NE(kv.find("divisors of 1000000000000: 1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 50"),
            std::string::npos)
      << kv.substr(0, 300);
  EXPECT_EQ(kv.substr(kv.size() - 5), ", ...") << kv.substr(kv.size() - 100);
  // A prime h: the nearest head counts dividing it are 1 and h itself, 10^12 away.
  m = load_preset("gpt3-2.7b");
  m.h = 1'000'000'000'039;  // prime
  m.a = 2;
  m.a_kv = 2;
  m.t = 1;
  const std::string heads = message(m);
  EXPECT_NE(heads.find("(nearest: a = 1 (h/a = 1000000000039))"), std::string::npos) << heads;
}

TEST(Model, OverridesKeepTheShapesRules) {
  ModelShape gpt = load_preset("gpt3-2.7b");  // GeLU, d_ff = 4h, multi-head attention
  ASSERT_EQ(gpt.d_ff, 4 * gpt.h);
  ModelShape m = gpt;
  apply_overrides(m, {.h = 2048, .a = 16});
  EXPECT_EQ(m.d_ff, 4 * 2048);  // the 4h MLP follows h
  EXPECT_EQ(m.a_kv, 16);        // still multi-head
  m = gpt;
  apply_overrides(m, {.h = 2048, .d_ff = 5000});
  EXPECT_EQ(m.d_ff, 5000);  // a given d_ff wins
  // A GQA model keeps its group size a/a_kv where it divides the new head count, as the advisor,
  // the sweep and the guidelines' head suggestions do: their a = 36 for a = 32, a_kv = 8 was
  // refused as --heads 36 (a_kv 8 kept, not dividing 36). Otherwise a_kv stays, at most a.
  const auto kv_after = [](ModelShape shape, const ModelOverrides& o) {
    apply_overrides(shape, o);
    return shape.a_kv;
  };
  ModelShape gqa = gpt;
  gqa.a = 32;
  gqa.a_kv = 8;
  EXPECT_EQ(kv_after(gqa, {.a = 16}), 4);
  EXPECT_EQ(kv_after(gqa, {.a = 36}), 9);
  EXPECT_EQ(kv_heads_keeping_group(gqa, 36), 9);
  ModelShape uneven = gqa;  // read but not validated: 8 KV heads do not group 12 query heads
  uneven.a = 12;
  EXPECT_EQ(kv_heads_keeping_group(uneven, 24), 0);
  EXPECT_EQ(kv_after(gqa, {.a = 4}), 1);
  EXPECT_EQ(kv_after(gqa, {.a = 6}), 6);              // groups of 4 do not divide 6
  EXPECT_EQ(kv_after(gqa, {.a = 40, .a_kv = 8}), 8);  // a given a_kv wins
  ModelShape mqa = gpt;
  mqa.a = 32;
  mqa.a_kv = 1;
  EXPECT_EQ(kv_after(mqa, {.a = 16}), 1);
  EXPECT_TRUE(is_default_mlp_width(4 * 1024, 1024));
  EXPECT_FALSE(is_default_mlp_width(4 * 1024 + 4, 1024));
  EXPECT_FALSE(is_default_mlp_width(4 * 1024 + 2, 1024));
  EXPECT_TRUE(is_default_mlp_width(8 * 1000, 1000, 8));
  EXPECT_FALSE(is_default_mlp_width(8, 0, 0));  // no ratio: no default width
  EXPECT_FALSE(ModelOverrides{.s = 4096}.changes_dimensions());
  EXPECT_TRUE(ModelOverrides{.L = 2}.changes_dimensions());
}

// A new layer count keeps the layers' mix: Mistral's every layer slides; Gemma-3-1B's 26 layers are
// 22 sliding and 4 full (1 in 6), so 12 layers keep 4 x 12/26 = 1.8, 2 full; DeepSeek's leading
// dense layers stay, at most L.
TEST(Model, SetLayersKeepsTheLayersMix) {
  const auto load = [](const std::string& dir, const std::string& file) {
    return import_hf_config_file(dir + "/" + file).shape;
  };
  ModelShape mistral = load(MCR_HF_FIXTURES, "mistral-7b.json");
  ModelOverrides o;
  o.L = 24;
  apply_overrides(mistral, o);
  EXPECT_EQ(mistral.L, 24);
  EXPECT_EQ(mistral.sliding_layers, 24);
  EXPECT_NO_THROW(mistral.validate());
  ModelShape gemma = load(MCR_HF_RECENT, "gemma-3-1b-it.json");
  ASSERT_EQ(gemma.L, 26);
  ASSERT_EQ(gemma.sliding_layers, 22);
  set_layers(gemma, 12);
  EXPECT_EQ(gemma.sliding_layers, 10);
  set_layers(gemma, 2);  // 2 x 2/12 = 0.33 full layers: one is kept, not none
  EXPECT_EQ(gemma.sliding_layers, 1);
  ModelShape deepseek = load(MCR_HF_RECENT, "deepseek-v3.json");
  ASSERT_EQ(deepseek.dense_layers, 3);
  set_layers(deepseek, 2);
  EXPECT_EQ(deepseek.dense_layers, 2);
  EXPECT_NO_THROW(deepseek.validate());
}

}  // namespace
}  // namespace mcr::codesign
