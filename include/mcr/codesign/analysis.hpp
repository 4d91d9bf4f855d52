// A whole model on one device: every GEMM of a layer and the logits, predicted, and summed.
#pragma once

#include <string>
#include <vector>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/gemm.hpp"
#include "mcr/codesign/gemm_model.hpp"
#include "mcr/codesign/model.hpp"

namespace mcr::codesign {

struct GemmResult {
  Gemm gemm;
  GemmPrediction prediction;
};

/// Sums over the GEMMs only (norms, softmax, communication and optimizer time are not modelled).
struct AnalysisTotals {
  double time_per_layer_s = 0;  ///< all GEMMs of one layer (forward, plus backward when training)
  double flops_per_layer = 0;
  double tflops = 0;  ///< flops_per_layer / time_per_layer_s: the layer throughput
  double logits_time_s = 0;
  double logits_flops = 0;
  double step_time_s = 0;  ///< L layers + logits, one microbatch, one GPU
  double step_flops = 0;
  double model_tflops = 0;          ///< step_flops / step_time_s
  double tokens_per_s_per_gpu = 0;  ///< b*s tokens per step, shared by the t GPUs of a TP group
  double mfu = 0;                   ///< model_tflops / vendor dense peak of the dtype
};

struct ModelAnalysis {
  ModelShape model;
  std::string device;  ///< device name
  bool training = false;
  /// One layer of the model's own kind, or, where it has none (every layer slides, every layer
  /// is dense), one of its first kind; the per-layer totals describe it.
  std::vector<GemmResult> layer;
  std::vector<GemmResult> logits;  ///< once per model
  /// One of the model's leading dense layers (MoE models with dense_layers > 0, e.g. DeepSeekMoE);
  /// empty otherwise. The totals count dense_layers of these and L - dense_layers of `layer`.
  std::vector<GemmResult> dense_layer;
  /// One of the model's sliding-window layers (sliding_layers > 0, e.g. Gemma-3, gpt-oss): its
  /// attention covers the window only (empty where `layer` is one). The totals count each kind by
  /// its number of layers.
  std::vector<GemmResult> sliding_layer;
  AnalysisTotals totals;
};

/// The shape of an MoE model's leading dense layers: the same model with a dense d_ff MLP.
ModelShape dense_layer_of(const ModelShape& model);

/// Throws mcr::InvalidArgument for an invalid shape or a dtype the device lacks.
ModelAnalysis analyze(const ModelShape& model, const DeviceSpec& device, bool training);

}  // namespace mcr::codesign
