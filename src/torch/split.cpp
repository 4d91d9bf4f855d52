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
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  check_open();
  for (int r : ranks) {
    TORCH_CHECK(r >= 0 && r < size_, "mcr split: rank ", r, " is not a rank of this group of ",
                size_, " (split_group takes the parent group's ranks)");
  }
  // torch passes the ranks of the split this rank belongs to, or the first split's on a rank in
  // none of them (split_group): such a rank forms nothing.
  if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) return {};
  {
    // One splitGroup passes one store (a PrefixStore it makes for the split) to its call for each
    // device type: the store tells the calls of one split from those of the next, whatever their
    // ranks and group names (torch's names repeat once a group is destroyed).
    std::lock_guard lock(split_mu_);
    auto earlier = split_store_.lock();
    if (earlier && earlier.get() == store.get()) {
      auto made = split_made_.lock();
      // No reference is kept past the split's next call: a weak one keeps the group's object, and
      // with it its communicator, after torch dropped the group.
      split_made_.reset();
      split_store_.reset();
      if (made) return made;
    }
  }
  const auto timeout = group_timeout(opts ? opts->timeout : this->timeout());
  // A key of constant size: member_group's meeting already tells splits apart by the member list
  // (hashed) and by how many groups of it this rank formed from this group, and every member
  // reads every member's key from the store. Not torch's group name: split_group makes it unique
  // among the names this process holds, so members that hold different groups can name one split
  // differently.
  const ReleaseGilIfHeld no_gil;
  mcr::Communicator child = CommThread::instance().call(
      [&] { return comm_.member_group(ranks, "torch/split", timeout); });
  const int rank = child.rank(), size = child.size();
  auto made =
      c10::make_intrusive<ProcessGroupMCR>(std::move(child), rank, size, timeout, local_ranks_);
  std::lock_guard lock(split_mu_);
  split_store_ = c10::weak_intrusive_ptr<c10d::Store>(store);
  split_made_ = c10::weak_intrusive_ptr<c10d::Backend>(c10::intrusive_ptr<c10d::Backend>(made));
  return made;
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupMCR::getBackendOptions() {
  return c10::make_intrusive<OptionsMCR>(getBackendName(), timeout());
}

}  // namespace mcr::torch_ext
