// Per-communicator backend selection: override -> rules -> tuning table -> default priority.
// The answer depends only on values equal on every rank (invariant 2), so every rank picks the
// same backend for the same operation.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/backend.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/comm/selection.hpp"

namespace mcr::detail {

class Selector {
 public:
  /// `backends`: this communicator's instances in default priority order. `unusable`: backends
  /// compiled in but not usable in this process, with the reason (for explanations). `shape`: how
  /// the communicator's ranks sit on hosts (GroupTopology), which tuning entries must fit.
  Selector(std::shared_ptr<const RuleSet> rules, std::shared_ptr<const TuningTable> table,
           std::vector<Backend*> backends,
           std::vector<std::pair<std::string, std::string>> unusable, int group_size,
           HostShape shape);

  /// The backend for this operation. `bytes` is the op's global message size; `form` whether it
  /// was called in its blocking or its i* form (a table may hold entries per form). Inline: the
  /// search of a built plan runs in the caller; building one and the error are pick_new().
  Backend& pick(OpType op, DType dtype, ReduceOp reduce, Device::Kind device, std::size_t bytes,
                CallForm form = CallForm::sync) {
    // Both ends of a message select as one operation in one form.
    form = selection_form(op, form);
    op = selection_op(op);
    const auto& slot = plans_[plan_index(op, dtype, reduce, device, form)];
    if (slot) {
      if (Backend* b = in_plan(*slot, bytes)) return *b;
    }
    return pick_new(op, dtype, reduce, device, bytes, form);
  }
  /// The backend named by a per-call override; errors name backend, op and dtype. Inline: the
  /// override resolved last (a program forcing a backend names the same one on every call) is
  /// answered by a few compares in the caller, anything else by resolve_override().
  Backend& pick_override(std::string_view name, OpType op, DType dtype, ReduceOp reduce,
                         Device::Kind device, std::size_t bytes) const {
    const LastOverride& last = last_override_;
    const ReduceOp r = is_reduction(op) ? reduce : ReduceOp::sum;
    if (plan_index(op, dtype, r, device) == last.plan && name == last.name &&
        bytes / dtype_size(dtype) <= last.max_count) {
      return *last.backend;
    }
    return resolve_override(name, op, dtype, reduce, device, bytes);
  }
  /// The full reasoning, every candidate with why it was or was not chosen.
  Selection explain(OpType op, DType dtype, ReduceOp reduce, Device::Kind device, std::size_t bytes,
                    std::string_view override_name = {}, CallForm form = CallForm::sync) const;

  /// Every candidate considered for this operation, ending with the chosen one (if any):
  /// select_backend() over this communicator's inputs and backends.
  std::vector<SelectionCandidate> consider(OpType op, DType dtype, ReduceOp reduce,
                                           Device::Kind device, std::size_t bytes,
                                           std::string_view override_name = {},
                                           CallForm form = CallForm::sync) const;
  /// The chosen backend of a consider() result, or nullptr when none can run the operation.
  Backend* chosen(const std::vector<SelectionCandidate>& candidates) const noexcept;

  /// Defaults that the backend which formed this communicator for its own steps gives it (hier
  /// between hosts: docs/hier-backend.md): consulted after the rules and the tuning table, before
  /// the default priority, so that a measurement or a user's rule still decides. `why` says
  /// where they come from (explain shows it). Equal on every member; set before the first
  /// operation (the plans built so far are dropped).
  void set_presets(RuleSet presets, std::string why);

  Backend* find(std::string_view name) const noexcept;
  /// Hash of rules + table, compared across ranks when a communicator is created.
  std::uint64_t config_hash() const noexcept;
  const std::vector<Backend*>& backends() const noexcept { return backends_; }
  HostShape shape() const noexcept { return shape_; }

 private:
  struct Interval {
    std::size_t lo, hi;  // inclusive
    Backend* backend;
  };
  using Plan = std::vector<Interval>;
  /// The backend of the interval holding `bytes`; null where none can run the operation.
  static Backend* in_plan(const Plan& plan, std::size_t bytes) noexcept {
    auto it = std::upper_bound(plan.begin(), plan.end(), bytes,
                               [](std::size_t b, const Interval& iv) { return b < iv.lo; });
    return it == plan.begin() ? nullptr : std::prev(it)->backend;
  }
  /// pick() where the plan is not built yet or has no backend for `bytes`: builds it, and raises
  /// UnsupportedError with every candidate's reason when none can run the operation.
  Backend& pick_new(OpType op, DType dtype, ReduceOp reduce, Device::Kind device, std::size_t bytes,
                    CallForm form);
  std::string why_unsupported(const Backend& b, OpType op, DType dtype, ReduceOp reduce,
                              Device::Kind device, std::size_t bytes) const;
  /// pick_override() for any name: by the backends' names and the capability cache, raising
  /// the errors; remembers the answer as the last override.
  Backend& resolve_override(std::string_view name, OpType op, DType dtype, ReduceOp reduce,
                            Device::Kind device, std::size_t bytes) const;
  Plan build_plan(OpType op, DType dtype, ReduceOp reduce, Device::Kind device,
                  CallForm form) const;
  // Inline: a per-call override computes it on every call.
  static constexpr std::size_t plan_index(OpType op, DType dtype, ReduceOp reduce,
                                          Device::Kind device,
                                          CallForm form = CallForm::sync) noexcept {
    return (((static_cast<std::size_t>(op) * 8 + static_cast<std::size_t>(dtype)) * 8 +
             static_cast<std::size_t>(reduce)) *
                2 +
            static_cast<std::size_t>(device)) *
               2 +
           static_cast<std::size_t>(form);
  }

  std::shared_ptr<const RuleSet> rules_;
  std::shared_ptr<const TuningTable> table_;
  RuleSet presets_;
  std::string presets_why_;
  std::vector<Backend*> backends_;
  std::vector<std::string> priority_;  // backends_' names: the default priority
  std::vector<std::pair<std::string, std::string>> unusable_;
  int group_size_;
  HostShape shape_;
  // Lazily built selection plans, one per (op, dtype, reduce, device kind, form): a sorted list of
  // byte intervals and their backend, so the hot path is a short binary search with no allocation.
  std::vector<std::optional<Plan>> plans_;
  // Per backend, whether it can run each (op, dtype, reduce, device): -1 unknown, 0 no, 1 yes. Lets
  // a per-call override skip the capability query on repeated calls.
  mutable std::vector<std::vector<signed char>> can_run_;
  // The last per-call override that resolved, keyed by the name's content and the operation's
  // (op, dtype, reduce, device): a program that forces a backend names the same one call after
  // call, which then costs a compare of a few bytes instead of a scan of the backends by name
  // with a virtual call each. Only a backend that can run that combination is kept; its count
  // limit is checked per call.
  struct LastOverride {
    std::string_view name;               // the backend's own name(), as long-lived as it
    std::size_t plan = ~std::size_t{0};  // plan_index() of the combination; ~0 matches none
    std::size_t max_count = 0;           // the backend's max_count()
    Backend* backend = nullptr;
  };
  mutable LastOverride last_override_;
};

}  // namespace mcr::detail
