#include "mcr/codesign/analysis.hpp"

namespace mcr::codesign {

ModelShape dense_layer_of(const ModelShape& model) {
  ModelShape dense = model;
  dense.experts = 1;
  dense.top_k = 1;
  dense.d_ff_expert = 0;
  dense.d_ff_shared = 0;
  dense.dense_layers = 0;
  return dense;
}

ModelAnalysis analyze(const ModelShape& model, const DeviceSpec& device, bool training) {
  ModelAnalysis result;
  result.model = model;
  result.device = device.name;
  result.training = training;
  AnalysisTotals& t = result.totals;
  for (Gemm& g : layer_gemms(model, training)) {
    GemmPrediction p = predict(g, device);
    t.time_per_layer_s += p.time_s;
    t.flops_per_layer += g.flops();
    result.layer.push_back({std::move(g), std::move(p)});
  }
  for (Gemm& g : logit_gemms(model, training)) {
    GemmPrediction p = predict(g, device);
    t.logits_time_s += p.time_s;
    t.logits_flops += g.flops();
    result.logits.push_back({std::move(g), std::move(p)});
  }
  // Leading dense layers of an MoE model (DeepSeekMoE) run a dense d_ff MLP instead of the experts.
  double dense_time = 0, dense_flops = 0;
  if (model.is_moe() && model.dense_layers > 0) {
    for (Gemm& g : layer_gemms(dense_layer_of(model), training)) {
      GemmPrediction p = predict(g, device);
      dense_time += p.time_s;
      dense_flops += g.flops();
      result.dense_layer.push_back({std::move(g), std::move(p)});
    }
  }
  const double dense = model.is_moe() ? static_cast<double>(model.dense_layers) : 0.0;
  const double layers = static_cast<double>(model.L) - dense;
  t.tflops = t.flops_per_layer / t.time_per_layer_s / 1e12;
  t.step_time_s = layers * t.time_per_layer_s + dense * dense_time + t.logits_time_s;
  t.step_flops = layers * t.flops_per_layer + dense * dense_flops + t.logits_flops;
  t.model_tflops = t.step_flops / t.step_time_s / 1e12;
  t.tokens_per_s_per_gpu =
      static_cast<double>(model.b * model.s) / t.step_time_s / static_cast<double>(model.t);
  t.mfu = t.model_tflops / device.peak_for(model.dtype);
  return result;
}

}  // namespace mcr::codesign
