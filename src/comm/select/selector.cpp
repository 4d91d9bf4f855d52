#include "select/selector.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/log.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {

Selector::Selector(std::shared_ptr<const RuleSet> rules, std::shared_ptr<const TuningTable> table,
                   std::vector<Backend*> backends,
                   std::vector<std::pair<std::string, std::string>> unusable, int group_size,
                   HostShape shape)
    : rules_(std::move(rules)),
      table_(std::move(table)),
      backends_(std::move(backends)),
      unusable_(std::move(unusable)),
      group_size_(group_size),
      shape_(shape),
      plans_(static_cast<std::size_t>(kNumOpTypes) * 8 * 8 * 2 * 2),
      can_run_(backends_.size(), std::vector<signed char>(plans_.size(), -1)) {
  for (Backend* b : backends_)
    priority_.emplace_back(b->name());
}

void Selector::set_presets(RuleSet presets, std::string why) {
  presets_ = std::move(presets);
  presets_why_ = std::move(why);
  for (auto& plan : plans_)
    plan.reset();
}

Backend* Selector::find(std::string_view name) const noexcept {
  for (Backend* b : backends_) {
    if (b->name() == name) return b;
  }
  return nullptr;
}

std::uint64_t Selector::config_hash() const noexcept {
  std::uint64_t h = fnv1a(rules_ ? rules_->canonical() : std::string());
  return fnv1a(fmt::format("{:x}", table_ ? table_->selection_hash() : 0), h);
}

std::string Selector::why_unsupported(const Backend& b, OpType op, DType dtype, ReduceOp reduce,
                                      Device::Kind device, std::size_t bytes) const {
  // Reduce ops are meaningless for non-reductions; ask about sum so they don't disqualify a
  // backend.
  const ReduceOp r = is_reduction(op) ? reduce : ReduceOp::sum;
  Support s = b.supports(op, dtype, r, device);
  if (!s.ok) {
    return fmt::format(
        "cannot run {} on {}{} ({}): {}", to_string(op), to_string(dtype),
        is_reduction(op) ? fmt::format(" with {}", to_string(reduce)) : std::string(),
        to_string(device), s.why);
  }
  if (bytes / dtype_size(dtype) > b.max_count()) {
    return fmt::format("message of {} bytes exceeds its largest count per call ({} elements)",
                       bytes, b.max_count());
  }
  return {};
}

Backend& Selector::resolve_override(std::string_view name, OpType op, DType dtype, ReduceOp reduce,
                                    Device::Kind device, std::size_t bytes) const {
  const ReduceOp r = is_reduction(op) ? reduce : ReduceOp::sum;
  const std::size_t plan = plan_index(op, dtype, r, device);
  const std::size_t count = bytes / dtype_size(dtype);
  for (std::size_t i = 0; i < backends_.size(); ++i) {  // a known-good combination
    Backend* b = backends_[i];
    if (b->name() != name) continue;
    auto& known = can_run_[i][plan];
    if (known < 0) known = b->supports(op, dtype, r, device).ok ? 1 : 0;
    if (known != 1) break;
    last_override_ = {b->name(), plan, b->max_count(), b};
    if (count <= last_override_.max_count) return *b;
    break;
  }
  Backend* b = find(name);
  if (b == nullptr) {
    for (const auto& [n, reason] : unusable_) {
      if (n == name) {
        throw UnsupportedError(fmt::format("backend '{}' requested for {} is not usable here: {}",
                                           name, to_string(op), reason));
      }
    }
    std::string names;
    for (Backend* x : backends_)
      names += fmt::format("{}{}", names.empty() ? "" : ", ", x->name());
    const auto& known = backend_names();
    const auto built = compiled_backend_names();
    if (std::find(known.begin(), known.end(), name) != known.end() &&
        std::find(built.begin(), built.end(), name) == built.end()) {
      // A valid name that this build lacks: the same call runs where mcr was built with it.
      throw UnsupportedError(
          fmt::format("backend '{}' requested for {} is not usable here: this mcr was built "
                      "without it (built: {}); available: {}",
                      name, to_string(op), fmt::join(built, ", "), names));
    }
    throw InvalidArgument(
        fmt::format("backend '{}' (CallOptions::backend) is unknown; available: {}", name, names));
  }
  if (auto why = why_unsupported(*b, op, dtype, reduce, device, bytes); !why.empty()) {
    throw UnsupportedError(fmt::format("backend '{}' {}", name, why));
  }
  return *b;
}

std::vector<SelectionCandidate> Selector::consider(OpType op, DType dtype, ReduceOp reduce,
                                                   Device::Kind device, std::size_t bytes,
                                                   std::string_view override_name,
                                                   CallForm form) const {
  SelectionInputs in;
  in.rules = rules_.get();
  in.table = table_.get();
  in.presets = &presets_;
  in.priority = priority_;
  in.group_size = group_size_;
  in.shape = shape_;
  auto fit = [&](std::string_view name) -> BackendFit {
    if (const Backend* b = find(name)) {
      return {true, why_unsupported(*b, op, dtype, reduce, device, bytes)};
    }
    for (const auto& [n, reason] : unusable_) {
      if (n == name) return {false, fmt::format("not usable here: {}", reason)};
    }
    return {false, "not available in this build"};
  };
  return select_backend(in, fit, {op, dtype, bytes, form, override_name});
}

Backend* Selector::chosen(const std::vector<SelectionCandidate>& candidates) const noexcept {
  const std::string* name = chosen_backend(candidates);
  return name != nullptr ? find(*name) : nullptr;
}

Selection Selector::explain(OpType op, DType dtype, ReduceOp reduce, Device::Kind device,
                            std::size_t bytes, std::string_view override_name,
                            CallForm form) const {
  Selection sel;
  for (const auto& c : consider(op, dtype, reduce, device, bytes, override_name, form)) {
    sel.source = std::string(to_string(c.source));
    std::string why;
    switch (c.source) {
      case SelectionCandidate::Source::override:
        why = "per-call override";
        break;
      case SelectionCandidate::Source::rule:
        why = fmt::format("rule #{} ({})", c.index + 1,
                          RuleSet{{rules_->rules[c.index]}}.canonical());
        break;
      case SelectionCandidate::Source::tuning:
        why = fmt::format("tuning table: fastest measured at {} bytes, {} ranks on {}{}", bytes,
                          group_size_, describe(shape_),
                          c.verdict == SelectionCandidate::Verdict::chosen && !c.detail.empty()
                              ? fmt::format(" ({})", c.detail)
                              : std::string());
        break;
      case SelectionCandidate::Source::preset:
        why = fmt::format("{} ({})", presets_why_, RuleSet{{presets_.rules[c.index]}}.canonical());
        if (!c.table_note.empty()) why += fmt::format("; tuning table: {}", c.table_note);
        break;
      case SelectionCandidate::Source::fallback:
        why = fmt::format("default priority #{}", c.index + 1);
        if (!c.table_note.empty()) why += fmt::format(" (tuning table: {})", c.table_note);
        break;
    }
    switch (c.verdict) {
      case SelectionCandidate::Verdict::chosen:
        sel.backend = c.name;
        break;
      case SelectionCandidate::Verdict::unavailable:
        why = fmt::format("{}; {}", why, c.detail);
        break;
      case SelectionCandidate::Verdict::unsupported:
        why = fmt::format("{}; skipped: {}", why, c.detail);
        break;
      case SelectionCandidate::Verdict::slower:
        why = "slower in the tuning table";
        break;
    }
    sel.steps.push_back({c.name, c.verdict == SelectionCandidate::Verdict::chosen, std::move(why)});
  }
  if (sel.backend.empty() && override_name.empty()) sel.source = "default";
  return sel;
}

Selector::Plan Selector::build_plan(OpType op, DType dtype, ReduceOp reduce, Device::Kind device,
                                    CallForm form) const {
  // Every byte count where the answer may change: rule bounds and tuning-range bounds.
  std::vector<std::size_t> cuts{0};
  auto cut_after = [&](std::size_t hi) {
    if (hi != kMaxBytes) cuts.push_back(hi + 1);
  };
  auto rule_cuts = [&](const RuleSet& set) {
    for (const Rule& r : set.rules) {
      if ((r.op && selection_op(*r.op) != selection_op(op)) || (r.dtype && *r.dtype != dtype))
        continue;
      cuts.push_back(r.min_bytes);
      cut_after(r.max_bytes);
    }
  };
  if (rules_) rule_cuts(*rules_);
  rule_cuts(presets_);
  if (table_) {
    for (const auto& e : table_->entries) {
      if (e.op != selection_op(op) || !e.fits(shape_)) continue;
      for (const auto& r : e.ranges) {
        cuts.push_back(r.min_bytes);
        cut_after(r.max_bytes);
      }
    }
  }
  for (Backend* b : backends_) {  // where a backend's count limit starts to exclude it
    // The first byte count past the limit is (limit + 1) elements: an interval is judged by its
    // lowest count, and limit * size + 1 bytes still reads as `limit` elements.
    const std::size_t limit = b->max_count();
    const std::size_t size = dtype_size(dtype);
    if (limit < kMaxBytes / size) cut_after((limit + 1) * size - 1);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  Plan plan;
  bool noted = false;
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    const std::size_t lo = cuts[i];
    const std::size_t hi = i + 1 < cuts.size() ? cuts[i + 1] - 1 : kMaxBytes;
    const auto candidates = consider(op, dtype, reduce, device, lo, {}, form);
    for (const auto& c : candidates) {
      if (!c.table_note.empty() && !noted) {  // the same for every size: said once per plan
        noted = true;
        log_debug("select {} {}: tuning table: {}", to_string(op), to_string(dtype), c.table_note);
      }
      if (c.verdict == SelectionCandidate::Verdict::unsupported) {
        log_debug("select {} {} [{}, {}]: {}: skipped: {}", to_string(op), to_string(dtype), lo, hi,
                  c.name, c.detail);
      }
    }
    Backend* b = chosen(candidates);
    if (!plan.empty() && plan.back().backend == b) {
      plan.back().hi = hi;
    } else {
      plan.push_back({lo, hi, b});
    }
  }
  return plan;
}

Backend& Selector::pick_new(OpType op, DType dtype, ReduceOp reduce, Device::Kind device,
                            std::size_t bytes, CallForm form) {
  auto& slot = plans_[plan_index(op, dtype, reduce, device, form)];
  if (!slot) slot = build_plan(op, dtype, reduce, device, form);
  Backend* b = in_plan(*slot, bytes);
  if (b == nullptr) {
    Selection s = explain(op, dtype, reduce, device, bytes, {}, form);
    std::string reasons;
    for (const auto& step : s.steps)
      reasons += fmt::format("; {}: {}", step.backend, step.reason);
    throw UnsupportedError(fmt::format("no backend can run {} on {} ({}, {} bytes){}",
                                       to_string(op), to_string(dtype), to_string(device), bytes,
                                       reasons));
  }
  return *b;
}

}  // namespace mcr::detail
