#include <fmt/core.h>

#include "json_util.hpp"
#include "mcr/codesign/report.hpp"

namespace mcr::codesign {

using detail::required;
using nlohmann::json;

namespace {

json totals_json(const AnalysisTotals& t) {
  return json{{"time_per_layer_s", t.time_per_layer_s},
              {"flops_per_layer", t.flops_per_layer},
              {"tflops", t.tflops},
              {"logits_time_s", t.logits_time_s},
              {"logits_flops", t.logits_flops},
              {"step_time_s", t.step_time_s},
              {"step_flops", t.step_flops},
              {"model_tflops", t.model_tflops},
              {"tokens_per_s_per_gpu", t.tokens_per_s_per_gpu},
              {"mfu", t.mfu}};
}

AnalysisTotals totals_from_json(const json& j) {
  const std::string ctx = "totals";
  AnalysisTotals t;
  t.time_per_layer_s = required<double>(j, "time_per_layer_s", ctx);
  t.flops_per_layer = required<double>(j, "flops_per_layer", ctx);
  t.tflops = required<double>(j, "tflops", ctx);
  t.logits_time_s = required<double>(j, "logits_time_s", ctx);
  t.logits_flops = required<double>(j, "logits_flops", ctx);
  t.step_time_s = required<double>(j, "step_time_s", ctx);
  t.step_flops = required<double>(j, "step_flops", ctx);
  t.model_tflops = required<double>(j, "model_tflops", ctx);
  t.tokens_per_s_per_gpu = required<double>(j, "tokens_per_s_per_gpu", ctx);
  t.mfu = required<double>(j, "mfu", ctx);
  return t;
}

std::string csv_escape(const std::string& s) {
  std::string out = "\"";
  for (const char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

json gemm_result_json(const Gemm& g, const GemmPrediction& p) {
  const char* dims[3] = {"m", "n", "k"};
  json align = json::object();
  json factors = json::object();
  for (std::size_t i = 0; i < 3; ++i) {
    align[dims[i]] = p.alignment_bytes[i];
    factors[dims[i]] = p.alignment_factors[i];
  }
  return json{{"role", g.role},
              {"pass", to_string(g.pass)},
              {"m", g.m},
              {"n", g.n},
              {"k", g.k},
              {"batch", g.batch},
              {"dtype", to_string(g.dtype)},
              {"flops", g.flops()},
              {"bytes", g.bytes()},
              {"arithmetic_intensity", g.arithmetic_intensity()},
              {"predicted_time_s", p.time_s},
              {"predicted_tflops", p.tflops},
              {"tile", {{"m", p.tile.m}, {"n", p.tile.n}, {"efficiency", p.tile.efficiency}}},
              {"split_k", p.split_k},
              {"blocks", p.blocks},
              {"waves", p.waves},
              {"wave_efficiency", p.wave_efficiency},
              {"tile_efficiency", p.tile_efficiency},
              {"k_efficiency", p.k_efficiency},
              {"alignment_factor", p.alignment_factor},
              {"alignment_bytes", align},
              {"alignment_factors", factors},
              {"compute_time_s", p.compute_time_s},
              {"memory_time_s", p.memory_time_s},
              {"memory_bound", p.memory_bound},
              {"latency_bound", p.latency_bound},
              {"explanation", p.explanation}};
}

GemmResult gemm_result_from_json(const json& j) {
  const std::string ctx = "gemm " + j.value("role", std::string("?"));
  GemmResult r;
  Gemm& g = r.gemm;
  g.role = required<std::string>(j, "role", ctx);
  g.pass = parse_pass(required<std::string>(j, "pass", ctx));
  g.m = required<std::int64_t>(j, "m", ctx);
  g.n = required<std::int64_t>(j, "n", ctx);
  g.k = required<std::int64_t>(j, "k", ctx);
  g.batch = required<std::int64_t>(j, "batch", ctx);
  g.dtype = parse_dtype(required<std::string>(j, "dtype", ctx));
  GemmPrediction& p = r.prediction;
  p.time_s = required<double>(j, "predicted_time_s", ctx);
  p.tflops = required<double>(j, "predicted_tflops", ctx);
  p.tile = required<json>(j, "tile", ctx).get<Tile>();
  p.split_k = required<int>(j, "split_k", ctx);
  p.blocks = required<std::int64_t>(j, "blocks", ctx);
  p.waves = required<std::int64_t>(j, "waves", ctx);
  p.wave_efficiency = required<double>(j, "wave_efficiency", ctx);
  p.tile_efficiency = required<double>(j, "tile_efficiency", ctx);
  p.k_efficiency = required<double>(j, "k_efficiency", ctx);
  p.alignment_factor = required<double>(j, "alignment_factor", ctx);
  const json align = required<json>(j, "alignment_bytes", ctx);
  const json factors = required<json>(j, "alignment_factors", ctx);
  const char* dims[3] = {"m", "n", "k"};
  for (std::size_t i = 0; i < 3; ++i) {
    p.alignment_bytes[i] = required<std::int64_t>(align, dims[i], ctx + " alignment_bytes");
    p.alignment_factors[i] = required<double>(factors, dims[i], ctx + " alignment_factors");
  }
  p.compute_time_s = required<double>(j, "compute_time_s", ctx);
  p.memory_time_s = required<double>(j, "memory_time_s", ctx);
  p.memory_bound = required<bool>(j, "memory_bound", ctx);
  p.latency_bound = required<bool>(j, "latency_bound", ctx);
  p.explanation = required<std::string>(j, "explanation", ctx);
  return r;
}

json analysis_json(const ModelAnalysis& a) {
  json gemms = json::array();
  for (const auto& r : a.layer) {
    json g = gemm_result_json(r.gemm, r.prediction);
    g["scope"] = "layer";
    gemms.push_back(std::move(g));
  }
  for (const auto& r : a.logits) {
    json g = gemm_result_json(r.gemm, r.prediction);
    g["scope"] = "model";
    gemms.push_back(std::move(g));
  }
  return json{
      {"schema", "mcr.shape.analysis/1"}, {"model", a.model}, {"device", a.device},
      {"training", a.training},           {"gemms", gemms},   {"totals", totals_json(a.totals)}};
}

ModelAnalysis analysis_from_json(const json& j) {
  const std::string ctx = "analysis";
  const auto schema = required<std::string>(j, "schema", ctx);
  if (schema != "mcr.shape.analysis/1") {
    throw InvalidArgument(
        fmt::format("analysis: schema '{}' is not 'mcr.shape.analysis/1'", schema));
  }
  ModelAnalysis a;
  a.model = required<json>(j, "model", ctx).get<ModelShape>();
  a.device = required<std::string>(j, "device", ctx);
  a.training = required<bool>(j, "training", ctx);
  for (const auto& g : required<json>(j, "gemms", ctx)) {
    const auto scope = required<std::string>(g, "scope", "gemm");
    if (scope != "layer" && scope != "model") {
      throw InvalidArgument(fmt::format("gemm: scope '{}' must be 'layer' or 'model'", scope));
    }
    (scope == "layer" ? a.layer : a.logits).push_back(gemm_result_from_json(g));
  }
  a.totals = totals_from_json(required<json>(j, "totals", ctx));
  return a;
}

json findings_json(const std::vector<Finding>& findings) {
  json out = json::array();
  for (const auto& f : findings) {
    out.push_back({{"id", f.id},
                   {"severity", to_string(f.severity)},
                   {"message", f.message},
                   {"fix", f.fix}});
  }
  return out;
}

json advice_json(const Advice& advice) {
  json cands = json::array();
  for (const auto& c : advice.candidates) {
    cands.push_back({{"model", c.shape},
                     {"params", c.params},
                     {"param_delta", c.param_delta},
                     {"speedup", c.speedup},
                     {"model_speedup", c.model_speedup},
                     {"totals", totals_json(c.totals)},
                     {"fixes", c.fixes},
                     {"changes", c.changes},
                     {"fields_changed", c.fields_changed},
                     {"significant", c.significant}});
  }
  return json{{"input_params", advice.input_params},
              {"input_totals", totals_json(advice.input_totals)},
              {"evaluated", advice.evaluated},
              {"tp_sizes", advice.tp_sizes},
              {"uncertainty", advice.uncertainty},
              {"uncertainty_source", advice.uncertainty_source},
              {"candidates", cands}};
}

json params_json(const ParamCount& p) {
  return json{{"embedding", p.embedding},
              {"position", p.position},
              {"attention", p.attention},
              {"mlp", p.mlp},
              {"router", p.router},
              {"norm", p.norm},
              {"total", p.total},
              {"active", p.active},
              {"non_embedding", p.non_embedding}};
}

json flops_json(const FlopCount& f) {
  return json{{"forward_per_token", f.forward_per_token},
              {"forward_per_step", f.forward_per_step},
              {"training_per_step", f.training_per_step},
              {"training_recompute_per_step", f.training_recompute_per_step}};
}

json memory_json(const MemoryEstimate& m) {
  return json{{"weights_bytes", m.weights},     {"gradients_bytes", m.gradients},
              {"optimizer_bytes", m.optimizer}, {"activations_bytes", m.activations},
              {"kv_cache_bytes", m.kv_cache},   {"total_bytes", m.total}};
}

std::string analysis_csv(const ModelAnalysis& a) {
  std::string out =
      "scope,role,pass,m,n,k,batch,dtype,flops,bytes,arithmetic_intensity,predicted_time_s,"
      "predicted_tflops,tile_m,tile_n,split_k,waves,wave_efficiency,tile_efficiency,"
      "alignment_factor,memory_bound,explanation\n";
  const auto row = [&out](const char* scope, const GemmResult& r) {
    const Gemm& g = r.gemm;
    const GemmPrediction& p = r.prediction;
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{},{:.4f},"
        "{:.4f},{:.4f},{},{}\n",
        scope, g.role, to_string(g.pass), g.m, g.n, g.k, g.batch, to_string(g.dtype), g.flops(),
        g.bytes(), g.arithmetic_intensity(), p.time_s, p.tflops, p.tile.m, p.tile.n, p.split_k,
        p.waves, p.wave_efficiency, p.tile_efficiency, p.alignment_factor, p.memory_bound ? 1 : 0,
        csv_escape(p.explanation));
  };
  for (const auto& r : a.layer)
    row("layer", r);
  for (const auto& r : a.logits)
    row("model", r);
  return out;
}

std::string sweep_csv(const std::string& field, const std::vector<SweepPoint>& points) {
  std::string out = fmt::format(
      "{},valid,params,time_per_layer_s,layer_tflops,model_tflops,tokens_per_s_per_gpu,mfu,"
      "reason\n",
      field);
  for (const auto& p : points) {
    if (p.valid) {
      out += fmt::format("{},1,{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.4f},\n", p.value, p.params,
                         p.totals.time_per_layer_s, p.totals.tflops, p.totals.model_tflops,
                         p.totals.tokens_per_s_per_gpu, p.totals.mfu);
    } else {
      out += fmt::format("{},0,,,,,,,{}\n", p.value, csv_escape(p.reason));
    }
  }
  return out;
}

}  // namespace mcr::codesign
