// Backend selection: its inputs (user rules and tuning tables, pure data identical on every rank,
// architecture invariant 2, checked by hash when a communicator is created) and its explained
// result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/comm/types.hpp"

namespace mcr {

/// Why a backend was or was not chosen for an operation (see Communicator::explain).
struct SelectionStep {
  std::string backend;
  bool chosen = false;
  std::string reason;
};
/// One step of an operation that the composed backend `hier` runs (docs/hier-backend.md): its
/// level, its operation and message size (the nccl-tests size, as for the whole operation), and,
/// from explain, the library that runs it and why.
struct HierStep {
  bool within_host = true;  ///< on "my host" (else between hosts: the same local index)
  OpType op = OpType::all_reduce;
  std::size_t bytes = 0;
  int times = 1;        ///< how often it runs per call (the pieces of a pipelined all_reduce)
  std::string backend;  ///< explain: the library chosen for it
  std::string source;   ///< explain: "MCR_HIER", "rule", "tuning", "preset" or "default"
  std::string reason;   ///< explain: the chosen candidate's reason
};
struct Selection {
  std::string backend;  ///< the backend that runs the operation
  /// "override", "rule", "tuning", "preset" (a backend's own default for its sub-communicators,
  /// e.g. hier between hosts) or "default" (default priority)
  std::string source;
  std::vector<SelectionStep> steps;  ///< every candidate considered, in order, with its reason
  /// When `backend` composes the operation from steps (hier): each step with its own choice.
  std::vector<HierStep> composed;
};

inline constexpr std::size_t kMaxBytes = std::numeric_limits<std::size_t>::max();

/// The operation a call selects as. A message's two ends select independently (send on one rank,
/// recv on the other) and must agree, so they select as one operation: send (a rule naming either
/// applies to both ends, and the table's send entries decide for both).
constexpr OpType selection_op(OpType op) noexcept {
  return op == OpType::recv ? OpType::send : op;
}

/// "Run `op` messages of [min_bytes, max_bytes] (inclusive) on `backend`". Empty op / dtype match
/// all.
struct Rule {
  std::optional<OpType> op;
  std::optional<DType> dtype;
  std::size_t min_bytes = 0;
  std::size_t max_bytes = kMaxBytes;
  std::string backend;

  bool matches(OpType o, DType t, std::size_t bytes) const noexcept {
    return (!op || selection_op(*op) == selection_op(o)) && (!dtype || *dtype == t) &&
           bytes >= min_bytes && bytes <= max_bytes;
  }
  friend bool operator==(const Rule&, const Rule&) = default;
};

/// An ordered list of rules; the first matching rule whose backend can run the operation wins.
struct RuleSet {
  std::vector<Rule> rules;

  /// Parses "OP[/DTYPE]:RANGE=BACKEND;..." where OP is an op name or '*', RANGE is '*', 'LO-HI',
  /// 'LO-' or a single size, and sizes take K/M/G (binary) suffixes, e.g.
  /// "all_reduce:0-64K=mpi;all_to_all:*=gloo". BACKEND must be one of backend_names() (a backend
  /// this build lacks is accepted: the rule is then skipped at selection). Throws InvalidArgument
  /// naming the rule's number (from 1) and text, and the bad token.
  static RuleSet parse(std::string_view text);
  /// Parses a JSON rules document: {"rules": [{"op": "all_reduce", "dtype": "fp32", "min_bytes": 0,
  /// "max_bytes": 65536, "backend": "mpi"}, ...]} or {"rules": "<rules string>"}. Byte counts are
  /// non-negative integers or size strings ("64K"); unknown keys are rejected. Same checks as
  /// parse.
  static RuleSet parse_json(std::string_view json_text);
  /// Canonical text form; equal rule sets give equal strings (used for the cross-rank hash).
  std::string canonical() const;
  bool empty() const noexcept { return rules.empty(); }
};

/// Parses "64", "64K", "1M", "2G", "64KiB", "1MB" (all binary multiples; also "64B" and the
/// lower-case "64k", "1m", "2g", as nccl-tests reads them).
/// Throws InvalidArgument naming the text and the rule it breaks: not a whole number, negative,
/// unknown suffix, or more than 2^64-1 bytes.
std::size_t parse_size(std::string_view text);
/// 65536 -> "64K", 1048576 -> "1M", 100 -> "100".
std::string format_size(std::size_t bytes);

/// The form of a call: the blocking call, or its i* counterpart waited for later. Libraries may run
/// the two differently (Open MPI's nonblocking collectives take other algorithms and progress
/// side by side), so a tuning table may hold entries per form.
enum class CallForm : std::uint8_t { sync, async };
/// "sync" or "async".
std::string_view to_string(CallForm form) noexcept;

/// The form a call of `op` selects as: its own, except point-to-point. The two ends of a message
/// may use different forms (a blocking send matched by an irecv, as MPI allows) and must still
/// agree on the library, so both select as the blocking form.
constexpr CallForm selection_form(OpType op, CallForm form) noexcept {
  return op == OpType::send || op == OpType::recv ? CallForm::sync : form;
}

/// One byte range of a tuning table with the backend that won it.
struct TuningRange {
  std::size_t min_bytes = 0;
  std::size_t max_bytes = kMaxBytes;  ///< inclusive
  std::string backend;
  friend bool operator==(const TuningRange&, const TuningRange&) = default;
};

/// How a communicator's ranks sit on hosts, as tuning-table lookups see it: `hosts` hosts holding
/// `ranks_per_host` of its ranks each. hosts 0: unknown; ranks_per_host 0: uneven (e.g. 3 + 1) or
/// unknown. A communicator of unknown or uneven shape only matches entries that leave the unknown
/// part open.
struct HostShape {
  int hosts = 0;
  int ranks_per_host = 0;
  friend bool operator==(const HostShape&, const HostShape&) = default;
};

/// "4x1"; "3 hosts, uneven"; "unknown topology".
std::string describe(HostShape shape);

/// The ranges of one (op, dtype class, group size, hosts x ranks per host), sorted and
/// non-overlapping.
struct TuningEntry {
  OpType op = OpType::all_reduce;
  std::string dtype_class = "any";  ///< "float", "int" or "any"
  int group_size = 0;               ///< ranks; 0 matches any size
  std::vector<TuningRange> ranges;
  int hosts = 0;           ///< hosts the table was measured on; 0 matches any
  int ranks_per_host = 0;  ///< ranks per host it was measured with; 0 matches any
  /// The call form it was measured with: "sync", "async" or "any" (not recorded). Lookups prefer
  /// an entry of the call's form, then "any", then the other form.
  std::string form = "any";
  friend bool operator==(const TuningEntry&, const TuningEntry&) = default;

  /// Whether the entry applies to a communicator of this shape (0 fields match anything; an
  /// uneven or unknown communicator only matches an open field).
  bool fits(HostShape shape) const noexcept {
    return (hosts == 0 || hosts == shape.hosts) &&
           (ranks_per_host == 0 || ranks_per_host == shape.ranks_per_host);
  }
  /// The shape it names: "4x1", "4 hosts", "2 ranks per host" or "any topology".
  std::string topology() const;
};

/// One measured point of the raw latency matrix.
struct TuningSample {
  OpType op = OpType::all_reduce;
  std::string dtype_class = "float";
  int group_size = 0;
  std::size_t bytes = 0;
  std::string backend;
  double time_us = 0;
  int hosts = 0;             ///< as in TuningEntry: 0 = not recorded
  int ranks_per_host = 0;    ///< as in TuningEntry: 0 = not recorded
  std::string form = "any";  ///< as in TuningEntry: "sync", "async", "any" = not recorded
  /// Asynchronous form: how many operations were in flight at once (`mcr tune --in-flight`);
  /// 0 = not recorded (a blocking call, or a table from before it was recorded).
  int in_flight = 0;
  /// Where the time comes from: empty = timed by `mcr tune`; "run" = the median latency of the
  /// operation inside a program's run, read from its MCR_LOG trace (`mcr tune --refine`).
  std::string source{};
  friend bool operator==(const TuningSample&, const TuningSample&) = default;
};

/// A versioned tuning table (format: docs/tuning-format.md).
struct TuningTable {
  static constexpr int kFormatVersion = 1;
  int version = kFormatVersion;
  std::map<std::string, std::string>
      provenance;  ///< hosts, ranks, cpu, library versions, date, command
  std::vector<TuningEntry> entries;
  std::vector<TuningSample> samples;  ///< the raw latency matrix

  /// Parses a table, rejecting any table that problems() finds fault with (InvalidArgument listing
  /// every problem): a table `mcr tune --validate` rejects is never used.
  static TuningTable parse_json(std::string_view json_text);
  /// Reads and parses a table file; errors name the file.
  static TuningTable load(const std::string& path);
  /// Every problem of a table's JSON text, each naming where (entries[i].ranges[k], samples[i]) and
  /// the rule it breaks: JSON structure, unknown keys, ops, dtype classes and backends, byte counts
  /// that are not integers >= 0, then validate() (gaps, overlaps, duplicates). Empty when valid.
  /// The one check behind both parse_json() and `mcr tune --validate`.
  static std::vector<std::string> problems(std::string_view json_text);
  std::string to_json(int indent = 2) const;
  void save(const std::string& path) const;

  /// The backend for (op, dtype, group size, host shape, bytes) called in `form`, or nullptr when
  /// the table has no range for it. Among the entries that fit, one naming the shape (hosts and
  /// ranks per host) wins over one naming part of it, which wins over one naming none; then an
  /// entry of the call's form wins over one of form "any", which wins over one of the other form;
  /// then an entry for the exact group size wins over one for any size (0); then a "float"/"int"
  /// entry wins over "any".
  const std::string* lookup(OpType op, DType dtype, int group_size, HostShape shape,
                            std::size_t bytes, CallForm form = CallForm::sync) const;
  /// The same for a communicator of unknown shape: only entries that name no topology fit.
  const std::string* lookup(OpType op, DType dtype, int group_size, std::size_t bytes) const {
    return lookup(op, dtype, group_size, HostShape{}, bytes);
  }
  /// The entry lookup() reads for (op, dtype, group size, shape, form), or nullptr.
  const TuningEntry* entry_for(OpType op, DType dtype, int group_size, HostShape shape,
                               CallForm form = CallForm::sync) const;
  /// Why no entry applies when the only entries for (op, dtype, group size) were measured on other
  /// topologies, e.g. "measured on 4x1, this communicator is 2x2; not applied", or the only
  /// entries for (op, dtype) with other group sizes ("measured with 8 ranks, this communicator
  /// has 2; not applied"); empty otherwise (an entry fits, or none exists for the op).
  std::string topology_mismatch(OpType op, DType dtype, int group_size, HostShape shape) const;
  /// Problems: gaps, overlaps, unsorted ranges, unknown backends (if `known_backends` non-empty),
  /// negative hosts or ranks per host, a group size other than hosts x ranks per host, an unknown
  /// form, duplicate (op, dtype class, group size, hosts, ranks per host, form).
  std::vector<std::string> validate(const std::vector<std::string>& known_backends = {}) const;
  /// Hash of the selection-relevant content (entries), equal on ranks that loaded the same table.
  std::uint64_t selection_hash() const;
};

/// One backend that selection considered for an operation, in the order it considered them, with
/// the verdict as data: the runtime's explain() words it, the planner reads the chosen name.
struct SelectionCandidate {
  enum class Source : std::uint8_t { override, rule, tuning, preset, fallback };
  enum class Verdict : std::uint8_t {
    chosen,       ///< runs the operation
    unavailable,  ///< not compiled in, or not usable in this process
    unsupported,  ///< cannot run this op/dtype/reduce/device/size (detail says why)
    slower,       ///< the tuning table measured it slower than the chosen one
  };
  std::string name;
  Source source = Source::fallback;
  std::size_t index = 0;  ///< rule or preset number (from 0), or default priority (from 0)
  Verdict verdict = Verdict::unsupported;
  std::string detail;  ///< unavailable/unsupported: the reason; tuning: the entry's form note
  /// On the first preset or default-priority candidate: why the tuning table did not decide
  /// although it has entries for the op (measured on another topology). Empty otherwise.
  std::string table_note;
};

/// What selection reads besides the operation. In the runtime all of it is equal on every rank of
/// a communicator (invariant 2), so every rank chooses the same backend.
struct SelectionInputs {
  const RuleSet* rules = nullptr;      ///< the user's rules (MCR_RULES), first match wins
  const TuningTable* table = nullptr;  ///< the measured table (MCR_TUNING)
  /// A composing backend's defaults for its own sub-communicators (hier between hosts):
  /// consulted after the table, before the default priority.
  const RuleSet* presets = nullptr;
  std::span<const std::string> priority;  ///< the default priority, best first
  int group_size = 0;                     ///< ranks of the communicator
  HostShape shape;                        ///< how they sit on hosts
};

/// The operation to choose a backend for. `bytes` is its global message size (nccl-tests
/// convention); `override_name` a per-call request, which no other backend replaces.
struct SelectionQuery {
  OpType op = OpType::all_reduce;
  DType dtype = DType::f32;
  std::size_t bytes = 0;
  CallForm form = CallForm::sync;
  std::string_view override_name;
};

/// Whether a backend can run the query's operation: `available` false when it is not in this
/// process at all; `why_not` non-empty when it is but cannot run the operation. Both explain why.
struct BackendFit {
  bool available = true;
  std::string why_not;
};
using BackendFitFn = std::function<BackendFit(std::string_view backend)>;

/// Backend selection, the one definition that the runtime, `mcr explain`, `mcr.torch.explain` and
/// the planner share: a per-call override, else the first matching rule whose backend fits, else
/// the tuning table's range (the others then listed as slower), else the first matching preset
/// that fits, else the first backend of the default priority that fits. Pure: the answer depends
/// only on its arguments. Returns every candidate considered, ending with the chosen one if any.
std::vector<SelectionCandidate> select_backend(const SelectionInputs& inputs,
                                               const BackendFitFn& fit,
                                               const SelectionQuery& query);
/// "override", "rule", "tuning", "preset" or "default": the words of Selection::source.
std::string_view to_string(SelectionCandidate::Source source) noexcept;
/// The name of the chosen candidate of a select_backend() result, or nullptr when none fits.
const std::string* chosen_backend(const std::vector<SelectionCandidate>& candidates) noexcept;

/// "float" for floating dtypes, "int" for integer ones.
std::string_view dtype_class(DType t) noexcept;

/// 64-bit FNV-1a, the hash used for cross-rank consistency checks.
std::uint64_t fnv1a(std::string_view data, std::uint64_t seed = 1469598103934665603ull) noexcept;

}  // namespace mcr
