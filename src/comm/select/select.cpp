// The one selection function (mcr/comm/selection.hpp): the runtime's Selector and the planner's
// communication model both call it, so their choices cannot drift apart.
#include <fmt/format.h>

#include "mcr/comm/selection.hpp"

namespace mcr {

std::vector<SelectionCandidate> select_backend(const SelectionInputs& in, const BackendFitFn& fit,
                                               const SelectionQuery& query) {
  // The two ends of a message select as one operation in one form (selection_op/selection_form).
  SelectionQuery q = query;
  q.form = selection_form(q.op, q.form);
  q.op = selection_op(q.op);
  using Source = SelectionCandidate::Source;
  using Verdict = SelectionCandidate::Verdict;
  std::vector<SelectionCandidate> out;
  // Appends one candidate with its verdict; true when it is chosen (the walk stops there).
  auto add = [&](std::string_view name, Source source, std::size_t index) -> bool {
    SelectionCandidate c;
    c.name = std::string(name);
    c.source = source;
    c.index = index;
    BackendFit f = fit(name);
    c.verdict = !f.available         ? Verdict::unavailable
                : !f.why_not.empty() ? Verdict::unsupported
                                     : Verdict::chosen;
    c.detail = std::move(f.why_not);
    out.push_back(std::move(c));
    return out.back().verdict == Verdict::chosen;
  };
  if (!q.override_name.empty()) {
    add(q.override_name, Source::override, 0);
    return out;  // an explicit request is never replaced by another backend
  }
  if (in.rules != nullptr) {
    for (std::size_t i = 0; i < in.rules->rules.size(); ++i) {
      const Rule& r = in.rules->rules[i];
      if (r.matches(q.op, q.dtype, q.bytes) && add(r.backend, Source::rule, i)) return out;
    }
  }
  std::string table_note;
  if (in.table != nullptr) {
    const TuningTable& t = *in.table;
    if (const std::string* name =
            t.lookup(q.op, q.dtype, in.group_size, in.shape, q.bytes, q.form)) {
      if (add(*name, Source::tuning, 0)) {
        // Which form's measurement decided: said when the table recorded one.
        const TuningEntry* e = t.entry_for(q.op, q.dtype, in.group_size, in.shape, q.form);
        if (e != nullptr && e->form != "any") {
          out.back().detail =
              e->form == to_string(q.form)
                  ? fmt::format("measured with {} calls", e->form)
                  : fmt::format("measured with {} calls; the table has no {} entry for this op",
                                e->form, to_string(q.form));
        }
        for (const std::string& other : in.priority) {  // the measured alternatives lost to it
          if (other != *name) out.push_back({other, Source::tuning, 0, Verdict::slower, {}, {}});
        }
        return out;
      }
    } else {
      table_note = t.topology_mismatch(q.op, q.dtype, in.group_size, in.shape);
    }
  }
  if (in.presets != nullptr) {
    for (std::size_t i = 0; i < in.presets->rules.size(); ++i) {
      const Rule& r = in.presets->rules[i];
      if (r.matches(q.op, q.dtype, q.bytes) && add(r.backend, Source::preset, i)) {
        out.back().table_note = std::move(table_note);
        return out;
      }
    }
  }
  for (std::size_t i = 0; i < in.priority.size(); ++i) {
    const bool done = add(in.priority[i], Source::fallback, i);
    if (i == 0) out.back().table_note = std::move(table_note);
    if (done) return out;
  }
  return out;
}

std::string_view to_string(SelectionCandidate::Source source) noexcept {
  switch (source) {
    case SelectionCandidate::Source::override:
      return "override";
    case SelectionCandidate::Source::rule:
      return "rule";
    case SelectionCandidate::Source::tuning:
      return "tuning";
    case SelectionCandidate::Source::preset:
      return "preset";
    case SelectionCandidate::Source::fallback:
      return "default";
  }
  return "default";
}

const std::string* chosen_backend(const std::vector<SelectionCandidate>& candidates) noexcept {
  for (const auto& c : candidates) {
    if (c.verdict == SelectionCandidate::Verdict::chosen) return &c.name;
  }
  return nullptr;
}

}  // namespace mcr
