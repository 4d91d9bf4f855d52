// Shape guidelines from the co-design paper (vocab and hidden alignment, head-dim power of two,
// sharded dims, SwiGLU width, flash head dim, TP size, wave tail) plus sequence and token alignment
// and memory fit, each with a concrete fix. (b*a)/t is a validation rule (ModelShape::validate).
#pragma once

#include <string>
#include <vector>

#include "mcr/codesign/analysis.hpp"
#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/device.hpp"
#include "mcr/codesign/model.hpp"

namespace mcr::codesign {

enum class Severity { info, warning, error };
std::string to_string(Severity s);

struct Finding {
  std::string id;  ///< stable key: vocab_alignment, hidden_alignment, heads_divide_hidden,
                   ///< head_dim_pow2, tp_shard_alignment, swiglu_dff,
                   ///< flash_head_dim, tp_size, wave_tail, seq_alignment,
                   ///< tokens_alignment, memory_fit
  Severity severity = Severity::warning;
  std::string message;  ///< what is wrong, with the numbers
  std::string fix;      ///< a concrete change
};

/// Every finding for the shape on the device; the wave-tail check reads `analysis`.
std::vector<Finding> check_guidelines(const ModelShape& model, const DeviceSpec& device,
                                      const ModelAnalysis& analysis);
/// With quantify = false, findings that would need an extra analysis to state their cost (the
/// sequence-length check) give the alignment tier instead; the advisor uses this for candidates.
std::vector<Finding> check_guidelines(const ModelShape& model, const DeviceSpec& device,
                                      const ModelAnalysis& analysis, bool quantify);
/// Same, analysing the model (forward) first.
std::vector<Finding> check_guidelines(const ModelShape& model, const DeviceSpec& device);

/// Memory per GPU (training when `training`, else inference) against the device's memory_gb:
/// a memory_fit warning with the sizes and the smallest layout changes that fit; none if it fits
/// or the device gives no memory size.
std::vector<Finding> check_memory(const ModelShape& model, const DeviceSpec& device,
                                  const ParallelLayout& layout, bool training);

/// True if some finding has this id.
bool has_finding(const std::vector<Finding>& findings, const std::string& id);

}  // namespace mcr::codesign
