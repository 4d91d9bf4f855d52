// torch's c10d store as mcr's rendezvous (InitOptions::store): when init_process_group("mcr")
// brings the runtime up, the world is formed once, through the store torch already built.
#pragma once

#include <memory>

#include <c10/util/intrusive_ptr.h>

#include <mcr/comm/store.hpp>

namespace c10d {
class Store;
}

namespace mcr::torch_ext {

/// `store` (not null) as an mcr::KeyValueStore described as "torch store". c10d stores are safe to
/// use from several threads, as mcr requires; mcr calls it from the communication thread and its
/// watchdog thread. Failures of the store surface as mcr::BackendError naming the request and key.
std::shared_ptr<mcr::KeyValueStore> wrap_c10d_store(c10::intrusive_ptr<c10d::Store> store);

}  // namespace mcr::torch_ext
