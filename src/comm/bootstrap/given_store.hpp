// A store handed to init() (InitOptions::store) as the runtime's Store. Every key mcr uses goes
// under "mcr/", so that mcr's keys never meet the application's own (torch keeps its rendezvous
// and its groups' keys in the same store), and under a generation: a store outlives init(), and a
// second init() over it (after finalize()) must not read the first one's values. Rank r's k-th
// init() on a store uses "mcr/<k>/..."; since init() is collective, k agrees on every rank.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"

namespace mcr::detail {

/// Wraps `store` (not null) for the runtime as world rank `rank`; the result shares ownership of
/// it. Counts this rank's init() calls on the store ("mcr/generation/<rank>"): one store request.
std::unique_ptr<Store> adopt_given_store(std::shared_ptr<KeyValueStore> store, int rank);

}  // namespace mcr::detail
