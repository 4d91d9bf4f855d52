// Recent architectures from their Hugging Face config.json: the folder of configs with published
// totals (hf_configs/recent, a copy of the project's shared hf-configs set: published.json gives
// each total, its source and its tolerance) must all import within tolerance, and the GEMMs of
// latent attention, attention sinks and sliding-window layers must be the ones the configs imply,
// worked out here by hand from the config values.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/model.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

using nlohmann::json;

const std::string kDir = MCR_HF_RECENT;

HfImport load(const std::string& file) {
  return import_hf_config_file(kDir + "/" + file);
}

const Gemm* find(const std::vector<Gemm>& gemms, const std::string& role, Pass pass) {
  for (const auto& g : gemms) {
    if (g.role == role && g.pass == pass) return &g;
  }
  return nullptr;
}

TEST(HfRecent, EveryPublishedTotalWithinItsTolerance) {
  std::ifstream in(kDir + "/published.json");
  ASSERT_TRUE(in) << kDir;
  const json published = json::parse(in);
  int checked = 0;
  for (const auto& m : published.at("models")) {
    const std::string file = m.at("file").get<std::string>();
    const double want = m.at("params").get<double>();
    const double tol = m.at("tol").get<double>();
    const double got = count_parameters(load(file).shape).total;
    EXPECT_LE(std::abs(got / want - 1), tol)
        << file << ": " << got << " against " << want << " (" << m.at("source") << ")";
    ++checked;
  }
  EXPECT_EQ(checked, 12);
}

TEST(HfRecent, EveryKeyIsAccountedFor) {
  // The only warnings are about what the counts deliberately leave out: storage quantization and
  // the vision tower of a multimodal config.
  std::ifstream in(kDir + "/published.json");
  ASSERT_TRUE(in);
  const json published = json::parse(in);  // kept: the loop reads into it
  int checked = 0;
  for (const auto& m : published.at("models")) {
    const std::string file = m.at("file").get<std::string>();
    ++checked;
    for (const auto& w : load(file).warnings) {
      const bool expected =
          w.rfind("quantization_config", 0) == 0 || w.rfind("vision_config", 0) == 0;
      EXPECT_TRUE(expected) << file << ": " << w;
    }
  }
  EXPECT_EQ(checked, 12);
}

// Newer transformers write every layer's type beside use_sliding_window false: it was reported as
// a key not read. A null use_sliding_window, Falcon parallel_attn or MPT alibi raised nlohmann's
// type_error, naming no key, where a null is the default for every other key.
TEST(HfRecent, LayerTypesAndNullSwitchesAreRead) {
  std::ifstream in(kDir + "/qwen3-8b.json");
  ASSERT_TRUE(in);
  json q = json::parse(in);
  q["layer_types"] = std::vector<std::string>(36, "full_attention");
  const HfImport with_types = import_hf_config(q);
  EXPECT_TRUE(with_types.warnings.empty()) << with_types.warnings.front();
  EXPECT_EQ(with_types.shape.sliding_layers, 0);
  // A kind of layer the shape does not have (Qwen3-Next's linear attention) is still said.
  json other = q;
  other["layer_types"][0] = "linear_attention";
  const auto other_warnings = import_hf_config(other).warnings;
  ASSERT_EQ(other_warnings.size(), 1u);
  EXPECT_NE(other_warnings[0].find("layer_types"), std::string::npos) << other_warnings[0];
  q["use_sliding_window"] = nullptr;
  EXPECT_NO_THROW(import_hf_config(q));
  q["use_sliding_window"] = "no";
  try {
    import_hf_config(q);
    ADD_FAILURE() << "use_sliding_window \"no\" accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("use_sliding_window"), std::string::npos) << e.what();
  }
}

// Llama's attention_bias and mlp_bias apart: the shape counts biases on every linear layer or on
// Q, K and V alone, so one key alone left some out without a word.
TEST(HfRecent, BiasesTheShapeCannotCountAreSaid) {
  std::ifstream in(kDir + "/llama-3.1-8b.json");
  ASSERT_TRUE(in);
  json c = json::parse(in);
  const auto warned = [](const HfImport& r, const std::string& what) {
    for (const auto& w : r.warnings)
      if (w.find(what) != std::string::npos) return true;
    return false;
  };
  c["attention_bias"] = true;
  EXPECT_TRUE(warned(import_hf_config(c), "output projection's bias"));
  c["attention_bias"] = false;
  c["mlp_bias"] = true;
  EXPECT_TRUE(warned(import_hf_config(c), "the MLP's biases are not counted"));
  c["attention_bias"] = true;
  const HfImport both = import_hf_config(c);
  EXPECT_FALSE(warned(both, "bias")) << "both: every linear layer has one, as counted";
  EXPECT_TRUE(both.shape.linear_bias);
}

TEST(HfRecent, ExactWhereThePublishedCountIsExact) {
  // keras-hub preset counts (published.json): every tensor of these configs is modelled.
  EXPECT_DOUBLE_EQ(count_parameters(load("qwen3-8b.json").shape).total, 8190735360.0);
  EXPECT_DOUBLE_EQ(count_parameters(load("qwen3-32b.json").shape).total, 32762123264.0);
  EXPECT_DOUBLE_EQ(count_parameters(load("qwen3-30b-a3b.json").shape).total, 30532122624.0);
  EXPECT_DOUBLE_EQ(count_parameters(load("llama-3.1-8b.json").shape).total, 8030261248.0);
  EXPECT_DOUBLE_EQ(count_parameters(load("gemma-3-1b-it.json").shape).total, 999885952.0);
  EXPECT_DOUBLE_EQ(count_parameters(load("gpt-oss-20b.json").shape).total, 20914757184.0);
}

TEST(HfRecent, Llama4TextConfigIsReadAndTheVisionTowerSaidToBeLeftOut) {
  const HfImport r = load("llama-4-scout.json");
  EXPECT_EQ(r.model_type, "llama4/llama4_text");
  EXPECT_EQ(r.shape.experts, 16);
  EXPECT_EQ(r.shape.top_k, 1);
  EXPECT_EQ(r.shape.d_ff_expert, 8192);
  EXPECT_EQ(r.shape.d_ff_shared, 8192);  // one shared expert in every MoE layer
  bool said = false;
  for (const auto& w : r.warnings)
    said = said || w.find("vision") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(HfRecent, Gemma3TiesItsEmbeddingsWithoutSayingSo) {
  const HfImport r = load("gemma-3-1b-it.json");
  EXPECT_TRUE(r.shape.tied_embeddings);
  EXPECT_EQ(r.shape.head_dim(), 256);  // not 1152 / 4 = 288
  // 26 layers, every 6th global: 22 slide over 512 tokens.
  EXPECT_EQ(r.shape.sliding_window, 512);
  EXPECT_EQ(r.shape.sliding_layers, 22);
}

TEST(HfRecent, LatentAttentionGemmsOfDeepSeekV2Lite) {
  // hidden 2048, 16 heads, q_lora_rank null, kv_lora_rank 512, qk 128 + 64, v 128.
  ModelShape m = load("deepseek-v2-lite.json").shape;
  m.s = 4096;
  m.b = 1;
  const auto gemms = layer_gemms(m, false);
  EXPECT_EQ(find(gemms, "qkv", Pass::forward), nullptr);
  EXPECT_EQ(find(gemms, "q_down", Pass::forward), nullptr);  // no query latent
  const Gemm* q = find(gemms, "q_proj", Pass::forward);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->n, 16 * (128 + 64));
  EXPECT_EQ(q->k, 2048);
  const Gemm* down = find(gemms, "kv_down", Pass::forward);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->n, 512 + 64);
  const Gemm* up = find(gemms, "kv_up", Pass::forward);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->n, 16 * (128 + 128));
  EXPECT_EQ(up->k, 512);
  const Gemm* attn = find(gemms, "attn_flash", Pass::forward);
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->k, (128 + 64) + 128);  // Q.K over 192 dims, P.V over 128
  const Gemm* proj = find(gemms, "attn_proj", Pass::forward);
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->k, 16 * 128);
}

TEST(HfRecent, LatentAttentionOfDeepSeekV3SplitsHeadsNotLatents) {
  // q_lora_rank 1536, 128 heads: under TP 8 the up-projections hold 16 heads each while the
  // down-projections to the latents are replicated.
  ModelShape m = load("deepseek-v3.json").shape;
  m.t = 8;
  const auto gemms = layer_gemms(m, false);
  const Gemm* q_down = find(gemms, "q_down", Pass::forward);
  const Gemm* q_up = find(gemms, "q_up", Pass::forward);
  const Gemm* kv_down = find(gemms, "kv_down", Pass::forward);
  ASSERT_NE(q_down, nullptr);
  ASSERT_NE(q_up, nullptr);
  ASSERT_NE(kv_down, nullptr);
  EXPECT_EQ(q_down->n, 1536);
  EXPECT_EQ(q_up->n, 16 * 192);
  EXPECT_EQ(q_up->k, 1536);
  EXPECT_EQ(kv_down->n, 512 + 64);
}

TEST(HfRecent, SlidingWindowLayersAttendToTheWindowOnly) {
  // Gemma-3-1B: forward FLOPs per token by hand. Linear layers: 2 x their weights; attention:
  // 2 x (4 x 256) per key for QK and PV, s keys in the 4 global layers, 512 in the 22 others;
  // logits 2 x 262144 x 1152.
  ModelShape m = load("gemma-3-1b-it.json").shape;
  m.s = 4096;
  m.b = 1;
  const double h = 1152, q = 4 * 256, kv = 256, ff = 6912, s = 4096, w = 512;
  const double linear = 2 * (h * q + 2 * h * kv + q * h + 3 * h * ff);
  const double attention = 2 * 2 * q;  // per key: QK and PV over 4 heads of 256
  const double expected = 26 * linear + (4 * s + 22 * w) * attention + 2 * 262144.0 * h;
  EXPECT_NEAR(count_flops(m).forward_per_token / expected, 1.0, 1e-12);
  // The flash GEMM of a sliding layer has the window as its keys.
  const Gemm* slide = find(layer_gemms(m, false, 512), "attn_flash", Pass::forward);
  ASSERT_NE(slide, nullptr);
  EXPECT_EQ(slide->n, 512);
}

TEST(HfRecent, SinksAddParametersNotGemms) {
  const ModelShape with = load("gpt-oss-20b.json").shape;
  ASSERT_TRUE(with.attention_sinks);
  ModelShape without = with;
  without.attention_sinks = false;
  EXPECT_EQ(layer_gemms(with, true), layer_gemms(without, true));
  // One logit per head and layer: 64 x 24.
  EXPECT_DOUBLE_EQ(count_parameters(with).total - count_parameters(without).total, 64.0 * 24);
  // Every other layer slides over 128 tokens.
  EXPECT_EQ(with.sliding_window, 128);
  EXPECT_EQ(with.sliding_layers, 12);
}

}  // namespace
}  // namespace mcr::codesign
