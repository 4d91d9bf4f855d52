#include "core/store_wait.hpp"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

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

std::vector<Bytes> group_all_gather_progressing(Bootstrap& bootstrap,
                                                const std::vector<int>& members,
                                                const std::string& tag, const Bytes& mine) {
  const int me = bootstrap.rank();
  if (std::find(members.begin(), members.end(), me) == members.end()) {
    throw InvalidArgument(fmt::format("group_all_gather '{}': rank {} is not a member", tag, me));
  }
  Store& store = bootstrap.store();
  store.set(fmt::format("{}/{}", tag, me), mine);
  std::vector<Bytes> out;
  out.reserve(members.size());
  for (int m : members) {
    out.push_back(
        m == me ? mine : get_progressing(store, fmt::format("{}/{}", tag, m), bootstrap.timeout()));
  }
  return out;
}

}  // namespace mcr::detail
