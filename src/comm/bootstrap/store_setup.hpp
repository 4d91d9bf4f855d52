// Brings up the rendezvous store of init(): where rank 0's server binds, what it advertises, the
// job's token and id, and the host identities of all ranks (docs/reliability.md, "The rendezvous
// store").
#pragma once

#include <chrono>
#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/tcp_store.hpp"

namespace mcr::detail {

struct Runtime;

/// Starts the store server on world rank 0 and connects every rank to it; fills rt.store_server
/// (rank 0), rt.bootstrap, and rt.launch's host_id and single_host. `mpi` is the launcher's world
/// exchange (mpirun, srun) or nullptr (torchrun-style: MASTER_ADDR/MASTER_PORT). Collective; a
/// configuration error found on rank 0 reaches every rank as the same InvalidArgument or
/// BackendError, never as a hang.
void start_store(Runtime& rt, std::unique_ptr<Exchange> mpi, std::chrono::milliseconds timeout);

/// Who may use the store of a torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
/// srun without PMI): the token is MCR_STORE_TOKEN when set; else torchrun's run id when it is a
/// random one (torchrun --standalone's uuid4); else none, and any process that reaches the port
/// may join. The job id never carries the secret.
StoreJob torchrun_store_job(const LaunchInfo& launch);

/// Forms the world through a store the application handed to init() instead: starts no server and
/// connects nowhere. Fills rt.bootstrap and rt.launch's host fields like start_store(); the world
/// exchange is `mpi` when MPI formed the world, else goes through `given`. Collective.
void use_given_store(Runtime& rt, std::shared_ptr<KeyValueStore> given,
                     std::unique_ptr<Exchange> mpi, std::chrono::milliseconds timeout);

}  // namespace mcr::detail
