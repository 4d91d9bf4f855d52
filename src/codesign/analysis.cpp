#include "mcr/codesign/analysis.hpp"

#include "mcr/codesign/calculators.hpp"

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

namespace {

struct Summed {
  double time_s = 0;
  double flops = 0;
};

Summed add_gemms(const std::vector<Gemm>& gemms, const DeviceSpec& device,
                 std::vector<GemmResult>* keep) {
  Summed sum;
  for (const Gemm& g : gemms) {
    GemmPrediction p = predict(g, device);
    sum.time_s += p.time_s;
    sum.flops += g.flops();
    if (keep != nullptr) keep->push_back({g, std::move(p)});
  }
  return sum;
}

}  // namespace

ModelAnalysis analyze(const ModelShape& model, const DeviceSpec& device, bool training) {
  ModelAnalysis result;
  result.model = model;
  result.device = device.name;
  result.training = training;
  AnalysisTotals& t = result.totals;
  // The layer the per-layer figures describe: the model's own kind where some layer is one, else
  // the first kind it has. When every layer slides (Mistral at a sequence past its window) a
  // full-attention layer the model does not have was described, and L x its time was not the
  // step's.
  const std::vector<LayerGroup> groups = layer_groups(model);
  const LayerGroup* main = &groups.front();
  for (const LayerGroup& g : groups) {
    if (g.kind == "layer") main = &g;
  }
  const Summed one =
      add_gemms(layer_gemms(main->shape, training, main->span), device, &result.layer);
  t.time_per_layer_s = one.time_s;
  t.flops_per_layer = one.flops;
  const Summed logits = add_gemms(logit_gemms(model, training), device, &result.logits);
  t.logits_time_s = logits.time_s;
  t.logits_flops = logits.flops;
  // Every kind of layer by its count (layer_groups): leading dense layers of an MoE model
  // (DeepSeekMoE) run a dense d_ff MLP instead of the experts, sliding-window layers attend to the
  // window only. One layer of each kind other than the main one is listed.
  double layers_time = 0, layers_flops = 0;
  for (const LayerGroup& group : groups) {
    std::vector<GemmResult>* keep = nullptr;
    if (group.kind == "dense") keep = &result.dense_layer;
    if (group.kind == "sliding") keep = &result.sliding_layer;
    const Summed sum =
        &group == main ? one
                       : add_gemms(layer_gemms(group.shape, training, group.span), device, keep);
    layers_time += static_cast<double>(group.count) * sum.time_s;
    layers_flops += static_cast<double>(group.count) * sum.flops;
  }
  t.tflops = t.flops_per_layer / t.time_per_layer_s / 1e12;
  t.step_time_s = layers_time + t.logits_time_s;
  t.step_flops = layers_flops + t.logits_flops;
  // The model's FLOPs per GPU, not the GEMMs' it runs: work replicated over tensor parallelism
  // (the router, MLA's down-projections, KV heads when a_kv < t) and the experts' padding to the
  // busiest one's tokens are executed but not the model's (DeepSeek-V3 at t = 16: MFU 33 % read
  // for 25 %).
  const double passes = training ? 3.0 : 1.0;
  t.model_tflops = count_flops(model).forward_per_step * passes / static_cast<double>(model.t) /
                   t.step_time_s / 1e12;
  t.tokens_per_s_per_gpu =
      static_cast<double>(model.b * model.s) / t.step_time_s / static_cast<double>(model.t);
  t.mfu = t.model_tflops / device.peak_for(model.dtype);
  return result;
}

}  // namespace mcr::codesign
