// Gloo's rendezvous store interface over our Store, with a key prefix per group so that the
// rendezvous of every group (world, and each split) lives in its own key space.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "bootstrap/bootstrap.hpp"

namespace mcr::detail {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  /// `prefix` is prepended to every key ("gloo/world/", "gloo/<group_id>/"). Waits without an
  /// explicit timeout give up after `timeout`. `store` must outlive the adapter.
  GlooStoreAdapter(detail::Store& store, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  detail::Store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace mcr::detail
