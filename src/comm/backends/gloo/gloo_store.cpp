#include "backends/gloo/gloo_store.hpp"

#include <algorithm>

#include "core/store_wait.hpp"

namespace mcr::detail {

GlooStoreAdapter::GlooStoreAdapter(detail::Store& store, std::string prefix,
                                   std::chrono::milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_.set(prefix_ + key, Bytes(data.begin(), data.end()));
}

// Gloo waits here during a group's rendezvous: the waits keep this rank's operations in flight
// progressing, as peers may wait on them before they arrive (core/store_wait.hpp).
std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  Bytes value = get_progressing(store_, prefix_ + key, timeout_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  // Gloo passes its context timeout here; zero means "none given".
  const auto limit = timeout.count() > 0 ? timeout : timeout_;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (const auto& key : keys) {
    // A blocking get waits on the server without polling; the fetched value is small (an
    // address) and gloo fetches it again right after.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    get_progressing(store_, prefix_ + key, std::max(left, std::chrono::milliseconds(0)));
  }
}

}  // namespace mcr::detail
