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
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace mcr::detail {

/// store.get(key, timeout), except that while operations that need this process's host progress
/// are in flight it polls the store, progressing them in between, and blocks on the store only
/// once none is left. Throws TimeoutError naming the key when it does not appear within `timeout`.
/// From the thread that holds the right to call mcr.
Bytes get_progressing(Store& store, const std::string& key, std::chrono::milliseconds timeout);

/// All-gather among `members` (world ranks, every one of them calls it with the same members and
/// tag) through the store, without involving non-members: the values in the order of members.
/// Every wait goes through get_progressing.
std::vector<Bytes> group_all_gather_progressing(Bootstrap& bootstrap,
                                                const std::vector<int>& members,
                                                const std::string& tag, const Bytes& mine);

}  // namespace mcr::detail
