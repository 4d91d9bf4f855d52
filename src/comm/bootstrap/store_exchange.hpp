// World all-gather through the key-value store, for runs without MPI (torchrun-style launches).
#pragma once

#include <chrono>
#include <memory>

#include "bootstrap/bootstrap.hpp"

namespace mcr::detail {

/// An Exchange among the `size` ranks of the world that talks only through `store`. Every rank
/// must call all_gather the same number of times, in the same order; call k of every rank uses
/// the keys "mcr/exchange/<k>/<rank>". Each wait for a peer's value gives up after `timeout`
/// (TimeoutError naming the key): the job's configured timeout, never a default. `store` must
/// outlive the exchange.
std::unique_ptr<Exchange> make_store_exchange(Store& store, int rank, int size,
                                              std::chrono::milliseconds timeout);

}  // namespace mcr::detail
