// Splitting a group (torch's split_group, and DeviceMesh once init_process_group bound a device):
// the members of each new group form it alone, as new_group's members do (module.cpp,
// member_group); the ranks outside every new group take no part.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <c10/util/Exception.h>

#include "comm_thread.hpp"
#include "process_group.hpp"
#include "release_gil.hpp"

namespace mcr::torch_ext {

c10::intrusive_ptr<c10d::Backend> ProcessGroupMCR::split(
    const c10::intrusive_ptr<c10d::Store>& /*store: members meet through mcr's own*/,
    const std::vector<int>& ranks, const c10::intrusive_ptr<Options>& opts) {
  check_open();
  for (int r : ranks) {
    TORCH_CHECK(r >= 0 && r < size_, "mcr split: rank ", r, " is not a rank of this group of ",
                size_, " (split_group takes the parent group's ranks)");
  }
  // torch passes the ranks of the split this rank belongs to, or the first split's on a rank in
  // none of them (split_group): such a rank forms nothing.
  if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) return {};
  const std::string name = opts ? opts->group_name : std::string();
  {
    std::lock_guard lock(split_mu_);
    if (!name.empty() && name == split_name_ && ranks == split_ranks_) {
      // The split's call for its last device type: no reference is kept past it (a weak one
      // would keep the group's object, and with it its communicator, after torch dropped it).
      auto made = split_made_.lock();
      split_made_.reset();
      split_name_.clear();
      if (made) return made;
    }
  }
  const auto timeout = group_timeout(opts ? opts->timeout : this->timeout());
  // Not torch's group name as the key: split_group makes it unique among the names this process
  // holds, so two members that hold different groups can name one split differently. The members
  // agree on the ranks, and member_group counts the groups of these ranks formed from this one.
  std::string key = "torch/split/";
  for (int r : ranks)
    key += std::to_string(r) + ",";
  const ReleaseGilIfHeld no_gil;
  mcr::Communicator child =
      CommThread::instance().call([&] { return comm_.member_group(ranks, key, timeout); });
  const int rank = child.rank(), size = child.size();
  auto made =
      c10::make_intrusive<ProcessGroupMCR>(std::move(child), rank, size, timeout, local_ranks_);
  std::lock_guard lock(split_mu_);
  split_name_ = name;
  split_ranks_ = ranks;
  split_made_ = c10::weak_intrusive_ptr<c10d::Backend>(c10::intrusive_ptr<c10d::Backend>(made));
  return made;
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupMCR::getBackendOptions() {
  return c10::make_intrusive<OptionsMCR>(getBackendName(), timeout());
}

}  // namespace mcr::torch_ext
