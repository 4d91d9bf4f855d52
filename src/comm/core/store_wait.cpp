#include "core/store_wait.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// An agreed exchange's outcome, as the member that decided it wrote it: 'G' and every member's
// value (each a 4-byte length and its bytes), or 'S' and why the members gave up.
constexpr std::uint8_t kGo = 'G';
constexpr std::uint8_t kStop = 'S';

Bytes encode_go(const std::vector<Bytes>& values) {
  std::size_t size = 1;
  for (const Bytes& v : values)
    size += 4 + v.size();
  Bytes out;
  out.reserve(size);
  out.push_back(kGo);
  for (const Bytes& v : values) {
    const auto n = static_cast<std::uint32_t>(v.size());
    for (int shift = 0; shift < 32; shift += 8)
      out.push_back(static_cast<std::uint8_t>(n >> shift));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::vector<Bytes> decode_go(const Bytes& outcome, std::size_t members, const std::string& tag) {
  std::vector<Bytes> values;
  std::size_t at = 1;
  while (values.size() < members && at + 4 <= outcome.size()) {
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i)
      n |= static_cast<std::uint32_t>(outcome[at + static_cast<std::size_t>(i)]) << (8 * i);
    at += 4;
    if (n > outcome.size() - at) break;
    values.emplace_back(outcome.begin() + static_cast<std::ptrdiff_t>(at),
                        outcome.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  if (values.size() != members || at != outcome.size()) {
    throw MismatchError(
        fmt::format("group exchange '{}': a malformed outcome of {} bytes for {} "
                    "members in the store",
                    tag, outcome.size(), members));
  }
  return values;
}

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
  if (me == members.front()) {
    try {
      std::vector<Bytes> values;
      values.reserve(members.size());
      for (int m : members) {
        values.push_back(
            m == me ? mine : get_progressing(store, member_key(tag, m), left_until(deadline)));
      }
      if (claims_outcome(store, tag)) {
        store.set(tag + "/outcome", encode_go(values));
        return values;
      }
    } catch (const TimeoutError&) {
      give_up(store, members, tag, me, timeout);
    }
  } else {
    try {
      (void)get_progressing(store, tag + "/outcome", timeout);
    } catch (const TimeoutError&) {
      give_up(store, members, tag, me, timeout);
    }
  }
  // Set by now, or about to be, by whichever member decided.
  const Bytes outcome = get_progressing(store, tag + "/outcome", bootstrap.timeout());
  if (outcome.empty() || outcome.front() != kGo) {
    const std::string why = outcome.empty() ? std::string("(no reason)")
                                            : std::string(outcome.begin() + 1, outcome.end());
    throw TimeoutError(
        fmt::format("{}: {} (every member raises this, one that arrives later too)", what, why),
        std::string(op), 0, "store");
  }
  return decode_go(outcome, members.size(), tag);
}

}  // namespace mcr::detail
