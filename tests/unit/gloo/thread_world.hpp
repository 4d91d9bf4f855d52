// Runs N ranks as N threads of this process: one TCP store server, and per rank its own store
// client, Bootstrap and Gloo world backend, exactly as separate processes would have.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/factories.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/store_exchange.hpp"
#include "bootstrap/tcp_store.hpp"
#include "core/backend.hpp"

namespace mcr::test {

using RankBody =
    std::function<void(int rank, detail::Backend& backend, detail::Bootstrap& bootstrap)>;

/// Runs `body` on `size` threads, each a rank with its own Gloo world. Returns the failures
/// ("rank r: message"), empty when every rank finished cleanly.
inline std::vector<std::string> run_ranks(
    int size, const RankBody& body, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  detail::TcpStoreServer server("127.0.0.1", 0);
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        detail::LaunchInfo launch;
        launch.launcher = detail::Launcher::torchrun;
        launch.rank = rank;
        launch.size = size;
        launch.local_rank = rank;
        launch.local_size = size;
        auto store = detail::connect_tcp_store("127.0.0.1", server.port(), timeout);
        auto exchange = detail::make_store_exchange(*store, rank, size, timeout);
        detail::Bootstrap bootstrap(launch, std::move(exchange), std::move(store), timeout);
        auto backend = detail::gloo_backend_factory().create_world(bootstrap);
        body(rank, *backend, bootstrap);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(rank) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return failures;
}

/// Waits for `op` (nullptr means already complete), polling test() as the runtime does.
inline void wait_for(std::unique_ptr<detail::PendingOp> op,
                     std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  if (!op) return;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int polls = 0; !op->test(); ++polls) {
    if (std::chrono::steady_clock::now() > deadline) {
      op->abandon();
      throw std::runtime_error("test harness: operation did not complete in time");
    }
    // Yield at first, then nap: four ranks spinning on two cores would starve gloo's threads.
    if (polls < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace mcr::test
