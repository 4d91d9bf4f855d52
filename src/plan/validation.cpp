#include "mcr/plan/validation.hpp"

#include <fmt/core.h>

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
  l.sequence_parallel = j.value("sequence_parallel", false);
  l.zero = j.value("zero", 0);
  l.allow_tp_across_nodes = j.value("allow_tp_across_nodes", false);
  l.dp_overlap = j.value("dp_overlap", true);
  return l;
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
      const auto& pub = r.at("published");
      p.step_time_s = pub.value("step_time_s", 0.0);
      p.tflops_per_gpu = pub.value("tflops_per_gpu", 0.0);
      if (p.step_time_s <= 0 && p.tflops_per_gpu <= 0) {
        throw InvalidArgument(
            fmt::format("run '{}': 'published' needs step_time_s or tflops_per_gpu", p.name));
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
    row.predicted = plan_step(run.model, dev, comm, resolve_layout(run.layout, run.model, sys));
    if (run.step_time_s > 0) {
      row.quantity = "step_time_s";
      row.published = run.step_time_s;
      row.prediction = row.predicted.step_time_s;
    } else {
      row.quantity = "tflops_per_gpu";
      row.published = run.tflops_per_gpu;
      row.prediction = row.predicted.tflops_per_gpu;
    }
    row.error = row.prediction / row.published - 1;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace mcr::plan
