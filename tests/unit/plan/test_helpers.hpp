// Shared fixtures of the planner tests: small systems with round numbers, so expected times can be
// computed by hand.
#pragma once

#include "mcr/codesign/model.hpp"
#include "mcr/plan/system.hpp"

namespace mcr::plan::test {

/// n nodes of g GPUs; 100 GB/s inside a node, 10 GB/s between nodes, full efficiency, no latency.
inline SystemSpec round_system(int nodes = 4, int g = 8) {
  SystemSpec s;
  s.name = "round";
  s.device = "a100-80gb";
  s.nodes = nodes;
  s.gpus_per_node = g;
  s.intra = {100, 0, 1.0, "test"};
  s.inter = {10, 0, 1.0, "test"};
  return s;
}

/// GPT-style model with round dimensions (h divisible by every TP size used in the tests).
inline codesign::ModelShape gpt(std::int64_t h = 1024, std::int64_t a = 16, std::int64_t L = 24,
                                std::int64_t v = 51200, std::int64_t s = 2048) {
  codesign::ModelShape m;
  m.name = "test-gpt";
  m.h = h;
  m.a = a;
  m.a_kv = a;
  m.L = L;
  m.v = v;
  m.s = s;
  m.d_ff = 4 * h;
  m.dtype = codesign::DType::fp16;
  m.tied_embeddings = true;
  m.attention = codesign::AttentionImpl::unfused;
  return m;
}

}  // namespace mcr::plan::test
