#include "bootstrap/given_store.hpp"

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace mcr::detail {
namespace {

class GivenStore final : public Store {
 public:
  GivenStore(std::shared_ptr<KeyValueStore> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const Bytes& value) override { store_->set(named(key), value); }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    return store_->get(named(key), timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return store_->add(named(key), delta);
  }
  bool check(const std::vector<std::string>& keys) override {
    std::vector<std::string> named_keys;
    named_keys.reserve(keys.size());
    for (const auto& k : keys)
      named_keys.push_back(named(k));
    return store_->check(named_keys);
  }
  std::string description() const override { return store_->description(); }

 private:
  // Unconditionally prefixed (even keys that already start with "mcr/"): two runtime keys can
  // then never map to the same store key.
  std::string named(const std::string& key) const { return prefix_ + key; }

  std::shared_ptr<KeyValueStore> store_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<Store> adopt_given_store(std::shared_ptr<KeyValueStore> store, int rank) {
  const std::int64_t generation = store->add(fmt::format("mcr/generation/{}", rank), 1);
  return std::make_unique<GivenStore>(std::move(store), fmt::format("mcr/{}/", generation));
}

}  // namespace mcr::detail
