// The guideline checker on the published shapes the co-design paper criticises, and on a clean one.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/guidelines.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

const DeviceSpec& a100() {
  static const DeviceSpec d = device_from_catalog("a100-80gb");
  return d;
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const auto& f : fs) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

TEST(Guidelines, Gpt3_2_7BHeadDim80) {
  // h/a = 2560/32 = 80 = 2^4 * 5: 160 bytes in fp16, 32-byte power-of-two content, below 128 B.
  const auto fs = check_guidelines(load_preset("gpt3-2.7b"), a100());
  const Finding* f = find(fs, "head_dim_pow2");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::warning);
  EXPECT_NE(f->message.find("80"), std::string::npos) << f->message;
  // The fix names a head count with h/a a multiple of 64: a = 20 (128) or a = 40 (64).
  EXPECT_NE(f->fix.find("a = 20"), std::string::npos) << f->fix;
}

TEST(Guidelines, Gpt3_13BHidden5140) {
  // 5140 = 64*80 + 20; 40 heads of the printed d_head 128 give an attention width of 5120 != h.
  const auto fs = check_guidelines(load_preset("gpt3-13b"), a100());
  const Finding* h = find(fs, "hidden_alignment");
  ASSERT_NE(h, nullptr);
  EXPECT_NE(h->fix.find("5120"), std::string::npos) << h->fix;
  EXPECT_NE(h->fix.find("5184"), std::string::npos) << h->fix;
  const Finding* heads = find(fs, "heads_divide_hidden");
  ASSERT_NE(heads, nullptr);
  EXPECT_EQ(heads->severity, Severity::warning);
  EXPECT_NE(heads->message.find("5120"), std::string::npos) << heads->message;
}

TEST(Guidelines, Vocab50257) {
  // 50257 is odd; the next multiple of 64 is 50304 = 64 * 786 (what Pythia uses).
  const auto fs = check_guidelines(load_preset("gpt3-2.7b"), a100());
  const Finding* f = find(fs, "vocab_alignment");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->fix.find("50304"), std::string::npos) << f->fix;
  // Pythia's padded vocabulary passes.
  EXPECT_EQ(find(check_guidelines(load_preset("pythia-2.8b"), a100()), "vocab_alignment"), nullptr);
}

TEST(Guidelines, SwigluEightThirds) {
  // d_ff = 8h/3 at h = 4096 is 10922 = 2 * 5461: only 4-byte aligned in bf16.
  ModelShape m = load_preset("llama-2-7b");
  m.d_ff = 8 * 4096 / 3;
  ASSERT_EQ(m.d_ff, 10922);
  const auto fs = check_guidelines(m, a100());
  const Finding* f = find(fs, "swiglu_dff");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("8h/3"), std::string::npos) << f->message;
  EXPECT_NE(f->fix.find("10880"), std::string::npos) << f->fix;  // 64 * 170
  EXPECT_NE(f->fix.find("10944"), std::string::npos) << f->fix;  // 64 * 171
}

// Any other MLP's width is checked too without tensor parallelism: GeGLU or GeLU at 10922 ran its
// up and down GEMMs at a lower tier while "all checks pass" (only SwiGLU's width was checked).
TEST(Guidelines, AnyMlpsWidthIsCheckedWithoutTensorParallelism) {
  for (const MlpType mlp : {MlpType::geglu, MlpType::gelu}) {
    ModelShape m = load_preset("llama-2-7b");
    m.mlp = mlp;
    m.d_ff = 10922;
    const auto fs = check_guidelines(m, a100());
    const Finding* f = find(fs, "mlp_alignment");
    ASSERT_NE(f, nullptr) << static_cast<int>(mlp);
    EXPECT_NE(f->fix.find("10880"), std::string::npos) << f->fix;
    EXPECT_EQ(find(fs, "swiglu_dff"), nullptr);
    m.d_ff = 11008;
    EXPECT_EQ(find(check_guidelines(m, a100()), "mlp_alignment"), nullptr);
  }
}

TEST(Guidelines, Llama2_7BAlignedShapePasses) {
  // h = 4096, h/a = 128, v = 32000 = 64 * 500, d_ff = 11008 = 64 * 172: every alignment rule holds.
  const auto fs = check_guidelines(load_preset("llama-2-7b"), a100());
  for (const auto& f : fs) {
    EXPECT_NE(f.severity, Severity::error) << f.id << ": " << f.message;
  }
  for (const char* id :
       {"vocab_alignment", "hidden_alignment", "heads_divide_hidden", "head_dim_pow2", "swiglu_dff",
        "mlp_alignment", "batch_heads_per_tp", "tp_shard_alignment", "flash_head_dim", "tp_size"}) {
    EXPECT_EQ(find(fs, id), nullptr) << id;
  }
}

TEST(Guidelines, TensorParallelChecks) {
  ModelShape m = load_preset("gpt3-2.7b");
  m.t = 3;  // 32 heads cannot be split over 3 ranks: not a shape, rejected before any check
  EXPECT_THROW(check_guidelines(m, a100()), InvalidArgument);
  m.t = 8;
  m.d_ff = 10280;  // d_ff/t = 1285 is not a multiple of 64
  EXPECT_NE(find(check_guidelines(m, a100()), "tp_shard_alignment"), nullptr);
  m.t = 16;  // h/t = 160 and t > 8
  EXPECT_NE(find(check_guidelines(m, a100()), "tp_size"), nullptr);
}

// The t that tp_size suggests must be one the model can take: h 3072 with 24 heads and 8 KV heads
// gave t = 3 (h/1024), which 8 KV heads cannot share; h 5120 with 32 heads gave t = 5.
TEST(Guidelines, SuggestedTensorParallelSizeSplitsTheHeads) {
  for (auto [h, a, kv, t] : {std::array<std::int64_t, 4>{3072, 24, 8, 8},
                             std::array<std::int64_t, 4>{5120, 32, 32, 32}}) {
    ModelShape m = load_preset("llama-3-8b");
    m.h = h;
    m.a = a;
    m.a_kv = kv;
    m.t = t;
    const auto findings = check_guidelines(m, a100());
    const Finding* f = find(findings, "tp_size");
    ASSERT_NE(f, nullptr) << h;
    const auto at = f->fix.find("t = ");
    ASSERT_NE(at, std::string::npos) << f->fix;
    const std::int64_t suggested = std::stoll(f->fix.substr(at + 4));
    EXPECT_TRUE(tp_splits_heads(a, kv, suggested)) << h << ": " << f->fix;
    EXPECT_GT(suggested, 1) << f->fix;
  }
}

TEST(Guidelines, FlashHeadDimTooSmall) {
  ModelShape m = load_preset("llama-2-7b");
  m.a = 128;  // h/a = 32
  m.a_kv = 128;
  const auto fs = check_guidelines(m, a100());
  ASSERT_NE(find(fs, "flash_head_dim"), nullptr);
  EXPECT_EQ(find(fs, "flash_head_dim")->severity, Severity::warning);
}

TEST(Guidelines, WaveTail) {
  // M = b*s = 256 and d_ff = 13952 = 109 * 128: with 256x128 tiles mlp_up has 1 x 109 = 109 tiles
  // on 108 SMs, so a second wave runs a single tile (wave efficiency 109/216 = 50%).
  ModelShape m = load_preset("gpt3-2.7b");
  m.s = 256;
  m.b = 1;
  m.d_ff = 13952;
  const ModelAnalysis an = analyze(m, a100(), false);
  const auto fs = check_guidelines(m, a100(), an);
  bool found = false;
  for (const auto& f : fs)
    found |= f.id == "wave_tail";
  EXPECT_TRUE(found);
}

TEST(Guidelines, SequenceAndTokensAlignment) {
  ModelShape m = load_preset("llama-2-7b");
  const DeviceSpec h100 = device_from_catalog("h100-sxm");
  m.s = 2047;
  const auto fs = check_guidelines(m, h100);
  const Finding* seq = find(fs, "seq_alignment");
  ASSERT_NE(seq, nullptr);
  EXPECT_NE(seq->fix.find("s = 2048"), std::string::npos) << seq->fix;
  EXPECT_NE(seq->message.find("at s = 2048"), std::string::npos) << seq->message;
  // 1000 is a multiple of 8 but not 64; 3 x 1000 = 3000 = 8 x 375: 16-byte aligned M, which the
  // a100-80gb tiers price at x0.87 (h100/h200 at x0.97 since the H200 sweep).
  m.s = 1000;
  m.b = 3;
  const auto fs2 = check_guidelines(m, a100());
  const Finding* tokens = find(fs2, "tokens_alignment");
  ASSERT_NE(tokens, nullptr);
  EXPECT_NE(tokens->message.find("16-byte"), std::string::npos) << tokens->message;
  EXPECT_NE(tokens->message.find("x0.87"), std::string::npos) << tokens->message;
  EXPECT_NE(tokens->fix.find("s = 1024 (b*s = 3072)"), std::string::npos) << tokens->fix;
  m.s = 4096;
  m.b = 1;
  EXPECT_EQ(find(check_guidelines(m, h100), "tokens_alignment"), nullptr);
}

TEST(Guidelines, MemoryFitNamesTheSizesAndALayoutThatFits) {
  const ModelShape m = load_preset("mixtral-8x7b");
  const DeviceSpec h100 = device_from_catalog("h100-sxm");
  const auto fs = check_memory(m, h100, ParallelLayout{}, true);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].id, "memory_fit");
  EXPECT_NE(fs[0].message.find("80 GB"), std::string::npos) << fs[0].message;
  EXPECT_NE(fs[0].fix.find("--zero 3"), std::string::npos) << fs[0].fix;
  // Llama-2-7B inference fits on one 80 GB device.
  EXPECT_TRUE(check_memory(load_preset("llama-2-7b"), h100, ParallelLayout{}, false).empty());
}

// The catalog's GB are binary, as the planner reads them: a model within 90 % of the capacity in
// GiB fits (it was flagged when read as decimal GB, 7 % less, while `mcr plan` said it fits).
TEST(Guidelines, MemoryFitReadsTheCatalogsGbAsBinary) {
  const ModelShape m = load_preset("llama-2-7b");
  DeviceSpec d = device_from_catalog("h100-sxm");
  const double need = inference_memory(m, ParallelLayout{}).total;
  d.memory_gb = need / (0.9 * 1024.0 * 1024.0 * 1024.0) * 1.01;  // 1 % to spare, in GiB
  EXPECT_TRUE(check_memory(m, d, ParallelLayout{}, false).empty());
  d.memory_gb = need / (0.9 * 1024.0 * 1024.0 * 1024.0) * 0.99;
  ASSERT_EQ(check_memory(m, d, ParallelLayout{}, false).size(), 1u);
}

ModelShape recent(const std::string& file) {
  return import_hf_config_file(std::string(MCR_HF_RECENT) + "/" + file).shape;
}

// The a values a fix names ("a = 40 (h/a = 64) or ..."), each applied as the advisor would: the
// GQA group size kept.
std::vector<ModelShape> suggested_heads(const ModelShape& m, const std::string& fix) {
  std::vector<ModelShape> out;
  const std::int64_t group = m.a / m.kv_heads();
  for (std::size_t at = fix.find("a = "); at != std::string::npos; at = fix.find("a = ", at + 1)) {
    if (at > 0 && fix[at - 1] == '/') continue;  // "h/a = 64" is the head dim
    ModelShape c = m;
    c.a = std::stoll(fix.substr(at + 4));
    c.a_kv = c.a / group;
    c.d_head = 0;
    out.push_back(c);
  }
  return out;
}

// Latent attention's heads are 192 (Q/K) and 128 (V) wide in DeepSeek-V3; h/a = 7168/128 = 56 is
// no width of it. Before, that 56 raised "small for flash attention" and a power-of-two note.
TEST(Guidelines, LatentAttentionIsJudgedByItsOwnHeadWidths) {
  ModelShape m = recent("deepseek-v3.json");
  m.attention = AttentionImpl::flash;
  ASSERT_TRUE(m.is_mla());
  const auto fs = check_guidelines(m, a100());
  EXPECT_EQ(find(fs, "flash_head_dim"), nullptr);
  EXPECT_EQ(find(fs, "head_dim_pow2"), nullptr);
  EXPECT_EQ(find(fs, "heads_divide_hidden"), nullptr);
  // A misaligned latent head width is named as such, with a fix in its own terms.
  m.qk_rope_dim = 60;  // Q/K width 188 = 4 x 47
  const auto misaligned = check_guidelines(m, a100());
  const Finding* f = find(misaligned, "head_dim_pow2");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("query/key head dimension 188"), std::string::npos) << f->message;
  EXPECT_NE(f->fix.find("qk_nope_dim + qk_rope_dim = 188"), std::string::npos) << f->fix;
}

// Vocabulary-parallel logits: each of t ranks computes ceil(v/t) rows. GPT-3 2.7B's padded 50304
// over t = 8 is 6288 = 16 x 393 per rank, 32-byte aligned in fp16; before, only v % 64 was asked
// and nothing was said. Megatron's fix pads v to a multiple of 64 t: 50688 (6336 = 64 x 99).
TEST(Guidelines, VocabularyIsCheckedPerTensorParallelShard) {
  ModelShape m = load_preset("gpt3-2.7b");
  m.v = 50304;
  m.t = 8;
  const auto fs = check_guidelines(m, a100());
  const Finding* f = find(fs, "vocab_alignment");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("6288"), std::string::npos) << f->message;
  EXPECT_NE(f->fix.find("50688"), std::string::npos) << f->fix;
  m.v = 50688;
  EXPECT_EQ(find(check_guidelines(m, a100()), "vocab_alignment"), nullptr);
}

// Every head count a fix suggests is a shape the model can take: with t = 8, GPT-3 2.7B's 2560
// splits into 10, 20 or 40 heads of a 64-multiple width, but only 40 divides by 8 (the fix named
// a = 20 and a = 10 before, which validate() rejects). A hidden size it suggests is one a divides.
TEST(Guidelines, SuggestedShapesAreShapesTheModelCanTake) {
  ModelShape m = load_preset("gpt3-2.7b");
  m.t = 8;
  const auto fs = check_guidelines(m, a100());
  const Finding* f = find(fs, "head_dim_pow2");
  ASSERT_NE(f, nullptr);
  const auto heads = suggested_heads(m, f->fix);
  ASSERT_FALSE(heads.empty()) << f->fix;
  for (const auto& c : heads)
    EXPECT_NO_THROW(c.validate()) << f->fix;
  EXPECT_EQ(f->fix.find("a = 20"), std::string::npos) << f->fix;
  // Grouped-query heads keep their group size and split over t too. Groups of 4 at t = 8 leave
  // none of 10, 20, 40 heads (the KV heads, 40 / 4 = 10, do not split over 8): the fix says so
  // instead of naming a shape the model cannot take.
  ModelShape gqa = m;
  gqa.a_kv = 8;  // groups of 4
  const Finding* none = find(check_guidelines(gqa, a100()), "head_dim_pow2");
  ASSERT_NE(none, nullptr);
  EXPECT_TRUE(suggested_heads(gqa, none->fix).empty()) << none->fix;
  EXPECT_NE(none->fix.find("none fits t = 8 here"), std::string::npos) << none->fix;
  // At t = 2, 40 heads with 10 KV heads do.
  gqa.t = 2;
  const auto gqa_findings = check_guidelines(gqa, a100());
  const Finding* g = find(gqa_findings, "head_dim_pow2");
  ASSERT_NE(g, nullptr);
  const auto gqa_heads = suggested_heads(gqa, g->fix);
  ASSERT_FALSE(gqa_heads.empty()) << g->fix;
  for (const auto& c : gqa_heads) {
    EXPECT_NO_THROW(c.validate()) << g->fix;
    EXPECT_EQ(c.a / c.a_kv, 4) << g->fix;
  }
  // h = 2600 over a = 40: the multiples of 64 that 40 also divides are 2560 and 2880.
  ModelShape wide = load_preset("gpt3-2.7b");
  wide.h = 2600;
  wide.a = 40;
  wide.a_kv = 0;
  const auto wide_findings = check_guidelines(wide, a100());
  const Finding* h = find(wide_findings, "hidden_alignment");
  ASSERT_NE(h, nullptr);
  EXPECT_NE(h->fix.find("h = 2560 or h = 2880"), std::string::npos) << h->fix;
}

// The hidden sizes the fixes suggest are ones validate() accepts: h = 960 over a = 10 heads at
// t = 2 was told "h = 1024" (a multiple of t x 64, but not of 10, so refused); a multiple of
// lcm(128, 10) = 640 is. A latent-attention model's h is split by its heads too (h % a is asked
// of it as well), so its hidden_alignment fix keeps multiples of a.
TEST(Guidelines, SuggestedHiddenSizesAreOnesTheHeadsDivide) {
  ModelShape m = load_preset("gpt3-125m");
  m.h = 960;
  m.d_ff = 3840;
  m.a = 10;
  m.a_kv = 10;
  m.t = 2;
  ASSERT_NO_THROW(m.validate());
  const auto fs = check_guidelines(m, a100());
  const Finding* f = nullptr;
  for (const auto& x : fs) {
    if (x.id == "tp_shard_alignment" && x.message.rfind("h/t", 0) == 0) f = &x;
  }
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->fix.find("and of a = 10: 640 (e.g. h = 1280)"), std::string::npos) << f->fix;
  ModelShape fixed = m;
  fixed.h = 1280;
  fixed.d_ff = 5120;
  EXPECT_NO_THROW(fixed.validate());
  for (const auto& x : check_guidelines(fixed, a100()))
    EXPECT_FALSE(x.id == "tp_shard_alignment" && x.message.rfind("h/t", 0) == 0) << x.message;

  ModelShape mla = recent("deepseek-v3.json");
  ASSERT_TRUE(mla.is_mla());
  ASSERT_EQ(mla.d_head, 0);
  mla.h = 7100;  // not a multiple of 64
  mla.a = 100;
  mla.a_kv = 100;
  const auto mla_findings = check_guidelines(mla, a100());
  const Finding* h = find(mla_findings, "hidden_alignment");
  ASSERT_NE(h, nullptr);
  EXPECT_NE(h->fix.find("h = 6400 or h = 8000 (multiples of 1600, which a = 100 divides)"),
            std::string::npos)
      << h->fix;
}

// A mixture of experts' GEMMs use each routed expert's width, not d_ff: Qwen3-30B-A3B's experts are
// 768 wide, 96 per rank at t = 8 (32-byte aligned in bf16), while its unused d_ff = 6144 is
// aligned. Before, only d_ff was checked and nothing was said.
TEST(Guidelines, MixtureOfExpertsIsCheckedAtTheExpertsWidth) {
  ModelShape m = recent("qwen3-30b-a3b.json");
  ASSERT_TRUE(m.is_moe());
  ASSERT_EQ(m.expert_width(), 768);
  m.t = 8;
  bool expert_shard = false;
  for (const auto& f : check_guidelines(m, a100())) {
    if (f.id != "tp_shard_alignment") continue;
    EXPECT_EQ(f.message.find("d_ff/t"), std::string::npos) << f.message;
    expert_shard = expert_shard || f.message.find("d_ff_expert/t = 768/8") != std::string::npos;
  }
  EXPECT_TRUE(expert_shard);
}

// With an explicit head width, h/t is no GEMM's dimension: gpt-oss-20b (h 2880, 64 heads of 64) at
// t = 2 has qkv N = (32 + 2 x 4) x 64 = 2560, K = 2880 and attn_proj K = 32 x 64 = 2048, all
// multiples of 64, and was told "h/t = 1440 ... every rank's GEMM is misaligned". The attention
// width a x head_dim is checked instead, and a misaligned one is flagged.
TEST(Guidelines, AnExplicitHeadWidthIsShardedAsItsGemmsAre) {
  ModelShape m = recent("gpt-oss-20b.json");
  ASSERT_EQ(m.h, 2880);
  ASSERT_EQ(m.d_head, 64);
  m.t = 2;
  for (const auto& f : check_guidelines(m, a100())) {
    if (f.id != "tp_shard_alignment") continue;
    EXPECT_EQ(f.message.rfind("h/t", 0), std::string::npos) << f.message;
    EXPECT_EQ(f.message.find("a x head_dim"), std::string::npos) << f.message;
  }
  m.d_head = 72;  // 64 x 72 / 2 = 2304 = 64 x 36: still aligned
  for (const auto& f : check_guidelines(m, a100())) {
    if (f.id == "tp_shard_alignment") {  // the experts' width (1440 per rank) is rightly flagged
      EXPECT_EQ(f.message.find("head_dim"), std::string::npos) << f.message;
    }
  }
  m.d_head = 68;  // 64 x 68 / 2 = 2176 = 64 x 34: aligned; at t = 8, 544 is not
  m.t = 8;
  m.a_kv = 8;
  const auto fs = check_guidelines(m, a100());
  bool flagged = false;
  for (const auto& f : fs) {
    if (f.id == "tp_shard_alignment" && f.message.rfind("a x head_dim/t = 4352/8", 0) == 0)
      flagged = true;
  }
  EXPECT_TRUE(flagged);
}

// Under tensor parallelism a SwiGLU width's suggestions are multiples of t x the alignment, so
// that taking one also clears tp_shard_alignment (10880, 10944, 11008 were suggested at t = 8:
// each leaves 1360, 1368, 1376 per rank, none a multiple of 64).
TEST(Guidelines, SwigluSuggestionsAreAlignedPerRank) {
  ModelShape m = load_preset("gpt3-125m");
  m.h = 4096;
  m.a = 32;
  m.a_kv = 32;
  m.mlp = MlpType::swiglu;
  m.d_ff = 10922;
  m.t = 8;
  ASSERT_NO_THROW(m.validate());
  const auto fs = check_guidelines(m, a100());
  const Finding* f = find(fs, "swiglu_dff");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->fix.find("d_ff = 10752 or 11264 (multiples of 512)"), std::string::npos) << f->fix;
  ModelShape fixed = m;
  fixed.d_ff = 11264;
  for (const auto& x : check_guidelines(fixed, a100()))
    EXPECT_FALSE(x.id == "tp_shard_alignment" || x.id == "swiglu_dff") << x.message;
}

}  // namespace
}  // namespace mcr::codesign
