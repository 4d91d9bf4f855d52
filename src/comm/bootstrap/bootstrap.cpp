#include "bootstrap/bootstrap.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail {

std::vector<Bytes> Bootstrap::group_all_gather(
    const std::vector<int>& members, const std::string& tag, const Bytes& mine,
    const std::function<Bytes(const std::string& key)>& get) {
  auto it = std::find(members.begin(), members.end(), rank());
  if (it == members.end()) {
    throw InvalidArgument(
        fmt::format("group_all_gather '{}': rank {} is not a member", tag, rank()));
  }
  store().set(fmt::format("{}/{}", tag, rank()), mine);
  std::vector<Bytes> out;
  out.reserve(members.size());
  for (int m : members) {
    if (m == rank()) {
      out.push_back(mine);
      continue;
    }
    const std::string key = fmt::format("{}/{}", tag, m);
    out.push_back(get ? get(key) : store().get(key, timeout_));
  }
  return out;
}

}  // namespace mcr::detail
