#include "core/store_wait.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bootstrap/store_wire.hpp"
#include "core/state.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {

Bytes get_progressing(Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  using SteadyClock = std::chrono::steady_clock;
  Engine& e = engine();
  const auto deadline = SteadyClock::now() + timeout;
  const std::vector<std::string> keys{key};
  while (e.host_progress_pending()) {
    if (store.check(keys)) return store.get(key, timeout);  // there: returns at once
    e.progress_all();
    if (SteadyClock::now() >= deadline) {
      throw TimeoutError(
          fmt::format("{}: key '{}' was not set within {} ms (this rank kept its operations in "
                      "flight progressing meanwhile)",
                      store.description(), key, timeout.count()),
          "store_get", 0, "store");
    }
    // A store round trip per poll: about 0.1 ms apart keeps the store's load small and the delay
    // after the key appears short beside a group's formation.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return store.get(key, std::max(left, std::chrono::milliseconds(1)));
}

namespace {

std::string member_key(const std::string& tag, int member) {
  return fmt::format("{}/{}", tag, member);
}

void check_member(const std::vector<int>& members, int me, const std::string& tag) {
  if (std::find(members.begin(), members.end(), me) == members.end()) {
    throw InvalidArgument(fmt::format("group_all_gather '{}': rank {} is not a member", tag, me));
  }
}

// Whether this member decides the exchange's outcome: the first to ask does.
bool claims_outcome(Store& store, const std::string& tag) {
  return store.add(tag + "/claim", 1) == 1;
}

// An agreed exchange's outcome, as the member that decided it wrote it: 'G', the number of values
// and every member's value, or 'S' and why the members gave up.
constexpr std::uint8_t kGo = 'G';
constexpr std::uint8_t kStop = 'S';
// group_agree_succeeded's outcome where a member failed its step: 'F' and that failure.
constexpr std::uint8_t kFailed = 'F';

}  // namespace

Bytes encode_agreed_go(const std::vector<Bytes>& values) {
  store_wire::Writer w;
  w.u8(kGo);
  w.u32(static_cast<std::uint32_t>(values.size()));
  for (const Bytes& v : values)
    w.blob(v.data(), v.size());
  return std::move(w.bytes());
}

std::vector<Bytes> decode_agreed_go(const Bytes& outcome, std::size_t members,
                                    const std::string& tag) {
  std::vector<Bytes> values;
  bool well_formed = false;
  store_wire::Reader r(outcome.data(), outcome.size());
  try {
    if (r.u8() == kGo && r.u32() == members) {
      values.reserve(members);
      for (std::size_t i = 0; i < members; ++i)
        values.push_back(r.blob());
      well_formed = r.at_end();
    }
  } catch (const store_wire::ProtocolError&) {
    // Truncated: refused below with every other malformed decision.
  }
  if (!well_formed) {
    throw MismatchError(
        fmt::format("group exchange '{}': a malformed outcome of {} bytes for {} members in the "
                    "store",
                    tag, outcome.size(), members));
  }
  return values;
}

namespace {

// A member's wait for the others ran out: it decides that they all give up, unless another member
// decided first.
void give_up(Store& store, const std::vector<int>& members, const std::string& tag, int me,
             std::chrono::milliseconds waited) {
  if (!claims_outcome(store, tag)) return;
  std::vector<int> absent;
  for (int m : members) {
    if (!store.check({member_key(tag, m)})) absent.push_back(m);
  }
  const std::string why = absent.empty()
                              ? fmt::format(
                                    "world rank {} gave up after waiting {} ms for the other "
                                    "members; the last one arrived only then",
                                    me, waited.count())
                              : fmt::format(
                                    "world rank {} gave up after waiting {} ms for the other "
                                    "members; world ranks [{}] had not arrived",
                                    me, waited.count(), fmt::join(absent, ", "));
  store.set(tag + "/outcome", to_bytes(fmt::format("{}{}", static_cast<char>(kStop), why)));
}

// The text after an outcome's first byte: a stop's or a failure's reason.
std::string outcome_reason(const Bytes& outcome) {
  return outcome.empty() ? std::string("(no reason)")
                         : std::string(outcome.begin() + 1, outcome.end());
}

// Every member of an exchange that gave up raises the same error, the one that decided it too.
[[noreturn]] void raise_gave_up(const Bytes& outcome, std::string_view op, std::string_view what) {
  throw TimeoutError(fmt::format("{}: {} (every member raises this, one that arrives later too)",
                                 what, outcome_reason(outcome)),
                     std::string(op), 0, "store");
}

std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

std::vector<Bytes> group_all_gather_agreed(Bootstrap& bootstrap, const std::vector<int>& members,
                                           const std::string& tag, const Bytes& mine,
                                           std::chrono::milliseconds timeout, std::string_view op,
                                           std::string_view what) {
  const int me = bootstrap.rank();
  check_member(members, me, tag);
  Store& store = bootstrap.store();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  store.set(member_key(tag, me), mine);
  // The first member reads every value and, where all came in time, decides that the members go
  // on, with the values in the decision: the others read one key, not every member's.
  const std::string outcome_key = tag + "/outcome";
  std::optional<Bytes> outcome;
  if (me == members.front()) {
    try {
      std::vector<Bytes> values;
      values.reserve(members.size());
      for (int m : members) {
        values.push_back(
            m == me ? mine : get_progressing(store, member_key(tag, m), left_until(deadline)));
      }
      if (claims_outcome(store, tag)) {
        store.set(outcome_key, encode_agreed_go(values));
        return values;
      }
    } catch (const TimeoutError&) {
      give_up(store, members, tag, me, timeout);
    }
  } else {
    try {
      outcome = get_progressing(store, outcome_key, timeout);
    } catch (const TimeoutError&) {
      give_up(store, members, tag, me, timeout);
    }
  }
  // Unless read above, set by now or about to be by whichever member decided.
  if (!outcome) outcome = get_progressing(store, outcome_key, bootstrap.timeout());
  if (outcome->empty() || outcome->front() != kGo) raise_gave_up(*outcome, op, what);
  return decode_agreed_go(*outcome, members.size(), tag);
}

std::string group_agree_succeeded(Bootstrap& bootstrap, const std::vector<int>& members,
                                  const std::string& tag, const std::string& failure,
                                  std::chrono::milliseconds timeout, std::string_view op,
                                  std::string_view what) {
  const int me = bootstrap.rank();
  check_member(members, me, tag);
  Store& store = bootstrap.store();
  // Two keys per agreement (the store never forgets a key, and groups may be formed by the
  // thousand): the outcome, and one counter in which each member's arrival lands in a field of its
  // own, so that the value returned by the atomic add tells a member whether it decides. A success
  // adds 1: the one that brings the count to exactly the number of members (nothing else there)
  // decides that all go on. A failure adds kFailure: the first one decides that all stop, unless
  // a member gave up before. A member that waited `timeout` adds kGaveUp: the first one decides
  // that all stop, unless every member had succeeded or one had failed.
  constexpr std::int64_t kFailure = std::int64_t{1} << 21;
  constexpr std::int64_t kGaveUp = std::int64_t{1} << 42;
  constexpr std::int64_t kField = kFailure - 1;
  const auto n = static_cast<std::int64_t>(members.size());
  const std::string counter = tag + "/arrived";
  const std::string outcome_key = tag + "/outcome";
  if (failure.empty()) {
    if (store.add(counter, 1) == n) store.set(outcome_key, Bytes{kGo});
  } else {
    const std::int64_t v = store.add(counter, kFailure);
    if (v < kGaveUp && v / kFailure == 1) {
      store.set(outcome_key, to_bytes(fmt::format("{}world rank {}: {}", static_cast<char>(kFailed),
                                                  me, failure)));
    }
  }
  std::optional<Bytes> outcome;
  try {
    outcome = get_progressing(store, outcome_key, timeout);
  } catch (const TimeoutError&) {
    const std::int64_t v = store.add(counter, kGaveUp);
    const std::int64_t succeeded = v & kField;
    if (v / kGaveUp == 1 && succeeded < n && (v % kGaveUp) / kFailure == 0) {
      store.set(outcome_key,
                to_bytes(fmt::format("{}world rank {} gave up after waiting {} ms for the other "
                                     "members; {} of {} had arrived",
                                     static_cast<char>(kStop), me, timeout.count(), succeeded, n)));
    }
  }
  // Unless read above, set by now or about to be by whichever member decided.
  if (!outcome) outcome = get_progressing(store, outcome_key, bootstrap.timeout());
  if (outcome->size() == 1 && outcome->front() == kGo) return {};
  if (!outcome->empty() && outcome->front() == kFailed) return outcome_reason(*outcome);
  raise_gave_up(*outcome, op, what);
}

}  // namespace mcr::detail
