#include "mcr/plan/validation.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "mcr/codesign/device.hpp"
#include "mcr/errors.hpp"
#include "mcr/plan/system.hpp"

namespace mcr::plan {

Layout layout_from_json(const nlohmann::json& j) {
  Layout l;
  l.gpus = j.value("gpus", 0);
  l.tp = j.value("tp", 1);
  l.pp = j.value("pp", 1);
  l.dp = j.value("dp", 0);
  l.micro_batch = j.value("micro_batch", std::int64_t{1});
  l.global_batch = j.value("global_batch", std::int64_t{0});
  l.interleave = j.value("interleave", 1);
  l.recompute = parse_recompute(j.value("recompute", std::string("none")));
  if (j.contains("recompute_modules")) {
    l.recompute_modules = j.at("recompute_modules").get<std::vector<std::string>>();
  }
  l.sequence_parallel = j.value("sequence_parallel", false);
  l.zero = j.value("zero", 0);
  l.allow_tp_across_nodes = j.value("allow_tp_across_nodes", false);
  l.dp_overlap = j.value("dp_overlap", true);
  l.cp = j.value("cp", 1);
  l.ep = j.value("ep", 1);
  l.etp = j.value("etp", 0);
  l.capacity_factor = j.value("capacity_factor", 0.0);
  l.moe_dispatcher = parse_dispatcher(j.value("moe_dispatcher", std::string("alltoall")));
  l.fp8 = parse_fp8(j.value("fp8", std::string("none")));
  l.fp8_params = j.value("fp8_params", false);
  l.distributed_optimizer = j.value("distributed_optimizer", false);
  l.tp_comm_overlap = j.value("tp_comm_overlap", false);
  l.pp_comm_overlap = j.value("pp_comm_overlap", false);
  l.uneven_pipeline = j.value("uneven_pipeline", false);
  return l;
}

PlanOptions options_from_json(const nlohmann::json& j) {
  PlanOptions o;
  o.optimizer_bytes_per_param = j.value("optimizer_bytes_per_param", o.optimizer_bytes_per_param);
  o.grad_bytes_per_param = j.value("grad_bytes_per_param", o.grad_bytes_per_param);
  o.dp_bucket_bytes = j.value("dp_bucket_mb", o.dp_bucket_bytes / 1e6) * 1e6;
  o.causal = j.value("causal", o.causal);
  o.moe_glu_clamp = j.value("moe_glu_clamp", o.moe_glu_clamp);
  return o;
}

std::vector<ErrorSummary> summarize(const std::vector<ValidationRow>& rows) {
  std::vector<ErrorSummary> out;
  const auto add = [&out](const std::string& group, double err) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&group](const ErrorSummary& s) { return s.group == group; });
    if (it == out.end()) {
      out.push_back({group, 0, 0, 0, 0});
      it = out.end() - 1;
    }
    ++it->runs;
    const double n = static_cast<double>(it->runs);
    it->mean_abs += (std::abs(err) - it->mean_abs) / n;
    it->mean += (err - it->mean) / n;
    it->max_abs = std::max(it->max_abs, std::abs(err));
  };
  for (const auto& r : rows) {
    const auto& l = r.predicted.layout;
    // FP8 recipes together: the dtype the linear layers run in.
    const std::string precision =
        l.fp8 != Fp8::none ? "fp8" : codesign::to_string(r.predicted.model.dtype);
    add(r.predicted.system + " " + precision, r.step_error);
  }
  std::sort(out.begin(), out.end(),
            [](const ErrorSummary& a, const ErrorSummary& b) { return a.group < b.group; });
  for (const auto& r : rows)
    add("all", r.step_error);
  return out;
}

std::vector<PublishedRun> load_published_runs(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in)
    throw InvalidArgument(fmt::format("validation file '{}' cannot be opened", path.string()));
  std::vector<PublishedRun> runs;
  try {
    const auto j = nlohmann::json::parse(in);
    for (const auto& r : j.at("runs")) {
      PublishedRun p;
      p.name = r.at("name").get<std::string>();
      p.source = r.at("source").get<std::string>();
      p.system = r.value("system", std::string("dgx-a100"));
      p.model = r.at("model").get<codesign::ModelShape>();
      if (p.model.d_ff == 0) p.model.d_ff = 4 * p.model.h;
      p.layout = layout_from_json(r.at("layout"));
      if (r.contains("options")) p.options = options_from_json(r.at("options"));
      if (r.contains("assumptions")) {
        p.assumptions = r.at("assumptions").get<std::vector<std::string>>();
      }
      const auto& pub = r.at("published");
      p.step_time_s = pub.value("step_time_s", 0.0);
      p.tflops_per_gpu = pub.value("tflops_per_gpu", 0.0);
      p.tokens_per_s_per_gpu = pub.value("tokens_per_s_per_gpu", 0.0);
      if (p.step_time_s <= 0 && p.tflops_per_gpu <= 0 && p.tokens_per_s_per_gpu <= 0) {
        throw InvalidArgument(fmt::format(
            "run '{}': 'published' needs step_time_s, tflops_per_gpu or tokens_per_s_per_gpu",
            p.name));
      }
      runs.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("validation file '{}': {}", path.string(), e.what()));
  }
  return runs;
}

std::vector<ValidationRow> validate_runs(const std::vector<PublishedRun>& runs) {
  std::vector<ValidationRow> rows;
  for (const auto& run : runs) {
    const auto sys = resolve_system(run.system);
    const auto dev = codesign::device_from_catalog(sys.device);
    const CommModel comm(sys);
    ValidationRow row;
    row.run = run;
    row.predicted =
        plan_step(run.model, dev, comm, resolve_layout(run.layout, run.model, sys), run.options);
    if (run.step_time_s > 0) {
      row.quantity = "step_time_s";
      row.published = run.step_time_s;
      row.prediction = row.predicted.step_time_s;
    } else if (run.tflops_per_gpu > 0) {
      row.quantity = "tflops_per_gpu";
      row.published = run.tflops_per_gpu;
      row.prediction = row.predicted.tflops_per_gpu;
    } else {
      row.quantity = "tokens_per_s_per_gpu";
      row.published = run.tokens_per_s_per_gpu;
      row.prediction = row.predicted.tokens_per_s_per_gpu;
    }
    row.error = row.prediction / row.published - 1;
    // A rate's error is the inverse of the step time's.
    row.step_error = row.quantity == "step_time_s" ? row.error : row.published / row.prediction - 1;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace mcr::plan
