#include "mcr/codesign/analysis.hpp"

namespace mcr::codesign {

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
  const double layers = static_cast<double>(model.L);
  t.tflops = t.flops_per_layer / t.time_per_layer_s / 1e12;
  t.step_time_s = layers * t.time_per_layer_s + t.logits_time_s;
  t.step_flops = layers * t.flops_per_layer + t.logits_flops;
  t.model_tflops = t.step_flops / t.step_time_s / 1e12;
  t.tokens_per_s_per_gpu =
      static_cast<double>(model.b * model.s) / t.step_time_s / static_cast<double>(model.t);
  t.mfu = t.model_tflops / device.peak_for(model.dtype);
  return result;
}

}  // namespace mcr::codesign
