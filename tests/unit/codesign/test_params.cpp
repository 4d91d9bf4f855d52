// Parameter counts against published counts (each test cites its source).
#include <gtest/gtest.h>

#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/model.hpp"

namespace mcr::codesign {
namespace {

double relative_error(double got, double want) {
  return std::abs(got / want - 1.0);
}

TEST(Params, Pythia6_9B) {
  // Biderman et al. 2023, "Pythia: A Suite for Analyzing Large Language Models", Table 1 (model
  // sizes): Pythia-6.9B has 6,857,302,016 total parameters and 6,444,163,072 non-embedding.
  const ParamCount p = count_parameters(load_preset("pythia-6.9b"));
  EXPECT_LT(relative_error(p.total, 6857302016.0), 0.005) << p.total;
  EXPECT_LT(relative_error(p.non_embedding, 6444163072.0), 0.005) << p.non_embedding;
  EXPECT_DOUBLE_EQ(p.total, 6857302016.0);  // the formula is exact for this architecture
}

TEST(Params, Llama2_7B) {
  // Touvron et al. 2023 (Llama 2) name the model "7B"; the exact count of the released checkpoint,
  // 6,738,415,616, is what Hugging Face transformers reports for meta-llama/Llama-2-7b-hf
  // (model.num_parameters()) and is the sum of the tensor shapes in its safetensors index.
  const ParamCount p = count_parameters(load_preset("llama-2-7b"));
  EXPECT_LT(relative_error(p.total, 6738415616.0), 0.005) << p.total;
}

TEST(Params, GptNeoX20B) {
  // Black et al. 2022, "GPT-NeoX-20B: An Open-Source Autoregressive Language Model", Table 1:
  // 20,554,567,680 total parameters.
  const ParamCount p = count_parameters(load_preset("gpt-neox-20b"));
  EXPECT_LT(relative_error(p.total, 20554567680.0), 0.005) << p.total;
}

TEST(Params, Mixtral8x7B) {
  // Mistral AI, "Mixtral of experts" (announcement, Dec 2023, and Jiang et al. 2024, arXiv
  // 2401.04088): 46.7B total parameters, 12.9B active per token.
  const ParamCount p = count_parameters(load_preset("mixtral-8x7b"));
  EXPECT_LT(relative_error(p.total, 46.7e9), 0.005) << p.total;
  EXPECT_LT(relative_error(p.active, 12.9e9), 0.005) << p.active;
}

TEST(Params, Gpt3_175B) {
  // Brown et al. 2020, Table 2.1: "GPT-3 175B" with 175.0B parameters.
  const ParamCount p = count_parameters(load_preset("gpt3-175b"));
  EXPECT_LT(relative_error(p.total, 175.0e9), 0.005) << p.total;
}

TEST(Params, HandDerivedTinyModel) {
  // h=8, a=2, L=1, v=10, s=4, d_ff=32, GeLU, layernorm, biases, learned positions, untied:
  // embeddings 2*10*8=160, positions 4*8=32, attention 4*64+4*8=288, MLP 2*8*32+32+8=552,
  // norms (2*1+1)*2*8=48 -> 1080.
  ModelShape m;
  m.h = 8;
  m.a = 2;
  m.L = 1;
  m.v = 10;
  m.s = 4;
  m.d_ff = 32;
  const ParamCount p = count_parameters(m);
  EXPECT_DOUBLE_EQ(p.embedding, 160);
  EXPECT_DOUBLE_EQ(p.position, 32);
  EXPECT_DOUBLE_EQ(p.attention, 288);
  EXPECT_DOUBLE_EQ(p.mlp, 552);
  EXPECT_DOUBLE_EQ(p.norm, 48);
  EXPECT_DOUBLE_EQ(p.total, 1080);
}

}  // namespace
}  // namespace mcr::codesign
