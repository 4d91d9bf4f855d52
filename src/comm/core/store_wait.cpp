#include "core/store_wait.hpp"

#include <algorithm>
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

// Every member's value, once every member has set it.
std::vector<Bytes> read_values(Bootstrap& bootstrap, const std::vector<int>& members,
                               const std::string& tag, const Bytes& mine,
                               std::chrono::milliseconds timeout) {
  std::vector<Bytes> out;
  out.reserve(members.size());
  for (int m : members) {
    out.push_back(m == bootstrap.rank()
                      ? mine
                      : get_progressing(bootstrap.store(), member_key(tag, m), timeout));
  }
  return out;
}

// Whether this member decides the exchange's outcome: the first to ask does.
bool claims_outcome(Store& store, const std::string& tag) {
  return store.add(tag + "/claim", 1) == 1;
}

}  // namespace

std::vector<Bytes> group_all_gather_progressing(Bootstrap& bootstrap,
                                                const std::vector<int>& members,
                                                const std::string& tag, const Bytes& mine) {
  check_member(members, bootstrap.rank(), tag);
  bootstrap.store().set(member_key(tag, bootstrap.rank()), mine);
  return read_values(bootstrap, members, tag, mine, bootstrap.timeout());
}

std::vector<Bytes> group_all_gather_agreed(Bootstrap& bootstrap, const std::vector<int>& members,
                                           const std::string& tag, const Bytes& mine,
                                           std::chrono::milliseconds timeout, std::string_view op,
                                           std::string_view what) {
  const int me = bootstrap.rank();
  check_member(members, me, tag);
  Store& store = bootstrap.store();
  // The value first: a member that counts as arrived has its value in the store.
  store.set(member_key(tag, me), mine);
  const std::string outcome_key = tag + "/outcome";
  const Bytes go = to_bytes("go");
  const auto count = static_cast<std::int64_t>(members.size());
  if (store.add(tag + "/arrived", 1) == count && claims_outcome(store, tag)) {
    store.set(outcome_key, go);
  }
  Bytes outcome;
  try {
    outcome = get_progressing(store, outcome_key, timeout);
  } catch (const TimeoutError&) {
    if (claims_outcome(store, tag)) {
      std::vector<int> absent;
      for (int m : members) {
        if (!store.check({member_key(tag, m)})) absent.push_back(m);
      }
      store.set(
          outcome_key,
          to_bytes(absent.empty() ? fmt::format("world rank {} gave up after waiting {} ms for the "
                                                "other members; the last one arrived only then",
                                                me, timeout.count())
                                  : fmt::format("world rank {} gave up after waiting {} ms for the "
                                                "other members; world ranks [{}] had not arrived",
                                                me, timeout.count(), fmt::join(absent, ", "))));
    }
    // Set by now, or about to be, by whichever member claimed the outcome.
    outcome = get_progressing(store, outcome_key, bootstrap.timeout());
  }
  if (outcome != go) {
    throw TimeoutError(fmt::format("{}: {} (every member raises this, one that arrives "
                                   "later too)",
                                   what, from_bytes(outcome)),
                       std::string(op), 0, "store");
  }
  // Every member arrived, so every value is set.
  return read_values(bootstrap, members, tag, mine, bootstrap.timeout());
}

}  // namespace mcr::detail
