// Tuning-table construction from measured samples and full validation of a table file's text.
// See docs/bench.md and docs/tuning-format.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mcr/comm/selection.hpp"

namespace mcr::bench {

/// Winner per measured size, switching away from the current winner (walking sizes upwards) only
/// when another backend is faster by more than `hysteresis` (0.03 = 3%). Where a size was timed
/// with several numbers of operations in flight (`mcr tune --in-flight 4,16`), a backend's figure
/// is its worst slowdown against the fastest at the same number, so the winner is the backend
/// that loses least at the count where it is not the fastest. Then adjacent sizes with
/// the same winner are merged. A byte count between two measured sizes goes to the backend of the
/// nearer one on a log scale (boundary at the geometric mean). The first range starts at 0 and the
/// last is unbounded. The `send` entry is copied to `recv`: both ends of a message must agree.
/// Throws InvalidArgument naming tune.hysteresis when it is outside [0, 1).
std::vector<TuningEntry> build_entries(const std::vector<TuningSample>& samples, double hysteresis);

/// `samples` without any of a backend that computed wrong values for the same op, dtype class,
/// group (size and shape) and form: `wrong` holds one sample per such result (its time unused).
/// Left out at every size and number in flight, not only the point it failed at, where it would
/// still win the sizes around it (or, at several numbers in flight, a size it erred at, scored
/// over the numbers it has samples for).
std::vector<TuningSample> without_wrong_backends(std::vector<TuningSample> samples,
                                                 const std::vector<TuningSample>& wrong);

/// Every problem of a tuning table file's text (`mcr tune --validate`): TuningTable::problems(),
/// the same checks the runtime applies when it loads a table. Empty when the table is valid.
std::vector<std::string> validate_table_text(std::string_view json_text);

}  // namespace mcr::bench
