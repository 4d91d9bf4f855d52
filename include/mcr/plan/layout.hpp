// A parallel training layout (Megatron-style tensor, pipeline and data parallelism, plus ZeRO), and
// the rules that decide whether it can exist for a model on a system.
#pragma once

#include <cstdint>
#include <string>

#include "mcr/codesign/model.hpp"
#include "mcr/plan/system.hpp"

namespace mcr::plan {

/// none: keep every activation; selective: recompute the attention core (Korthikanti et al. 2022);
/// full: keep only each layer's input and rerun its forward pass in the backward pass.
enum class Recompute { none, selective, full };
std::string to_string(Recompute r);
Recompute parse_recompute(const std::string& s);  ///< none | selective | full

struct Layout {
  int gpus = 0;  ///< 0: tp * pp * dp, or the whole system when dp is 0 too
  int tp = 1;
  int pp = 1;
  int dp = 0;  ///< 0: gpus / (tp * pp)
  std::int64_t micro_batch = 1;
  std::int64_t global_batch = 0;  ///< sequences per step; 0: micro_batch * dp (one microbatch)
  int interleave = 1;             ///< model chunks per pipeline stage (interleaved 1F1B)
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false;
  int zero = 0;  ///< 0..3: shard optimizer (1), + gradients (2), + weights (3)
  bool allow_tp_across_nodes = false;  ///< a TP group larger than a node is legal but slow
  bool dp_overlap = true;  ///< overlap the gradient reduction with the last backward pass

  /// Microbatches per pipeline per step: global_batch / (micro_batch * dp).
  std::int64_t microbatches() const;
  friend bool operator==(const Layout&, const Layout&) = default;
};

/// Fills gpus, dp and global_batch where they are 0, then checks every rule. Throws
/// mcr::InvalidArgument naming the flag, the values and the rule, e.g. "--tp 8 x --pp 4 x --dp 3 =
/// 96 GPUs, but --gpus is 64: tp*pp*dp must equal gpus".
Layout resolve_layout(Layout layout, const codesign::ModelShape& model, const SystemSpec& system);

/// The same checks without throwing: empty when valid, else the first broken rule.
std::string layout_error(const Layout& resolved, const codesign::ModelShape& model,
                         const SystemSpec& system);

/// "tp=8 pp=8 dp=1 mb=1 gbs=64 v=3 recompute=selective sp zero=0".
std::string describe(const Layout& layout);

}  // namespace mcr::plan
