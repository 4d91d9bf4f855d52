#include "mcr/codesign/advisor.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/guidelines.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

std::int64_t round_up(std::int64_t x, std::int64_t m) {
  return (x + m - 1) / m * m;
}

std::string describe_changes(const ModelShape& from, const ModelShape& to) {
  std::string s;
  const bool both_mha = (from.kv_heads() == from.a && to.kv_heads() == to.a) ||
                        (from.kv_heads() == 1 && to.kv_heads() == 1);
  for (const char* field : {"h", "a", "a_kv", "L", "d_ff", "d_ff_expert", "v"}) {
    if (both_mha && std::string(field) == "a_kv") continue;  // follows a
    const std::int64_t x = get_dimension(from, field);
    const std::int64_t y = get_dimension(to, field);
    if (x != y) s += fmt::format("{}{} {}->{}", s.empty() ? "" : ", ", field, x, y);
  }
  return s.empty() ? "unchanged" : s;
}

int count_changes(const ModelShape& from, const ModelShape& to) {
  int n = 0;
  const bool both_mha = from.kv_heads() == from.a && to.kv_heads() == to.a;
  const bool both_mqa = from.kv_heads() == 1 && to.kv_heads() == 1;
  for (const char* field : {"h", "a", "a_kv", "L", "d_ff", "d_ff_expert", "v"}) {
    if ((both_mha || both_mqa) && std::string(field) == "a_kv") continue;  // follows a
    if (get_dimension(from, field) != get_dimension(to, field)) ++n;
  }
  return n;
}

// A head count allows tensor parallelism t when t | a and a_kv splits (t | a_kv) or replicates
// (a_kv | t) evenly: the rule ModelShape::validate() enforces for the model's own t.
bool allows_tp(std::int64_t a, std::int64_t a_kv, const std::vector<std::int64_t>& sizes) {
  return std::all_of(sizes.begin(), sizes.end(),
                     [&](std::int64_t t) { return tp_splits_heads(a, a_kv, t); });
}

std::vector<std::int64_t> usable_tp_sizes(const ModelShape& m,
                                          const std::vector<std::int64_t>& given) {
  for (const std::int64_t t : given) {
    if (t <= 0) throw InvalidArgument(fmt::format("advisor.tp_sizes: {} must be >= 1", t));
  }
  if (!given.empty()) {
    // The model's own t is always one of them: every candidate keeps it (and validate() holds
    // each to it).
    std::vector<std::int64_t> sizes = given;
    if (std::find(sizes.begin(), sizes.end(), m.t) == sizes.end()) sizes.insert(sizes.begin(), m.t);
    return sizes;
  }
  std::vector<std::int64_t> sizes{m.t};
  for (const std::int64_t t : {2, 4, 8}) {
    if (t != m.t && allows_tp(m.a, m.kv_heads(), {t})) sizes.push_back(t);
  }
  // A head count that allows no tensor parallelism at all (Falcon-7B's 71) is not worth keeping
  // that way: candidates must then allow the common sizes.
  if (sizes == std::vector<std::int64_t>{1}) sizes = {1, 2, 4, 8};
  return sizes;
}

}  // namespace

void set_dimension(ModelShape& m, const std::string& field, std::int64_t value) {
  if (field == "h")
    m.h = value;
  else if (field == "a")
    m.a = value;
  else if (field == "a_kv")
    m.a_kv = value;
  else if (field == "L")
    set_layers(m, value);
  else if (field == "v")
    m.v = value;
  else if (field == "s")
    m.s = value;
  else if (field == "b")
    m.b = value;
  else if (field == "d_ff")
    m.d_ff = value;
  else if (field == "d_ff_expert")
    m.d_ff_expert = value;
  else if (field == "t")
    m.t = value;
  else if (field == "experts")
    m.experts = value;
  else if (field == "top_k")
    m.top_k = value;
  else {
    throw InvalidArgument(
        fmt::format("dimension '{}' is not known: use h, a, a_kv, L, v, s, b, d_ff, d_ff_expert, "
                    "t, experts or top_k",
                    field));
  }
}

std::int64_t get_dimension(const ModelShape& m, const std::string& field) {
  if (field == "h") return m.h;
  if (field == "a") return m.a;
  if (field == "a_kv") return m.kv_heads();
  if (field == "L") return m.L;
  if (field == "v") return m.v;
  if (field == "s") return m.s;
  if (field == "b") return m.b;
  if (field == "d_ff") return m.d_ff;
  if (field == "d_ff_expert") return m.d_ff_expert;
  if (field == "t") return m.t;
  if (field == "experts") return m.experts;
  if (field == "top_k") return m.top_k;
  throw InvalidArgument(
      fmt::format("dimension '{}' is not known: use h, a, a_kv, L, v, s, b, d_ff, d_ff_expert, t, "
                  "experts or top_k",
                  field));
}

Uncertainty advisor_uncertainty(const DeviceSpec& device, std::optional<double> given) {
  if (given) {
    if (!(*given >= 0) || *given >= 1) {
      throw InvalidArgument(fmt::format("advisor.uncertainty = {} must be in [0, 1)", *given));
    }
    return {*given, "--uncertainty"};
  }
  if (const auto& pe = device.prediction_error) {
    return {pe->median_abs_pct_error / 100.0,
            fmt::format("median held-out |error| of device '{}' (p90 {:.1f}%, {} GEMMs; {})",
                        device.name, pe->p90_abs_pct_error, pe->count, pe->source)};
  }
  return {kDefaultUncertainty,
          fmt::format("fixed default: device '{}' records no calibration (prediction_error), and "
                      "uncalibrated entries miss single GEMMs by 5-13% (median)",
                      device.name)};
}

Advice advise(const ModelShape& model, const DeviceSpec& device, const AdvisorOptions& o) {
  model.validate();
  if (!(o.budget > 0) || o.budget >= 1) {
    throw InvalidArgument(fmt::format("advisor.budget = {} must be in (0, 1)", o.budget));
  }
  if (o.top <= 0) throw InvalidArgument(fmt::format("advisor.top = {} must be >= 1", o.top));
  if (o.min_head_dim < 1 || o.max_head_dim < o.min_head_dim) {
    throw InvalidArgument(fmt::format(
        "advisor.min_head_dim = {} and advisor.max_head_dim = {}: the range of head dimensions "
        "must have 1 <= min <= max",
        o.min_head_dim, o.max_head_dim));
  }
  if (o.hidden_steps < 0 || o.ffn_steps < 0) {
    throw InvalidArgument(
        fmt::format("advisor.hidden_steps = {} and advisor.ffn_steps = {} must "
                    "be >= 0",
                    o.hidden_steps, o.ffn_steps));
  }
  Advice advice;
  advice.input = model;
  advice.input_params = count_parameters(model).total;
  advice.input_analysis = analyze(model, device, o.training);
  const Uncertainty bar = advisor_uncertainty(device, o.uncertainty);
  advice.uncertainty = bar.value;
  advice.uncertainty_source = bar.source;
  const ModelAnalysis& base = advice.input_analysis;
  advice.input_totals = base.totals;
  const auto base_findings = check_guidelines(model, device, base, false);
  advice.tp_sizes = usable_tp_sizes(model, o.tp_sizes);

  // The MLP width the most layers use is the one varied: a MoE model with its own expert width
  // runs its d_ff in its leading dense layers at most (none in Qwen3-MoE), so varying d_ff there
  // tried shapes with the same GEMMs and never the experts' width.
  const bool vary_expert_width = model.is_moe() && model.d_ff_expert > 0;
  const std::int64_t ff_width = vary_expert_width ? model.d_ff_expert : model.d_ff;
  const double ff_ratio = static_cast<double>(ff_width) / static_cast<double>(model.h);
  const std::int64_t h_base = std::max<std::int64_t>(64, (model.h + 32) / 64 * 64);
  // Padded so that each tensor-parallel rank's share of the logits stays aligned (as Megatron pads
  // to its divisor times t).
  std::set<std::int64_t> vocabs{model.v, round_up(model.v, 64 * model.t),
                                round_up(model.v, 128 * model.t)};

  std::vector<Candidate> all;
  for (int hi = -o.hidden_steps; hi <= o.hidden_steps; ++hi) {
    std::set<std::int64_t> hs{h_base + 64 * hi};
    if (hi == 0) hs.insert(model.h);
    for (const std::int64_t h : hs) {
      if (h <= 0) continue;
      std::set<std::int64_t> ffs;
      if (h == model.h) ffs.insert(ff_width);
      const auto ff_base =
          static_cast<std::int64_t>(std::llround(ff_ratio * static_cast<double>(h) / 64.0)) * 64;
      for (int fi = -o.ffn_steps; fi <= o.ffn_steps; ++fi) {
        if (ff_base + 64 * fi > 0) ffs.insert(ff_base + 64 * fi);
      }
      for (std::int64_t a = 1; a <= h / o.min_head_dim; ++a) {
        // The GQA group size a/a_kv is part of the model's quality trade-off: kept (multi-query
        // attention stays multi-query whatever a becomes).
        const std::int64_t kv = kv_heads_keeping_group(model, a);
        if (h % a != 0 || kv == 0) continue;
        const std::int64_t d = h / a;
        if (d < o.min_head_dim || d > o.max_head_dim) continue;
        if (!allows_tp(a, kv, advice.tp_sizes)) continue;
        for (const std::int64_t ff : ffs) {
          for (int li = -o.layer_steps; li <= o.layer_steps; ++li) {
            const std::int64_t L = model.L + li;
            if (L <= 0) continue;
            for (const std::int64_t v : vocabs) {
              ModelShape c = model;
              c.h = h;
              c.a = a;
              c.a_kv = kv;
              c.d_head = 0;
              (vary_expert_width ? c.d_ff_expert : c.d_ff) = ff;
              set_layers(c, L);
              c.v = v;
              const double params = count_parameters(c).total;
              const double delta = params / advice.input_params - 1.0;
              if (std::abs(delta) > o.budget) continue;
              if (c == model) continue;
              ++advice.evaluated;
              ModelAnalysis an = analyze(c, device, o.training);
              if (an.totals.model_tflops <= base.totals.model_tflops) continue;
              const auto findings = check_guidelines(c, device, an, false);
              Candidate cand;
              cand.params = params;
              cand.param_delta = delta;
              cand.totals = an.totals;
              cand.speedup = an.totals.tflops / base.totals.tflops;
              cand.model_speedup = an.totals.model_tflops / base.totals.model_tflops;
              cand.changes = describe_changes(model, c);
              cand.fields_changed = count_changes(model, c);
              cand.significant = cand.model_speedup - 1.0 >= bar.value;
              for (const Finding& f : base_findings) {
                if (!has_finding(findings, f.id) &&
                    std::find(cand.fixes.begin(), cand.fixes.end(), f.id) == cand.fixes.end()) {
                  cand.fixes.push_back(f.id);
                }
              }
              cand.shape = std::move(c);
              cand.analysis = std::move(an);
              all.push_back(std::move(cand));
            }
          }
        }
      }
    }
  }
  // Best predicted model throughput first; among equals, the smaller parameter change.
  std::sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) {
    return std::make_tuple(-x.totals.model_tflops, std::abs(x.param_delta), x.changes) <
           std::make_tuple(-y.totals.model_tflops, std::abs(y.param_delta), y.changes);
  });
  // The simplest fixes first: the fastest change of each single field (pad v, change a, ...), as a
  // user tries those before a bundle. Then one bundled candidate per (h, a): variants that differ
  // only in L, d_ff or v padding are the same idea, and the list shows different ideas.
  std::set<std::string> single_fields;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  std::vector<bool> taken(all.size(), false);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].fields_changed != 1) continue;
    const std::string field = all[i].changes.substr(0, all[i].changes.find(' '));
    if (!single_fields.insert(field).second) continue;
    taken[i] = true;
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (taken[i]) advice.candidates.push_back(all[i]);
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (static_cast<int>(advice.candidates.size()) >=
        o.top + static_cast<int>(single_fields.size())) {
      break;
    }
    // Other one-field variants of a field already shown are the same idea.
    if (taken[i] || all[i].fields_changed == 1) continue;
    if (!seen.insert({all[i].shape.h, all[i].shape.a}).second) continue;
    advice.candidates.push_back(std::move(all[i]));
  }
  return advice;
}

std::vector<SweepPoint> sweep(const ModelShape& model, const DeviceSpec& device, bool training,
                              const std::string& field, std::int64_t first, std::int64_t last,
                              std::int64_t step) {
  get_dimension(model, field);  // rejects unknown names before any work
  if (field == "d_ff_expert" && !model.is_moe()) {
    // Every point would be the same dense model.
    throw InvalidArgument(fmt::format(
        "sweep of d_ff_expert: model '{}' has no experts (experts = {}); it applies to MoE models",
        model.name, model.experts));
  }
  if (step <= 0) throw InvalidArgument(fmt::format("sweep.step = {} must be >= 1", step));
  if (first <= 0 || last < first) {
    throw InvalidArgument(
        fmt::format("sweep range {}..{} is empty or not positive: need 0 < sweep.from <= sweep.to",
                    first, last));
  }
  if ((last - first) / step > 100000) {
    throw InvalidArgument(
        fmt::format("sweep {}..{} step {} has more than 100000 points", first, last, step));
  }
  std::vector<SweepPoint> points;
  // Stepping stops before value + step could pass last: near INT64_MAX it would overflow.
  for (std::int64_t value = first;; value += step) {
    SweepPoint p;
    p.value = value;
    p.shape = model;
    set_dimension(p.shape, field, value);
    // Sweeping a alone keeps the GQA group size when it can; otherwise MHA.
    if (field == "a") {
      const std::int64_t kv = kv_heads_keeping_group(model, value);
      p.shape.a_kv = kv > 0 ? kv : value;
    }
    try {
      // Keep the GeLU 4h convention while h moves (an h whose 4h overflows is named).
      if (field == "h" && model.mlp == MlpType::gelu && is_default_mlp_width(model.d_ff, model.h)) {
        p.shape.d_ff = default_mlp_width(value);
      }
      p.shape.validate();  // h must divide by a unless the model gives its head dimension
      p.params = count_parameters(p.shape).total;
      p.totals = analyze(p.shape, device, training).totals;
    } catch (const InvalidArgument& e) {
      p.valid = false;
      p.reason = e.what();
    }
    points.push_back(std::move(p));
    if (last - value < step) break;
  }
  return points;
}

}  // namespace mcr::codesign
