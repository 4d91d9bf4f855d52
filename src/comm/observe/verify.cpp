// Cross-rank verification: one all-gather of a fixed-size descriptor per collective on a channel of
// the communicator's own (two for the v-ops, whose count arrays follow when everything else
// agrees). Every rank receives every descriptor, so every rank reaches the same verdict and raises
// the same MismatchError; nothing was started, so the communicator stays in step.
#include "observe/verify.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/failure.hpp"
#include "core/kept.hpp"
#include "core/state.hpp"
#include "core/v_counts.hpp"
#include "mcr/errors.hpp"
#include "observe/flight_recorder.hpp"
#include "runtime/runtime.hpp"

namespace mcr::detail {
namespace {

// Distinct from every group id of the job: split() and new_group() ids are odd (fnv1a | 1), the
// world's is 0; the channel's is even and derived from its communicator's id.
std::uint64_t channel_id(std::uint64_t comm_id) {
  return (fnv1a(fmt::format("mcr/verify/{}", comm_id)) & ~std::uint64_t{1}) | 2u;
}

// What every rank must agree on. Fields an op does not use are zero, so they compare equal.
struct Descriptor {
  std::uint64_t collective;  // index among this communicator's collectives
  std::uint64_t sequence;    // the communicator's sequence number (for the message only)
  std::uint64_t count;
  std::int32_t root;
  std::uint8_t op;
  std::uint8_t dtype;
  std::uint8_t reduce;
  std::uint8_t async;
  std::uint8_t selection_failed;
  std::uint8_t in_place;  // all_reduce only: MPI needs it alike, and mcr's MPI rule reads it
  char backend[14];       // with in_place above: 48 bytes, as before
};
static_assert(sizeof(Descriptor) == 48, "the descriptor's size on the wire (docs/reliability.md)");

bool uses_root(OpType op) {
  return op == OpType::broadcast || op == OpType::reduce || op == OpType::gather ||
         op == OpType::scatter;
}
bool uses_count(OpType op) {
  return op != OpType::barrier && op != OpType::all_gather_v && op != OpType::all_to_all_v;
}
bool is_v_op(OpType op) {
  return op == OpType::all_gather_v || op == OpType::all_to_all_v;
}

Descriptor describe(const OpArgs& a, std::uint64_t collective, std::uint64_t sequence,
                    const Backend* backend) {
  Descriptor d;
  std::memset(&d, 0, sizeof d);  // padding too: the bytes travel as they are
  d.collective = collective;
  d.sequence = sequence;
  d.op = static_cast<std::uint8_t>(a.op);
  d.async = a.async ? 1 : 0;
  if (a.op == OpType::all_reduce) d.in_place = a.in_place ? 1 : 0;
  if (a.op != OpType::barrier) d.dtype = static_cast<std::uint8_t>(a.dtype);
  if (uses_count(a.op)) d.count = a.count;
  if (uses_root(a.op)) d.root = a.root;
  if (is_reduction(a.op)) d.reduce = static_cast<std::uint8_t>(a.reduce);
  if (backend == nullptr) {
    d.selection_failed = 1;
  } else {
    const auto name = backend->name();
    std::memcpy(d.backend, name.data(), std::min(name.size(), sizeof d.backend - 1));
  }
  return d;
}

// What makes two calls the same for `first` mode: everything the descriptor compares except the
// backend (it follows from the rest on every rank, the device's kind included, which is mixed in
// here: a call on a GPU tensor after one on a host tensor selects anew) and the indices; a v-op's
// count arrays are left out, since they change from call to call (MoE dispatch). Never 0 (the
// table's empty slot).
std::uint64_t signature(const OpArgs& a) noexcept {
  std::uint64_t h = 0x9e3779b97f4a7c15ULL;
  auto mix = [&h](std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  };
  mix(static_cast<std::uint64_t>(a.op) | (static_cast<std::uint64_t>(a.dtype) << 8) |
      (static_cast<std::uint64_t>(is_reduction(a.op) ? a.reduce : ReduceOp::sum) << 16) |
      (static_cast<std::uint64_t>(a.async) << 24) |
      (static_cast<std::uint64_t>(a.op == OpType::all_reduce && a.in_place) << 25) |
      (static_cast<std::uint64_t>(a.device.kind) << 32));
  mix(uses_count(a.op) ? a.count : 0);
  mix(uses_root(a.op) ? static_cast<std::uint64_t>(static_cast<std::uint32_t>(a.root)) : 0);
  return h == 0 ? 1 : h;
}

Descriptor decode(const Bytes& b) {
  Descriptor d;
  std::memcpy(&d, b.data(), sizeof d);
  return d;
}

// "0, 2-4": a compact list of ranks.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", ranks[i])
                  : fmt::format("{}{}{}", ranks[i], j == i + 1 ? ", " : "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

// "ranks 0 have fp32, ranks 1 have i32" when `values` (one per rank) are not all equal, else "".
std::string differences(const std::vector<std::string>& values, std::string_view verb = "have") {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // in order of first appearance
  for (std::size_t r = 0; r < values.size(); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == values[r]; });
    if (it == groups.end()) {
      groups.push_back({values[r], {}});
      it = groups.end() - 1;
    }
    it->second.push_back(static_cast<int>(r));
  }
  if (groups.size() <= 1) return {};
  std::string out;
  for (const auto& [value, ranks] : groups) {
    out += fmt::format("{}ranks {} {} {}", out.empty() ? "" : ", ", rank_list(ranks), verb, value);
  }
  return out;
}

template <class F>
std::vector<std::string> field(const std::vector<Descriptor>& all, F&& show) {
  std::vector<std::string> v;
  v.reserve(all.size());
  for (const auto& d : all)
    v.push_back(show(d));
  return v;
}

// Every field that differs, most fundamental first; empty when all agree. When the operation
// itself differs the other fields are its consequences and would only hide it.
std::string compare(const std::vector<Descriptor>& all) {
  auto op_of = [](const Descriptor& d) { return std::string(to_string(OpType(d.op))); };
  if (auto d = differences(field(all, op_of), "call"); !d.empty()) return "operation differs: " + d;
  std::vector<std::string> found;
  auto check = [&](std::string_view name, auto&& show, std::string_view hint = {}) {
    if (auto d = differences(field(all, show)); !d.empty())
      found.push_back(fmt::format("{} differs: {}{}", name, d, hint));
  };
  check(
      "collective index", [](const Descriptor& d) { return fmt::format("#{}", d.collective); },
      " (a rank issued a collective its peers did not)");
  check("form", [](const Descriptor& d) { return std::string(d.async ? "async" : "sync"); });
  check("place", [](const Descriptor& d) {
    return std::string(d.in_place != 0 ? "in place" : "out of place");
  });
  check("root", [](const Descriptor& d) { return fmt::format("{}", d.root); });
  check("dtype", [](const Descriptor& d) { return std::string(to_string(DType(d.dtype))); });
  check("count", [](const Descriptor& d) { return fmt::format("{}", d.count); });
  check("reduce op",
        [](const Descriptor& d) { return std::string(to_string(ReduceOp(d.reduce))); });
  check("backend", [](const Descriptor& d) {
    return d.selection_failed ? std::string("no backend (selection failed there)")
                              : fmt::format("'{}'", d.backend);
  });
  return fmt::format("{}", fmt::join(found, "; "));
}

std::string counts_past_limit(const std::vector<std::vector<std::uint64_t>>& all, std::size_t limit,
                              std::string_view backend) {
  const std::size_t n = all.size();
  for (std::size_t r = 0; r < n; ++r) {
    const std::span<const std::uint64_t> table(all[r]);
    const auto past = first_count_past_limit(table.first(n), table.subspan(n), limit);
    if (!past) continue;
    return fmt::format(
        "rank {}'s {}[{}] = {} elements exceeds backend '{}''s limit of {} (only the ranks "
        "that hold such an entry would see it; pass CallOptions::size_hint, alike on every "
        "rank, or a backend without the limit)",
        r, past->what, past->peer, past->value, backend, limit);
  }
  return {};
}

}  // namespace

// The v-ops' count arrays: all_gather_v's must be identical everywhere; in all_to_all_v, what rank
// i sends to j must be what j expects from i.
std::string compare_v_counts(OpType op, const std::vector<std::vector<std::uint64_t>>& all) {
  const std::size_t n = all.size();
  if (op == OpType::all_gather_v) {
    // Decided on the whole arrays (their first half: the counts of each rank's block); shown at
    // the first index where some rank differs from rank 0. (Shown in part and compared as shown,
    // counts differing past the eighth rank passed.)
    const auto counts = [](const std::vector<std::uint64_t>& c) {
      return std::span<const std::uint64_t>(c.data(), c.size() / 2);
    };
    std::size_t at = std::numeric_limits<std::size_t>::max();
    for (const auto& c : all) {
      const auto mine = counts(c);
      const auto first = counts(all.front());
      if (mine.size() != first.size()) return "counts differ in length";  // sized by the group
      const auto [a, b] = std::mismatch(mine.begin(), mine.end(), first.begin());
      if (a != mine.end()) at = std::min(at, static_cast<std::size_t>(a - mine.begin()));
    }
    if (at == std::numeric_limits<std::size_t>::max()) return {};
    std::vector<std::string> values;
    for (const auto& c : all)
      values.push_back(fmt::format("{}", counts(c)[at]));
    return fmt::format("counts differ: counts[{}] (rank {}'s block): {}", at, at,
                       differences(values));
  }
  std::vector<std::string> bad;
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint64_t sent = all[i][j];
      const std::uint64_t expected = all[j][n + i];
      if (sent == expected) continue;
      if (++total <= 4)
        bad.push_back(
            fmt::format("rank {} sends {} to rank {}, which expects {}", i, sent, j, expected));
    }
  }
  if (bad.empty()) return {};
  return fmt::format(
      "counts differ: {}{}", fmt::join(bad, "; "),
      total > bad.size() ? fmt::format(" (and {} more pairs)", total - bad.size()) : "");
}

// all_to_all_v on a backend whose counts are bounded (MPI's are C ints): a count or displacement
// past the bound is seen by the ranks that hold it only, who raise, while a rank whose own entries
// fit would enter the library and wait there for them. With every rank's counts at hand, every
// rank names the first such entry and raises. Displacements are the running sums of the counts.

std::string_view to_string(VerifyMode m) noexcept {
  switch (m) {
    case VerifyMode::off:
      return "0";
    case VerifyMode::first:
      return "first";
    case VerifyMode::every:
      return "1";
  }
  return "?";
}

VerifyMode verify_mode_requested(const InitOptions& options) {
  if (options.verify) return VerifyMode::every;
  const char* v = std::getenv("MCR_VERIFY");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "first") return VerifyMode::first;
  if (std::string_view(v) == "0") return VerifyMode::off;
  if (std::string_view(v) == "1") return VerifyMode::every;
  throw InvalidArgument(fmt::format(
      "MCR_VERIFY='{}' must be 1 (verify every collective), first (the first call of each "
      "signature, the default) or 0 (verify nothing)",
      v));
}

Verifier::Verifier(CommState& state, VerifyMode mode) : mode_(mode) {
  if (mode_ == VerifyMode::first) seen_ = std::make_unique<std::uint64_t[]>(kSeenSlots);
  if (state.size <= 1) return;  // nothing to compare with
  std::vector<int> all(static_cast<std::size_t>(state.size));
  for (int r = 0; r < state.size; ++r)
    all[static_cast<std::size_t>(r)] = r;
  // The backend list is equal on every rank (checked when the communicator was created), so every
  // rank splits the same one.
  for (auto& b : state.backends) {
    if (!b->supports(OpType::all_gather, DType::u8, ReduceOp::sum, Device::Kind::cpu).ok) continue;
    channel_ = b->split(all, channel_id(state.id));
    break;
  }
  if (!channel_) {
    throw Error(
        fmt::format("communicator {}: no backend can carry the cross-rank verification "
                    "(an all-gather of host bytes); unset MCR_VERIFY",
                    state.id));
  }
}

Verifier::~Verifier() = default;

namespace {

// An exchange's input and output. An exchange given up (a timeout, a failure) cannot be recalled
// from the channel's library: a late peer still completes it, which writes into the output and
// reads the input. So those are then kept until the process exits (core/kept.hpp): one
// descriptor and its all-gather per communicator that failed.
struct ExchangeBuffers {
  Bytes in;
  Bytes out;
};

// One all-gather on the channel, polled (never blocking in a library) so that it is bounded by
// `limit` and keeps every host-progress backend moving while it waits (design.md, rule 1).
std::vector<Bytes> exchange(Backend& channel, CommState& state, const OpArgs& about,
                            std::uint64_t index, const Bytes& mine,
                            std::chrono::milliseconds limit) {
  auto buffers = std::make_shared<ExchangeBuffers>();
  buffers->in = mine;
  buffers->out.resize(mine.size() * static_cast<std::size_t>(state.size));
  OpArgs x;
  x.op = OpType::all_gather;
  x.dtype = DType::u8;
  x.in = buffers->in.data();
  x.out = buffers->out.data();
  x.count = mine.size();
  x.async = true;
  x.may_block = false;
  x.timeout = limit;
  x.sequence = index;
  x.op_name = "verify";
  auto timed_out = [&] {
    // The operation is in this rank's flight record while it is verified (Verifier::pick), so the
    // context names the ranks that have not reached it, as for any timeout.
    state.flight.ended(state.next_sequence, FlightState::timed_out);
    const auto message = fmt::format(
        "verify: {} #{} on rank {}: not every rank reached the cross-rank verification within {} "
        "ms (a rank may be late or stopped, may be in a point-to-point operation or in another "
        "communicator's collective that it issued in a different order (then set MCR_VERIFY=0), "
        "or may not verify this call (MCR_VERIFY=0 or set_verify(false) there)){}",
        about.op_name, state.next_sequence, state.rank, limit.count(),
        timeout_context(state.flight, state.next_sequence));
    state.abort(message);
    return TimeoutError(message, std::string(about.op_name), state.next_sequence, "verify");
  };
  auto exiting = [&] {
    state.flight.ended(state.next_sequence, FlightState::failed);
    const auto message = fmt::format(
        "verify: {} #{} on rank {}: cross-rank verification abandoned: this process is exiting "
        "on an error ({}); the operation was not started",
        about.op_name, state.next_sequence, state.rank, failure_reason());
    state.abort(message);
    return Error(message);
  };
  try {
    auto pending = channel.start(x);
    const auto began = Clock::now();
    // As Work::wait: spin briefly for latency, then yield, then sleep, so that ranks
    // oversubscribing cores do not starve the peer they wait for.
    for (std::uint64_t spins = 1; pending && !pending->test(); ++spins) {
      engine().progress_all();
      if (spins < 256) continue;
      const auto waited = Clock::now() - began;
      if (waited > limit) {
        pending->abandon();
        throw timed_out();
      }
      // The process is exiting on its own error (mcr::exiting_on_error): its peers may never
      // arrive, and its exit must not wait out the limit for them.
      if (exiting_on_error()) {
        pending->abandon();
        throw exiting();
      }
      if (waited < std::chrono::milliseconds(5)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  } catch (const TimeoutError& e) {
    keep_until_exit(std::move(buffers));
    if (std::string_view(e.backend()) == "verify") throw;
    throw timed_out();  // the channel's own timer (gloo) fired first: same meaning
  } catch (const BackendError& e) {
    // The channel's library failed (a peer lost, a connection reset): as for a failure in any
    // operation, the peers' state is unknown and the communicator is aborted, named by the
    // operation verified (the channel's own numbering means nothing to the caller).
    keep_until_exit(std::move(buffers));
    state.flight.ended(state.next_sequence, FlightState::failed);
    const auto message = fmt::format(
        "verify: {} #{} on rank {}: the cross-rank verification failed in its channel: {}; the "
        "operation was not started",
        about.op_name, state.next_sequence, state.rank, e.what());
    state.abort(message);
    throw BackendError(message);
  } catch (...) {
    keep_until_exit(std::move(buffers));
    throw;
  }
  const Bytes& out = buffers->out;
  std::vector<Bytes> all;
  for (int r = 0; r < state.size; ++r) {
    const auto* p = out.data() + static_cast<std::size_t>(r) * mine.size();
    all.emplace_back(p, p + mine.size());
  }
  return all;
}

}  // namespace

bool Verifier::seen(std::uint64_t signature) const noexcept {
  for (std::size_t i = signature % kSeenSlots;; i = (i + 1) % kSeenSlots) {
    if (seen_[i] == signature) return true;
    if (seen_[i] == 0) return false;
  }
}

void Verifier::remember(std::uint64_t signature) noexcept {
  // A full table (a program with more than kSeenSlots / 2 distinct signatures, e.g. counts that
  // change every step) stops learning: every later new signature is verified each time it comes.
  if (seen_count_ >= kSeenSlots / 2) return;
  for (std::size_t i = signature % kSeenSlots;; i = (i + 1) % kSeenSlots) {
    if (seen_[i] == signature) return;
    if (seen_[i] == 0) {
      seen_[i] = signature;
      ++seen_count_;
      return;
    }
  }
}

bool Verifier::skips(const OpArgs& args) noexcept {
  if (args.op == OpType::send || args.op == OpType::recv) return true;
  if (enabled_ && channel_ && (mode_ != VerifyMode::first || !seen(signature(args)))) return false;
  ++collectives_;
  return true;
}

Backend& Verifier::pick(CommState& state, const OpArgs& args, const CallOptions& opts,
                        const std::function<Backend&()>& pick) {
  if (args.op == OpType::send || args.op == OpType::recv) return pick();
  const std::uint64_t collective = collectives_++;
  if (!enabled_ || !channel_) return pick();

  // A selection error on some ranks only is a "backend differs"; on every rank it is theirs.
  Backend* chosen = nullptr;
  std::exception_ptr failure;
  std::string own;  // this rank's reason where its selection failed (its peers see only that)
  try {
    chosen = &pick();
  } catch (const Error& e) {
    failure = std::current_exception();
    own = fmt::format("; on this rank: {}", e.what());
  }
  const auto limit =
      std::min(opts.timeout.count() > 0 ? opts.timeout : state.timeout, kLongestTimeout);
  const Descriptor mine = describe(args, collective, state.next_sequence, chosen);
  // In the flight record while it is verified, so that a peer that never arrives is named as
  // behind (published progress counts this rank as having reached the operation); the issue that
  // follows records it again with its backend.
  const std::uint64_t seq = state.next_sequence;
  state.flight.issued(seq, args.op, args.dtype, args.count, args.root, args.async,
                      chosen != nullptr ? chosen->name() : std::string_view("verify"),
                      args.count * dtype_size(args.dtype));
  struct EndVerify {
    CommState& state;
    std::uint64_t seq;
    bool armed = true;
    ~EndVerify() {
      if (!armed) return;
      const FlightEntry* e = state.flight.find(seq);
      const bool open =
          e != nullptr && (e->state.load(std::memory_order_relaxed) == FlightState::issued ||
                           e->state.load(std::memory_order_relaxed) == FlightState::started);
      if (open) state.flight.ended(seq, FlightState::failed);  // a timeout ended it already
    }
  } end_verify{state, seq};
  Bytes bytes(sizeof mine);
  std::memcpy(bytes.data(), &mine, sizeof mine);
  std::vector<Descriptor> all;
  for (const auto& b : exchange(*channel_, state, args, exchanges_++, bytes, limit))
    all.push_back(decode(b));

  std::string verdict = compare(all);
  bool past_limit = false;  // the ranks agree, on counts that the backend cannot carry
  if (verdict.empty() && is_v_op(args.op)) {
    // Every rank runs the same v-op, so every rank makes this second exchange.
    const auto n = static_cast<std::size_t>(state.size);
    std::vector<std::uint64_t> counts(2 * n, 0);
    for (std::size_t r = 0; r < n; ++r) {
      counts[r] = args.send_counts[r];
      if (args.op == OpType::all_to_all_v) counts[n + r] = args.recv_counts[r];
    }
    Bytes raw(counts.size() * sizeof(std::uint64_t));
    std::memcpy(raw.data(), counts.data(), raw.size());
    std::vector<std::vector<std::uint64_t>> tables;
    for (const auto& b : exchange(*channel_, state, args, exchanges_++, raw, limit)) {
      tables.emplace_back(2 * n);
      std::memcpy(tables.back().data(), b.data(), b.size());
    }
    verdict = compare_v_counts(args.op, tables);
    if (verdict.empty() && args.op == OpType::all_to_all_v && chosen != nullptr &&
        chosen->max_count() != static_cast<std::size_t>(-1)) {
      verdict = counts_past_limit(tables, chosen->max_count(), chosen->name());
      past_limit = !verdict.empty();
    }
  }
  if (verdict.empty() && !failure) {
    // Open until the issue records it afresh, with its backend: the waits before it starts (the
    // device fence, composed operations finished first) are this operation's, never "completed".
    end_verify.armed = false;
    state.flight.verified();
  }
  if (!verdict.empty()) {
    std::string what =
        fmt::format("{} #{}: {}{} (MCR_VERIFY; the operation was not started on any rank)",
                    args.op_name, state.next_sequence, verdict, own);
    if (past_limit) throw UnsupportedError(std::move(what));
    throw MismatchError(std::move(what));
  }
  if (failure) std::rethrow_exception(failure);
  if (mode_ == VerifyMode::first) remember(signature(args));
  return *chosen;
}

}  // namespace mcr::detail

namespace mcr {

void Communicator::set_verify(bool on) {
  auto& s = state();
  if (!s.verifier) {
    if (!on) return;
    throw InvalidArgument(
        "set_verify(true): this communicator was created without cross-rank verification "
        "(MCR_VERIFY=0, a communicator of one rank, or one of hier's own); leave MCR_VERIFY unset "
        "or set it to first or 1 before init() (the verification channel is formed when a "
        "communicator is created)");
  }
  s.verifier->set_enabled(on);
}

bool Communicator::verifying() const {
  const auto& s = state();
  return s.verifier != nullptr && s.verifier->enabled();
}

}  // namespace mcr
