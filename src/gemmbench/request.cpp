#include "mcr/gemmbench/request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include <sstream>

#include "mcr/codesign/model.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/local_device.hpp"
#include "mcr/gemmbench/range.hpp"
#include "mcr/gemmbench/sweep.hpp"

namespace mcr::codesign::bench {
namespace {

// The values in the order given, each once: a repeated -m value, dtype, preset or model would time
// the same GEMMs again (twice the run time) and count them twice in --compare's statistics.
template <class T>
std::vector<T> each_once(std::vector<T> values) {
  std::vector<T> out;
  std::set<T> seen;  // a dimension may list 100,000 values
  for (auto& v : values)
    if (seen.insert(v).second) out.push_back(std::move(v));
  return out;
}

bool names_a_device(const GemmRequest& r) {
  return !r.device.empty() && r.device != "local";
}

std::vector<Gemm> model_gemms(const GemmRequest& r, const std::vector<DType>& dtypes,
                              std::vector<std::string>* warnings) {
  std::vector<ModelShape> shapes;
  for (const auto& p : each_once(r.presets))
    shapes.push_back(load_preset(p));
  for (const auto& path : each_once(r.models)) {
    HfImport imported = import_hf_config_file(path, "request.models");
    // What the importer could not model (an unknown model_type read as Llama, keys not read):
    // `mcr shape --config` says it, and the GEMMs measured here come from the same shape.
    if (warnings != nullptr) {
      for (const auto& w : imported.warnings)
        warnings->push_back(fmt::format("{}: {}", path, w));
    }
    shapes.push_back(std::move(imported.shape));
  }
  std::vector<Gemm> out;
  for (auto& shape : shapes) {
    if (r.seq > 0) shape.s = r.seq;
    if (r.micro_batch > 0) shape.b = r.micro_batch;
    if (r.tp > 0) shape.t = r.tp;
    shape.validate();
    // Every kind of layer the model has: its leading dense layers (DeepSeek's MLP of d_ff) and
    // its sliding-window layers (gpt-oss, Gemma-3) run GEMMs the main layer does not, which the
    // analysis sums and --compare judged without them. Kinds name their GEMMs where there are
    // several; a GEMM another kind already runs (their attention, mostly) is listed once.
    const auto groups = layer_groups(shape);
    std::vector<Gemm> gemms;
    for (const auto& group : groups) {
      const auto earlier_kinds = gemms.size();  // a layer's own gate and up may share a shape
      for (auto g : layer_gemms(group.shape, r.training, group.span)) {
        const auto end = gemms.begin() + static_cast<std::ptrdiff_t>(earlier_kinds);
        const bool listed = std::any_of(gemms.begin(), end, [&](const Gemm& o) {
          return o.m == g.m && o.n == g.n && o.k == g.k && o.batch == g.batch && o.pass == g.pass;
        });
        if (listed) continue;
        if (groups.size() > 1) g.role = group.kind + " " + g.role;
        gemms.push_back(std::move(g));
      }
    }
    const auto logits = logit_gemms(shape, r.training);
    gemms.insert(gemms.end(), logits.begin(), logits.end());
    // An explicit dtype replaces the model's (e.g. fp32 on a CPU without bf16 GEMM).
    const auto run_dtypes = dtypes.empty() ? std::vector<DType>{shape.dtype} : dtypes;
    for (const auto dt : run_dtypes) {
      for (auto g : gemms) {
        g.dtype = dt;
        // Always named: what runs here is a plain GEMM, which writes its output, and is predicted
        // as one; the analysis's own "attn_flash" is priced as the fused kernel (Gemm::bytes).
        g.role = (shape.name.empty() ? std::string("model") : shape.name) + ":" + g.role;
        out.push_back(std::move(g));
      }
    }
  }
  return out;
}

}  // namespace

std::vector<DType> parse_dtype_lists(const std::vector<std::string>& lists) {
  std::vector<DType> out;
  for (const auto& list : lists) {
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) {
      try {
        out.push_back(parse_dtype(item));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(fmt::format("request.dtypes: {}", e.what()));
      }
    }
  }
  return out;
}

std::vector<Gemm> requested_gemms(const GemmRequest& r) {
  return requested_gemms(r, nullptr);
}

std::vector<Gemm> requested_gemms(const GemmRequest& r, std::vector<std::string>* warnings) {
  const bool grid_given = !r.m.empty() || !r.n.empty() || !r.k.empty();
  const bool models_given = !r.presets.empty() || !r.models.empty();
  // A setting of one kind of GEMM given without it would be dropped without a word.
  if (!grid_given && r.batch != "1") {
    throw InvalidArgument(fmt::format(
        "request.batch '{}' applies to the m/n/k grid only (a model's batched GEMMs follow from "
        "its shape): give request.m/n/k or drop it",
        r.batch));
  }
  if (!models_given) {
    const std::pair<const char*, std::int64_t> model_only[] = {
        {"request.seq", r.seq}, {"request.micro_batch", r.micro_batch}, {"request.tp", r.tp}};
    for (const auto& [name, value] : model_only) {
      if (value > 0) {
        throw InvalidArgument(fmt::format(
            "{} {} applies to the models' GEMMs only: give request.presets or request.models, or "
            "drop it",
            name, value));
      }
    }
    if (r.training) {
      throw InvalidArgument(
          "request.training applies to the models' GEMMs only (their backward GEMMs): give "
          "request.presets or request.models, or drop it");
    }
  }
  const auto dtypes = each_once(parse_dtype_lists(r.dtypes));
  auto gemms = model_gemms(r, dtypes, warnings);
  if (grid_given) {
    if (r.m.empty() || r.n.empty() || r.k.empty()) {
      throw InvalidArgument(
          "request.m, request.n and request.k must be given together (each a list or "
          "start:end:step)");
    }
    const auto m = each_once(parse_dim_values(r.m, "request.m"));
    const auto n = each_once(parse_dim_values(r.n, "request.n"));
    const auto k = each_once(parse_dim_values(r.k, "request.k"));
    const auto batch = each_once(parse_dim_values(r.batch, "request.batch"));
    const auto grid_dtypes = dtypes.empty() ? std::vector<DType>{DType::fp32} : dtypes;
    // Each dimension is bounded (kMaxDimValues); their product is the number of GEMMs, which is
    // bounded too, before any is made (10^10 of them would exhaust memory first).
    double count = static_cast<double>(grid_dtypes.size());
    for (const auto* values : {&m, &n, &k, &batch})
      count *= static_cast<double>(values->size());
    if (count > static_cast<double>(kMaxGridGemms)) {
      throw InvalidArgument(fmt::format(
          "request.m/n/k/batch: the grid is {} m x {} n x {} k x {} batch x {} dtype(s) = {:.0f} "
          "GEMMs, more than {}: give fewer values",
          m.size(), n.size(), k.size(), batch.size(), grid_dtypes.size(), count, kMaxGridGemms));
    }
    const auto grid = grid_gemms(m, n, k, batch, grid_dtypes);
    gemms.insert(gemms.end(), grid.begin(), grid.end());
  }
  if (gemms.empty()) {
    throw InvalidArgument(
        "nothing to run: give request.m/request.n/request.k (lists or start:end:step), "
        "request.presets NAME or request.models CONFIG");
  }
  return gemms;
}

std::unique_ptr<GemmRunner> make_runner(const GemmRequest& r) {
  if (r.backend == "cpu") return make_cblas_runner(r.threads);
  if (r.backend == "gpu") return make_cublaslt_runner(r.gpu);
  if (cublaslt_available() && cuda_device_count() > r.gpu) return make_cublaslt_runner(r.gpu);
  return make_cblas_runner(r.threads);
}

std::optional<DeviceSpec> prediction_device(const GemmRequest& r, const GemmRunner& runner) {
  if (names_a_device(r)) return resolve_device(r.device);
  try {
    if (runner.backend() == "cublaslt") {
      const auto gpu = detect_gpu(r.gpu);
      if (!gpu) throw Error("the GPU disappeared");
      return gpu_device_spec(*gpu);
    }
    return local_cpu_device({r.threads, r.probe_peak});
  } catch (const InvalidArgument&) {
    if (r.compare) throw;
    return std::nullopt;
  }
}

void check_measure_options(const MeasureOptions& m) {
  if (m.min_samples < 1 || m.max_samples < m.min_samples) {
    throw InvalidArgument(fmt::format(
        "request.measure.min_samples {} and request.measure.max_samples {}: need 1 <= the first "
        "<= the second",
        m.min_samples, m.max_samples));
  }
  // Written so that NaN fails them (it compares false): a NaN time sampled every GEMM to the
  // limit, and was saved as null, which no reader of the file then took.
  if (!(m.min_seconds >= 0) || !(m.max_seconds >= m.min_seconds) || !std::isfinite(m.max_seconds)) {
    throw InvalidArgument(fmt::format(
        "request.measure.min_seconds {} and request.measure.max_seconds {}: need 0 <= the first "
        "<= the second, both finite",
        m.min_seconds, m.max_seconds));
  }
  if (m.warmup_iterations < 0 || !(m.warmup_seconds >= 0) || !std::isfinite(m.warmup_seconds)) {
    throw InvalidArgument(fmt::format(
        "request.measure.warmup_iterations {} and request.measure.warmup_seconds {}: must not be "
        "negative (and the seconds finite)",
        m.warmup_iterations, m.warmup_seconds));
  }
}

PreparedSweep prepare_sweep(const GemmRequest& r) {
  PreparedSweep p;
  p.gemms = requested_gemms(r, &p.warnings);
  check_measure_options(r.measure);
  if (r.measure.clock == Clock::process_cpu && (r.backend == "gpu" || r.threads != 1)) {
    throw InvalidArgument(
        "request.measure.clock cpu: process CPU time measures a GEMM only on the CPU backend with "
        "request.threads 1");
  }
  p.runner = make_runner(r);
  if (r.measure.clock == Clock::process_cpu && p.runner->backend() != "cblas") {
    // request.backend auto chose the GPU.
    throw InvalidArgument(fmt::format(
        "request.measure.clock cpu: process CPU time measures a GEMM only on the CPU backend, and "
        "request.backend {} chose {}: give request.backend cpu",
        r.backend, p.runner->description()));
  }
  for (const auto& g : p.gemms) {
    // Refused before anything runs: past the first GEMM, the error would end the sweep and lose
    // every measurement taken.
    p.runner->check(g);
    if (!p.runner->supports(g.dtype)) {
      // Without request.dtypes the dtype is the model's: say so, and what to give.
      throw UnsupportedError(
          r.dtypes.empty()
              ? fmt::format("request.dtypes: the model's dtype {} cannot run on the {} backend "
                            "({}); give request.dtypes (e.g. fp32)",
                            to_string(g.dtype), p.runner->backend(), p.runner->description())
              : fmt::format("request.dtypes: {} cannot run on the {} backend ({})",
                            to_string(g.dtype), p.runner->backend(), p.runner->description()));
    }
  }
  p.device = prediction_device(r, *p.runner);
  if (r.compare) {
    // Checked before measuring, so a sweep is not thrown away at the end.
    for (const auto& g : p.gemms) {
      if (!p.device->supports(g.dtype)) {
        throw InvalidArgument(
            fmt::format("request.compare: device '{}' has no {} peak to predict with",
                        p.device->name, to_string(g.dtype)));
      }
    }
  }
  return p;
}

MeasurementSet load_for_report(const GemmRequest& r, const std::string& path) {
  auto set = load_measurements(path);
  if (names_a_device(r)) set.device = resolve_device(r.device);
  if (r.compare && !set.device) {
    throw InvalidArgument(
        fmt::format("request.compare: {} records no device; name one with request.device", path));
  }
  return set;
}

}  // namespace mcr::codesign::bench
