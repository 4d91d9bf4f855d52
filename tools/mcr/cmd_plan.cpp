// `mcr plan`: training step time, TFLOP/s, memory per GPU and the best parallel layout, from the
// codesign GEMM model and the system's links or measured tuning tables. The planning itself lives
// in mcr::plan; this file parses flags and prints.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <limits>
#include <string>

#include "commands.hpp"
#include "mcr/codesign/device.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/local_device.hpp"
#include "mcr/plan/request.hpp"
#include "mcr/plan/search.hpp"
#include "plan_flags.hpp"
#include "plan_print.hpp"
#include "refuse_flags.hpp"
#include "shape_options.hpp"

namespace mcr::cli {

namespace {

struct PlanArgs {
  ModelFlags model;  // also holds --tp, --micro-batch and --dtype
  plan::PlanRequest request;
  std::string device;
  std::string system = "dgx-a100";
  bool no_peak_probe = false;
  std::vector<std::string> comm_tables;
  std::string rules;
  bool json = false;
  bool search = false;
  bool advise = false;
  std::string validate;
  int top = 10;
  double budget = 0.02;
};

/// The system's device: --device, else the catalog entry the system names, else (local-cpu) this
/// machine's CPU with one core per rank, its fp32 peak measured by the quick SGEMM peak probe on
/// one core unless --no-peak-probe asks for the estimate from CPU facts. This choice stays here:
/// it needs mcr::gemmbench (optional, CBLAS), which mcr::plan must not depend on.
bool uses_local_cpu(const PlanArgs& a, const plan::SystemSpec& sys) {
  return a.device == "local" || (a.device.empty() && sys.device == codesign::bench::kLocalCpuName);
}

codesign::DeviceSpec pick_device(const PlanArgs& a, const plan::SystemSpec& sys) {
  if (!uses_local_cpu(a, sys)) {
    return a.device.empty() ? codesign::device_from_catalog(sys.device)
                            : codesign::resolve_device(a.device);
  }
  return codesign::bench::local_cpu_device({1, !a.no_peak_probe});
}

void run_validation(const PlanArgs& a) {
  const auto rows = plan::validate_runs(plan::load_published_runs(a.validate));
  if (a.json) {
    std::cout << plan::to_json(rows).dump(2) << "\n";
  } else {
    fmt::print("{}", format_validation(rows));
  }
}

// The modes read different flags: one mode at a time, and a flag the chosen mode would ignore is
// refused, naming it (a --comm-table given with --validate was never opened, --search with
// --advise was dropped).
void refuse_ignored(const PlanArgs& a, const CLI::App& cmd) {
  const int modes = (a.search ? 1 : 0) + (a.advise ? 1 : 0) + (a.validate.empty() ? 0 : 1);
  if (modes > 1) {
    throw InvalidArgument(
        "--search, --advise, --validate: give one of them (each is a mode of its own)");
  }
  if (!a.validate.empty()) {
    // The runs of the file bring their own model, layout, system and device.
    refuse_all_but(cmd, {"--validate", "--json"},
                   "does not apply to --validate: each run of the file gives its model, layout, "
                   "system and device");
  }
  if (!a.search && !a.advise) {
    refuse_flags(cmd, {"--top"}, "applies to --search and --advise (a plan has one layout)");
  }
  if (!a.advise) refuse_flags(cmd, {"--budget"}, "applies to --advise (the shapes it may try)");
  if (a.comm_tables.empty()) {
    refuse_flags(cmd, {"--rules"},
                 "chooses among the backends of a --comm-table; without one every collective is "
                 "priced by the system's alpha-beta model");
  }
}

// Flags that only some models or devices read: refused where they would be ignored.
void refuse_ignored_by(const PlanArgs& a, const CLI::App& cmd, const codesign::ModelShape& model,
                       const plan::SystemSpec& sys) {
  if (!model.is_moe()) {
    refuse_flags(cmd, {"--capacity-factor", "--moe-dispatcher", "--moe-glu-clamp"},
                 fmt::format("applies to MoE models; '{}' has no experts (experts = {})",
                             model.name, model.experts));
  }
  if (!uses_local_cpu(a, sys)) {
    refuse_flags(cmd, {"--no-peak-probe"},
                 fmt::format("applies to the local CPU (--device local, --system local-cpu), "
                             "whose peak the probe measures; device '{}' takes its peak from {}",
                             a.device.empty() ? sys.device : a.device,
                             a.device.empty() ? "the catalog" : "its catalog entry or file"));
  }
}

void run(const PlanArgs& a, const CLI::App& cmd) {
  refuse_ignored(a, cmd);
  // --tp and --micro-batch are model flags too (`mcr shape` takes them); the layout pins them.
  plan::PlanRequest req = a.request;
  if (a.model.t) req.tp = static_cast<int>(*a.model.t);
  req.micro_batch = a.model.b;
  const auto options = plan::to_plan_options(req);
  if (!a.validate.empty()) {
    run_validation(a);
    return;
  }
  const auto model = build_model(a.model);
  const auto sys = plan::resolve_system(a.system);
  refuse_ignored_by(a, cmd, model, sys);
  const auto dev = pick_device(a, sys);
  const auto comm = plan::make_comm_model(sys, dev, a.comm_tables, a.rules);
  const auto space = a.advise || a.search ? plan::to_search_space(req, sys) : plan::SearchSpace{};
  // The peak shown is the one MFU divides by: FP8's under an FP8 recipe.
  const auto search_peak = plan::peak_dtype(model.dtype, space.fp8);
  if (a.advise) {
    codesign::AdvisorOptions opts;
    opts.budget = a.budget;
    opts.top = a.top;
    const auto pairs = plan::advise_with_layouts(model, dev, comm, space, opts, options);
    if (a.json) {
      std::cout << plan::to_json(pairs).dump(2) << "\n";
    } else {
      fmt::print("{}\n{}\n{}", describe_model(model), peak_line(dev, search_peak),
                 format_advice(pairs));
    }
    if (pairs.empty()) exit_code() = 3;  // as a plan that does not fit: no pair runs
    return;
  }
  if (a.search) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto found = plan::search_layouts(model, dev, comm, space, a.top, options);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (a.json) {
      std::cout << plan::to_json(found, secs, dev, search_peak).dump(2) << "\n";
    } else {
      fmt::print("{}\nsystem: {} ({} GPUs), device: {}\n{}\n{}", describe_model(model), sys.name,
                 sys.total_gpus(), dev.name, peak_line(dev, search_peak),
                 format_search(found, secs));
    }
    if (found.ranked.empty()) exit_code() = 3;  // as a plan that does not fit: no layout runs
    return;
  }
  const auto r = plan::plan_step(model, dev, comm,
                                 plan::resolve_layout(plan::to_layout(req), model, sys), options);
  if (a.json) {
    std::cout << plan::to_json(r, dev, model.dtype).dump(2) << "\n";
  } else {
    // The header shows the model as planned: tp and micro-batch come from the layout (a model
    // file's t and b are not the layout's, and its header showed them though the plan used 1).
    codesign::ModelShape planned = model;
    planned.t = r.layout.tp;
    planned.b = r.layout.micro_batch;
    fmt::print("{}\n{}{}", describe_model(planned),
               peak_line(dev, plan::peak_dtype(model.dtype, r.layout.fp8)), format_plan(r));
  }
  if (!r.memory.fits) exit_code() = 3;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan",
      "predict training step time, TFLOP/s and memory per GPU of a parallel layout; "
      "--search ranks layouts, --advise joins the shape advisor");
  add_model_options(cmd, args->model);
  cmd->add_option("--device", args->device,
                  "device catalog name or JSON file (default: the system's device; 'local' = this "
                  "CPU)");
  cmd->add_flag("--no-peak-probe", args->no_peak_probe,
                "local-cpu: keep the fp32 peak estimated from CPU facts instead of measuring it "
                "with the quick SGEMM probe (deterministic output)");
  cmd->add_option("--system", args->system, "system catalog name or JSON file (data/systems)")
      ->capture_default_str();
  add_layout_flags(cmd, args->request);
  cmd->add_option("--comm-table", args->comm_tables,
                  "measured `mcr tune` table: FILE (every tier), intra=FILE or inter=FILE");
  cmd->add_option("--rules", args->rules,
                  "selection rules as MCR_RULES, applied before the tables");
  cmd->add_flag("--json", args->json, "JSON output");
  cmd->add_flag("--search", args->search,
                "rank every valid layout for --gpus (needs --global-batch)");
  cmd->add_flag("--advise", args->advise,
                "search shapes near the model (shape advisor) and the best layout of each");
  cmd->add_option("--validate", args->validate,
                  "predict the published runs of FILE (docs/planner.md) and print the errors");
  cmd->add_option("--top", args->top, "layouts or pairs to list (at least 1)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--budget", args->budget, "--advise: allowed relative parameter change")
      ->capture_default_str();
  cmd->callback([args, cmd] { run(*args, *cmd); });
}

}  // namespace mcr::cli
