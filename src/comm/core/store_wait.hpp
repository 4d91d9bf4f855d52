// Waiting on the store while forming a group, without withholding progress from peers.
//
// A group is formed while this process may have operations in flight that advance only while it
// polls their library (MPI without a progress thread: a nonblocking collective whose peers wait
// for this process's part). A peer may be waiting for one of them before it reaches the formation
// itself, so a rank that blocked on the store for that peer's key would wait forever: the peer
// waits for its operation, the operation for this rank's progress, this rank for the peer's key.
// The waits of group formation (split's color exchange, Gloo's rendezvous, a new communicator's
// configuration check) therefore go through get_progressing.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace mcr::detail {

/// store.get(key, timeout), except that while operations that need this process's host progress
/// are in flight it polls the store, progressing them in between, and blocks on the store only
/// once none is left. Throws TimeoutError naming the key when it does not appear within `timeout`.
/// From the thread that holds the right to call mcr.
Bytes get_progressing(Store& store, const std::string& key, std::chrono::milliseconds timeout);

/// All-gather among `members` (world ranks, every one of them calls it with the same members and
/// tag) through the store, without involving non-members: the values in the order of members. Every
/// wait goes through get_progressing. It is made for exchanges after which the members go on into a
/// step that waits for all of them without a bound (a library forming the group:
/// MPI_Comm_create_group, MPI_Comm_split). The members agree through the store whether they go on,
/// so it returns on every member or on none: a member that waited `timeout` for the others gives
/// up, and it and every other member, including those that arrive after it gave up, throw
/// TimeoutError(op) naming `what`, the member that gave up, its wait and the members that had not
/// arrived. Without the agreement a member arriving late would find the others' values, go on into
/// the library and wait there forever for members that had left. The first member, once it has read
/// every value, and any member that gave up race for the decision; the store's atomic add picks
/// one. The first member puts the values in its decision, so each of the others reads one key: 3
/// store requests per member and n for the first, instead of n per member.
std::vector<Bytes> group_all_gather_agreed(Bootstrap& bootstrap, const std::vector<int>& members,
                                           const std::string& tag, const Bytes& mine,
                                           std::chrono::milliseconds timeout, std::string_view op,
                                           std::string_view what);

/// Whether a step that each of `members` took (a library forming a group) succeeded on all of them:
/// `failure` is this member's error, empty where the step succeeded. Made for steps followed by
/// one that waits for every member without a bound: either all members go on or none does. A
/// member that failed decides at once that all stop, so that nobody waits for a member still inside
/// the step (a library's rendezvous can take several timeouts to fail after a peer failed); the
/// last member to arrive decides that all go on where none failed. Returns "" when they go on,
/// else why they stop ("world rank R: <its failure>", the failure that decided), on every member.
/// Throws TimeoutError, on every member, when one waited `timeout` for the decision.
std::string group_agree_succeeded(Bootstrap& bootstrap, const std::vector<int>& members,
                                  const std::string& tag, const std::string& failure,
                                  std::chrono::milliseconds timeout, std::string_view op,
                                  std::string_view what);

/// The decision that the members go on, as group_all_gather_agreed stores it: every member's value
/// in the members' order (store_wire's little-endian, length-prefixed encoding).
Bytes encode_agreed_go(const std::vector<Bytes>& values);
/// The values of a decision to go on among `members` members. Throws MismatchError naming `tag`
/// when the bytes are not exactly such a decision (truncated, another count, bytes left over).
std::vector<Bytes> decode_agreed_go(const Bytes& outcome, std::size_t members,
                                    const std::string& tag);

}  // namespace mcr::detail
