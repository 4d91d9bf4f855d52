#include "mcr/plan/validation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <string_view>

#include "codesign/json_util.hpp"
#include "mcr/codesign/device.hpp"
#include "mcr/errors.hpp"
#include "mcr/plan/system.hpp"
#include "option_rules.hpp"

namespace mcr::plan {

namespace {

using codesign::detail::optional;
using codesign::detail::refuse_unknown_keys;

template <typename Enum>
Enum read_name(const nlohmann::json& j, const char* field, const std::string& context,
               const std::string& fallback, Enum (*parse)(const std::string&)) {
  std::string name = fallback;
  optional(j, field, context, name);
  return parse(name);
}

}  // namespace

Layout layout_from_json(const nlohmann::json& j) {
  static const std::string ctx = "layout";
  refuse_unknown_keys(j,
                      {"gpus",
                       "tp",
                       "pp",
                       "dp",
                       "micro_batch",
                       "global_batch",
                       "interleave",
                       "recompute",
                       "recompute_modules",
                       "sequence_parallel",
                       "zero",
                       "allow_tp_across_nodes",
                       "dp_overlap",
                       "cp",
                       "ep",
                       "etp",
                       "capacity_factor",
                       "moe_dispatcher",
                       "fp8",
                       "fp8_params",
                       "distributed_optimizer",
                       "tp_comm_overlap",
                       "pp_comm_overlap",
                       "uneven_pipeline",
                       "microbatches"},  // derived, in a plan's output: not read
                      "layout");
  // Integers must be written as integers and fit: 8.5 GPUs or a tp of true are mistakes to name,
  // not values to truncate.
  Layout l;
  optional(j, "gpus", ctx, l.gpus);
  optional(j, "tp", ctx, l.tp);
  optional(j, "pp", ctx, l.pp);
  optional(j, "dp", ctx, l.dp);
  optional(j, "micro_batch", ctx, l.micro_batch);
  optional(j, "global_batch", ctx, l.global_batch);
  optional(j, "interleave", ctx, l.interleave);
  l.recompute = read_name(j, "recompute", ctx, "none", parse_recompute);
  optional(j, "recompute_modules", ctx, l.recompute_modules);
  optional(j, "sequence_parallel", ctx, l.sequence_parallel);
  optional(j, "zero", ctx, l.zero);
  optional(j, "allow_tp_across_nodes", ctx, l.allow_tp_across_nodes);
  optional(j, "dp_overlap", ctx, l.dp_overlap);
  optional(j, "cp", ctx, l.cp);
  optional(j, "ep", ctx, l.ep);
  optional(j, "etp", ctx, l.etp);
  optional(j, "capacity_factor", ctx, l.capacity_factor);
  l.moe_dispatcher = read_name(j, "moe_dispatcher", ctx, "alltoall", parse_dispatcher);
  l.fp8 = read_name(j, "fp8", ctx, "none", parse_fp8);
  optional(j, "fp8_params", ctx, l.fp8_params);
  optional(j, "distributed_optimizer", ctx, l.distributed_optimizer);
  optional(j, "tp_comm_overlap", ctx, l.tp_comm_overlap);
  optional(j, "pp_comm_overlap", ctx, l.pp_comm_overlap);
  optional(j, "uneven_pipeline", ctx, l.uneven_pipeline);
  return l;
}

PlanOptions options_from_json(const nlohmann::json& j) {
  static const std::string ctx = "options";
  refuse_unknown_keys(j,
                      {"optimizer_bytes_per_param", "grad_bytes_per_param", "dp_bucket_mb",
                       "causal", "moe_glu_clamp"},
                      "options");
  PlanOptions o;
  optional(j, "optimizer_bytes_per_param", ctx, o.optimizer_bytes_per_param);
  optional(j, "grad_bytes_per_param", ctx, o.grad_bytes_per_param);
  double bucket_mb = o.dp_bucket_bytes / 1e6;
  optional(j, "dp_bucket_mb", ctx, bucket_mb);
  optional(j, "causal", ctx, o.causal);
  optional(j, "moe_glu_clamp", ctx, o.moe_glu_clamp);
  // The rules `mcr plan` applies to its flags (to_plan_options).
  check_bytes_per_param("options.optimizer_bytes_per_param", o.optimizer_bytes_per_param);
  check_bytes_per_param("options.grad_bytes_per_param", o.grad_bytes_per_param,
                        " (0: the model's dtype)");
  check_dp_bucket_mb("options.dp_bucket_mb", bucket_mb);
  o.dp_bucket_bytes = bucket_mb * 1e6;
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
    refuse_unknown_keys(j, {"description", "runs"}, "validation file");
    std::size_t index = 0;
    for (const auto& r : j.at("runs")) {
      const std::string context = fmt::format("runs[{}]", index++);
      // A misspelt "system" planned the run on the default system, and the error was measured
      // against the wrong machine.
      refuse_unknown_keys(
          r, {"name", "source", "system", "model", "layout", "options", "assumptions", "published"},
          context);
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
      refuse_unknown_keys(pub, {"step_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu"},
                          fmt::format("run '{}': published", p.name));
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
