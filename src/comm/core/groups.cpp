// Sub-communicators: split(color, key) and new_group(ranks), collective over the parent, and
// member_group(ranks, key), collective over its members only.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/store_wait.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/errors.hpp"
#include "runtime/runtime.hpp"

namespace mcr {
namespace {

using detail::Bytes;

struct SplitEntry {
  int color;
  int key;
  // new_group(): a digest of the list the rank passed (never 0), so that ranks passing different
  // lists raise instead of forming a group that is not the one each asked for; split(): 0.
  std::uint64_t list = 0;
};

// A rank's record in a split's exchange: its color, key and list digest, then, where it refused
// its own arguments, why.
Bytes encode(SplitEntry e, std::string_view refused) {
  Bytes b(sizeof e + refused.size());
  std::memcpy(b.data(), &e, sizeof e);
  std::memcpy(b.data() + sizeof e, refused.data(), refused.size());
  return b;
}

SplitEntry decode(const Bytes& b, int rank, std::string* refused) {
  if (b.size() < sizeof(SplitEntry)) {
    throw MismatchError(fmt::format("split: rank {} sent a malformed color/key record", rank));
  }
  SplitEntry e{};
  std::memcpy(&e, b.data(), sizeof e);
  refused->assign(b.begin() + sizeof e, b.end());
  return e;
}

// The world ranks of `members` (ranks of `s`), in their order.
std::vector<int> world_ranks_of(const detail::CommState& s, const std::vector<int>& members) {
  std::vector<int> world;
  world.reserve(members.size());
  for (int r : members)
    world.push_back(s.world_ranks[static_cast<std::size_t>(r)]);
  return world;
}

// The communicator of `members` (ranks of `s`, in new-rank order) over the backends they formed.
Communicator make_child(detail::CommState& s, const std::vector<int>& members,
                        std::uint64_t group_id,
                        std::vector<std::unique_ptr<detail::Backend>> children) {
  const auto mine = std::find(members.begin(), members.end(), s.rank);
  const int my_rank = mine == members.end() ? -1 : static_cast<int>(mine - members.begin());
  auto child = detail::make_comm_state(my_rank, static_cast<int>(members.size()), group_id,
                                       world_ranks_of(s, members), std::move(children), s.timeout);
  child->observer = s.observer;
  return Communicator(std::move(child));
}

// Forms a group's backends library by library, in the communicator's order (equal on every rank).
// A library's formation may wait for every rank that takes part without a bound (MPI_Comm_split,
// MPI_Comm_create_group, ncclCommSplit), so a rank whose library failed to form the group (out of
// file descriptors, a connection refused) must not leave the others in the next library's
// formation, waiting for it forever. After each library the ranks that take part (`participants`,
// world ranks: the parent's for split(), the members for member_group()) therefore agree through
// the store whether it formed everywhere (group_agree_succeeded), and if not, every one of them
// raises and none goes on: the rank that failed its own error, the others a BackendError naming
// it. Nothing is left formed, so the communicator stays usable. A failure decides at once; only
// success waits for every rank, at most 8 store timeouts: a rendezvous that succeeds can take up to
// 7 of them (Gloo's waits one for the peers' addresses, 5 for its connections, one for its closing
// barrier), and before this agreement a rank waited for the next library without any bound.
std::vector<std::unique_ptr<detail::Backend>> form_agreed(
    detail::CommState& s, const std::vector<int>& participants, const std::string& tag,
    std::string_view op, const std::string& what,
    const std::function<std::unique_ptr<detail::Backend>(detail::Backend&)>& form) {
  detail::Bootstrap& bootstrap = *detail::runtime().bootstrap;
  std::vector<std::unique_ptr<detail::Backend>> children;
  for (std::size_t i = 0; i < s.backends.size(); ++i) {
    detail::Backend& b = *s.backends[i];
    std::exception_ptr failed;
    std::string message;
    std::unique_ptr<detail::Backend> child;
    try {
      child = form(b);
    } catch (const std::exception& e) {
      failed = std::current_exception();
      message = e.what();
      if (message.empty()) message = "(no message)";
    }
    if (participants.size() > 1) {
      const std::string stop = detail::group_agree_succeeded(
          bootstrap, participants, fmt::format("{}/formed/{}", tag, i), message,
          8 * bootstrap.timeout(), op, what);
      if (failed) std::rethrow_exception(failed);
      if (!stop.empty()) {
        throw BackendError(fmt::format(
            "{}: the {} library failed to form the group on {}; no rank went on, so the group was "
            "formed nowhere and the communicator stays usable",
            what, b.name(), stop));
      }
    } else if (failed) {
      std::rethrow_exception(failed);
    }
    if (child) children.push_back(std::move(child));
  }
  return children;
}

// A rank whose own arguments were refused still meets the others (`meet`), so that they raise
// with its reason at once instead of waiting out their timeout, and so that every rank's count of
// meetings advances alike. Then it raises its own reason, which comes before any error of the
// meeting itself.
template <class Meet>
[[noreturn]] void meet_then_refuse(const Meet& meet, const std::string& refused) {
  try {
    (void)meet();
  } catch (const Error&) {  // NOLINT(bugprone-empty-catch): this rank's own error comes first
  }
  throw InvalidArgument(refused);
}

// `refused`: this rank's arguments failed their checks, and why. It still takes part in the
// exchange below, so that every rank raises at once (the others name it), and every rank's count
// of splits advances alike: the next split meets as usual.
Communicator do_split(detail::CommState& s, int color, int key, const std::string& refused = {},
                      std::uint64_t list = 0) {
  s.check_usable();
  detail::engine()
      .finish_composed_ops();  // a split may block in a library (docs/design.md, rule 7)
  detail::Runtime& rt = detail::runtime();
  const std::uint64_t index = s.splits++;
  // Peers may still wait on this rank's operations in flight before they arrive, and the
  // backends' splits below wait for every rank without a bound (store_wait.hpp).
  auto exchange = [&] {
    return detail::group_all_gather_agreed(
        *rt.bootstrap, s.world_ranks, fmt::format("mcr/split/{}/{}", s.id, index),
        encode({color, key, list}, refused), rt.bootstrap->timeout(), "split",
        fmt::format("split #{} of communicator {} ({} ranks)", index + 1, s.id, s.size));
  };
  if (!refused.empty()) meet_then_refuse(exchange, refused);
  auto all = exchange();
  // Members of my group, ordered by (key, parent rank): the new rank is the position in this list.
  std::vector<std::tuple<int, int>> order;
  std::string why;
  std::uint64_t rank0_list = 0;
  for (int r = 0; r < s.size; ++r) {
    SplitEntry e = decode(all[static_cast<std::size_t>(r)], r, &why);
    if (!why.empty()) {
      throw InvalidArgument(fmt::format(
          "split #{} of communicator {}: rank {} refused its arguments: {}; no rank formed the "
          "group, and the next split meets as usual",
          index + 1, s.id, r, why));
    }
    if (r == 0) rank0_list = e.list;
    if (e.list != rank0_list) {  // every rank sees every record: all raise alike
      const auto call = [](std::uint64_t l) { return l == 0 ? "split()" : "new_group()"; };
      const std::string what =
          (e.list == 0) != (rank0_list == 0)
              ? fmt::format("called {} where rank 0 called {}", call(e.list), call(rank0_list))
              : std::string(
                    "passed new_group() another list of ranks than rank 0 (every rank "
                    "passes the same list, in the same order)");
      throw MismatchError(fmt::format(
          "split #{} of communicator {}: rank {} {}; no rank formed the group, and the next "
          "split meets as usual",
          index + 1, s.id, r, what));
    }
    if (color != Communicator::kUndefinedColor && e.color == color) order.emplace_back(e.key, r);
  }
  std::sort(order.begin(), order.end());
  std::vector<int> members;
  for (auto& [k, r] : order)
    members.push_back(r);
  // An id equal on every member and distinct from every other group of the job.
  const std::uint64_t group_id =
      fnv1a(fmt::format("{}/{}/{}", s.id, index, members.empty() ? -1 : members.front())) | 1u;

  // Every backend splits collectively over the parent, in the same order on every rank.
  auto children = form_agreed(s, s.world_ranks, fmt::format("mcr/split/{}/{}", s.id, index),
                              "split", fmt::format("split #{} of communicator {}", index + 1, s.id),
                              [&](detail::Backend& b) { return b.split(members, group_id); });
  if (members.empty()) return Communicator();
  return make_child(s, members, group_id, std::move(children));
}

void check_ranks(const detail::CommState& s, std::span<const int> ranks, const char* call) {
  if (ranks.empty()) throw InvalidArgument(fmt::format("{}: ranks is empty", call));
  std::vector<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= s.size) {
      throw InvalidArgument(fmt::format(
          "{}: rank {} in ranks is out of range for a communicator of size {}", call, r, s.size));
    }
    if (std::find(seen.begin(), seen.end(), r) != seen.end()) {
      throw InvalidArgument(fmt::format("{}: rank {} appears twice in ranks", call, r));
    }
    seen.push_back(r);
  }
}

// The members of a member_group() agree on its key before any library blocks. The key decides
// the group's id, which the libraries meet on (MPI_Comm_create_group's tag, Gloo's and NCCL's
// rendezvous prefixes), and MPI_Comm_create_group waits without a bound for members that pass
// another tag. So the members first meet on what they share without the key, the member list and
// how many groups of that list this rank has formed on this communicator, exchange their keys
// through the store (progressing, and agreeing whether to go on: store_wait.hpp) and raise
// MismatchError on every member where they differ. A member missing for `timeout` makes every
// member raise TimeoutError, the late one too, and the count stays equal on all of them.
// `refused`: this member's other arguments failed their checks, and why. It still meets the
// others, with its reason in place of its key, so that every member raises at once and the count
// stays equal (as do_split does).
// Returns the store tag of the meeting, unique to this group's formation.
std::string check_same_key(detail::CommState& s, const std::vector<int>& members,
                           std::string_view key, std::chrono::milliseconds timeout,
                           const std::string& refused) {
  // Not s.check_usable() alone: a communicator aborted by a timeout still forms groups of its
  // members (member_group's contract says why); one abandoned by finalize() does not, as its
  // libraries' resources were aborted (and MPI may be finalized).
  if (s.abandoned) s.check_usable();
  const std::uint64_t n = s.member_groups[members]++;
  const std::string what =
      fmt::format("member_group of ranks [{}] (group #{} of these ranks on communicator {})",
                  fmt::join(members, ", "), n + 1, s.id);
  // The first byte says what follows: 'k' a key, 'r' the reason the member refused its call.
  const std::string payload = refused.empty() ? fmt::format("k{}", key) : "r" + refused;
  const Bytes mine(payload.begin(), payload.end());
  // The list by its hash: a store key per member that grows with the group would cost the store
  // traffic in the square of the group's size.
  const std::string tag =
      fmt::format("mcr/members/{}/{:016x}/{}/{}", s.id,
                  fnv1a(fmt::format("{}", fmt::join(members, ","))), members.size(), n);
  detail::Bootstrap& bootstrap = *detail::runtime().bootstrap;
  auto exchange = [&] {
    return detail::group_all_gather_agreed(bootstrap, world_ranks_of(s, members), tag, mine,
                                           timeout.count() > 0 ? timeout : bootstrap.timeout(),
                                           "member_group", what);
  };
  if (!refused.empty()) meet_then_refuse(exchange, refused);
  const auto keys = exchange();
  const auto text_of = [](const Bytes& b) {
    return b.empty() ? std::string() : std::string(b.begin() + 1, b.end());
  };
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (keys[i].empty() || keys[i][0] != 'r') continue;
    throw InvalidArgument(
        fmt::format("{}: rank {} refused its arguments: {}; no member formed the group, and the "
                    "next member_group of these ranks meets as usual",
                    what, members[i], text_of(keys[i])));
  }
  if (std::all_of(keys.begin(), keys.end(), [&](const Bytes& k) { return k == mine; })) return tag;
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < members.size(); ++i)
    seen.push_back(fmt::format("rank {}: '{}'", members[i], text_of(keys[i])));
  throw MismatchError(fmt::format(
      "{}: the members passed different keys ({}); every member must pass the same key, and the "
      "members must form their groups of the same ranks in the same order",
      what, fmt::join(seen, ", ")));
}

// The backends of a group that its members form alone; a library that cannot is left out (the
// same on every member: the backend list is equal across ranks).
Communicator form_from_members(detail::CommState& s, const std::vector<int>& members,
                               std::uint64_t group_id, const std::string& tag) {
  detail::engine()
      .finish_composed_ops();  // forming may block in a library (docs/design.md, rule 7)
  auto children =
      form_agreed(s, world_ranks_of(s, members), tag, "member_group",
                  fmt::format("member_group of ranks [{}]", fmt::join(members, ", ")),
                  [&](detail::Backend& b) { return b.split_members(members, group_id); });
  if (children.empty()) {
    throw Error(
        fmt::format("member_group: no backend of communicator {} can form a group of its "
                    "members alone",
                    s.id));
  }
  return make_child(s, members, group_id, std::move(children));
}

}  // namespace

Communicator Communicator::member_group(std::span<const int> ranks, std::string_view key,
                                        std::chrono::milliseconds timeout) const {
  auto& s = state();
  check_ranks(s, ranks, "member_group");
  if (std::find(ranks.begin(), ranks.end(), s.rank) == ranks.end()) {
    throw InvalidArgument(fmt::format(
        "member_group: this rank ({}) is not in ranks; only the members of the new group call "
        "member_group()",
        s.rank));
  }
  std::vector<int> members(ranks.begin(), ranks.end());
  // A bad list is refused alone: the members that passed another list do not meet this one.
  // Every other refusal meets the members (check_same_key).
  std::string refused;
  if (timeout.count() < 0) {
    refused =
        fmt::format("member_group: timeout {} ms must be >= 0 (0: the runtime's store timeout)",
                    timeout.count());
    timeout = std::chrono::milliseconds(0);
  }
  timeout = std::min(timeout, detail::kLongestTimeout);
  const std::string tag = check_same_key(s, members, key, timeout, refused);
  // Equal on every member, distinct from split() ids (whose text has no "members"), from other
  // member groups (their keys differ), and from an earlier formation of the same ranks and key (the
  // tag counts them): a libraries' rendezvous keys in the store outlive their group, and a second
  // formation with the same id would read the first one's (Gloo's peers' addresses).
  const std::uint64_t group_id = fnv1a(fmt::format("{}/{}", tag, key)) | 1u;
  return form_from_members(s, members, group_id, tag);
}

Communicator Communicator::split(int color, int key) const {
  if (color < 0 && color != kUndefinedColor) {
    return do_split(state(), kUndefinedColor, key,
                    fmt::format("split: color {} must be >= 0 or kUndefinedColor ({})", color,
                                kUndefinedColor));
  }
  return do_split(state(), color, key);
}

Communicator Communicator::new_group(std::span<const int> ranks) const {
  auto& s = state();
  try {
    check_ranks(s, ranks, "new_group");
  } catch (const InvalidArgument& e) {
    return do_split(s, kUndefinedColor, 0, e.what());
  }
  auto it = std::find(ranks.begin(), ranks.end(), s.rank);
  const bool member = it != ranks.end();
  const std::uint64_t list = fnv1a(fmt::format("{}", fmt::join(ranks, ","))) | 1u;
  return do_split(s, member ? 0 : kUndefinedColor,
                  member ? static_cast<int>(it - ranks.begin()) : 0, {}, list);
}

}  // namespace mcr
