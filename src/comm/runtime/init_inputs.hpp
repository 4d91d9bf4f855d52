// The inputs of backend selection and of init() (rules, tuning table, backend list, timeout): read
// from InitOptions or the environment, checked in full before anything blocks, then compared across
// ranks through the bootstrap exchange before any backend comes up (docs/reliability.md,
// "Configuration checks").
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/comm/selection.hpp"

namespace mcr::detail {

inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(10);
/// The longest timeout accepted (one week): beyond it a hang is not worth waiting for, and the
/// limit keeps every deadline computation far from overflow.
inline constexpr std::chrono::milliseconds kMaxTimeout = std::chrono::hours(24 * 7);

/// Seconds as MCR_TIMEOUT takes them ("600", "0.5", "1e3"), rounded to the nearest millisecond.
/// Rejects, with InvalidArgument naming `variable`, the text and the rule: no number, trailing
/// text, non-finite, <= 0, below 0.001 (1 ms, the resolution of a timeout) and above kMaxTimeout.
std::chrono::milliseconds parse_timeout_seconds(std::string_view text,
                                                std::string_view variable = "MCR_TIMEOUT");

/// Checks a backend list (MCR_BACKENDS, InitOptions::backends): every name non-empty, known
/// (backend_names()), compiled into this build, and listed once. `source` names the input in
/// errors.
void check_backend_list(const std::vector<std::string>& names, std::string_view source);
/// Splits "gloo, mpi" at commas, trimming blanks; empty items are kept (check_backend_list rejects
/// them).
std::vector<std::string> split_backend_list(std::string_view text);

/// What init() reads from its options and the environment, checked before any rank blocks.
struct InitInputs {
  std::shared_ptr<const RuleSet> rules;
  std::string rules_source;  ///< where the rules came from, for `mcr info`
  std::shared_ptr<const TuningTable> table;
  std::string table_source;
  std::vector<std::string> backends;  ///< wanted, in priority order; empty: every compiled one
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

/// The timeout InitOptions::timeout or MCR_TIMEOUT gives, else the default; throws InvalidArgument
/// naming the option or variable when it is invalid.
std::chrono::milliseconds resolve_timeout(const InitOptions& options);

/// Reads every input of init() (an InitOptions field wins over its variable) and checks it: rules
/// (syntax, sizes, backend names), the tuning table (TuningTable::problems), the backend list, the
/// timeout. Throws InvalidArgument naming the variable or option, the value and the rule.
InitInputs read_init_inputs(const InitOptions& options);

/// Under MCR_DEBUG, one line per rule whose backend this build lacks or this process cannot use
/// (`unusable`: name and reason): such a rule is valid and selection skips it.
void log_skipped_rules(const RuleSet& rules,
                       const std::vector<std::pair<std::string, std::string>>& unusable);

/// What must be identical on every rank before any backend comes up, as (what, value) pairs in a
/// fixed order; `shown` maps a what to a readable form of the value where it differs (a table's
/// file next to its hash).
struct ConfigDigest {
  std::vector<std::pair<std::string, std::string>> fields;
  std::map<std::string, std::string> shown;
  std::string error;  ///< this rank's configuration error, when it has one (then no fields)
};

/// The digest of this rank: build, backend list, the backends it would bring up, rules, table.
ConfigDigest make_config_digest(const InitInputs& inputs, const std::vector<std::string>& bring_up);

/// For per-rank digests (index = rank), one clause per field that differs, naming which ranks hold
/// which value ("MCR_BACKENDS / InitOptions::backends differs: rank 0 has 'mpi,gloo', rank 1 has
/// 'gloo'"), joined by "; "; empty when every field agrees.
std::string describe_differences(const std::vector<ConfigDigest>& digests);

/// All-gathers the digests over the bootstrap's world exchange and raises on every rank alike:
/// this rank's own error when its configuration was rejected, InvalidArgument naming the ranks
/// whose configuration was rejected, or MismatchError naming each field that differs and which
/// ranks hold which value.
void check_config_agrees(Exchange& exchange, int rank, const ConfigDigest& mine);

/// "0", "0-3", "0,2,5-7".
std::string format_ranks(const std::vector<int>& ranks);

}  // namespace mcr::detail
