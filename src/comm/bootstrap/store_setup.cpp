// The rendezvous store of init(). Binding rules (docs/reliability.md, "The rendezvous store"):
//   torchrun-style, and srun without PMI: rank 0 listens on the address MASTER_ADDR resolves to
//     (srun: derived from the step, launch.cpp), which must be its own (127.0.0.1 when every
//     rank is local); the token is MCR_STORE_TOKEN, when set.
//   mpirun / srun with PMI: loopback when every rank shares rank 0's host identity; else the
//     interface named by MCR_STORE_HOST; else the address of the default route's interface. Rank 0
//     draws a random token and hands it, with the address, to every rank through the launcher's
//     exchange.
#include "bootstrap/store_setup.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bootstrap/given_store.hpp"
#include "bootstrap/host.hpp"
#include "bootstrap/store_exchange.hpp"
#include "bootstrap/store_socket.hpp"
#include "core/log.hpp"
#include "mcr/errors.hpp"
#include "runtime/runtime.hpp"
#include "runtime/topology.hpp"

namespace mcr::detail {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

std::string random_hex(std::size_t bytes) {
  Bytes buf(bytes);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      store_wire::throw_socket_error("getrandom (the store token)", errno);
    }
    got += static_cast<std::size_t>(n);
  }
  return fmt::format("{:02x}", fmt::join(buf, ""));
}

bool all_equal(const std::vector<Bytes>& v) {
  return std::all_of(v.begin(), v.end(), [&](const Bytes& b) { return b == v.front(); });
}

// The launcher's name for this job, when it gives one (Open MPI/PMIx namespace, Slurm job.step).
std::string launcher_job_id() {
  if (const char* ns = env("PMIX_NAMESPACE")) return fmt::format("pmix:{}", ns);
  if (const char* job = env("SLURM_JOB_ID")) {
    const char* step = env("SLURM_STEP_ID");
    return fmt::format("slurm:{}.{}", job, step != nullptr ? step : "0");
  }
  return {};
}

// MCR_STORE_HOST: an interface name (eth0, ib0), or an address or name of one of this host's
// interfaces. The store binds to it and advertises it.
std::string store_host_address(const std::string& value) {
  if (auto addrs = interface_addresses(value); !addrs.empty()) return addrs.front();
  for (const auto& a : resolve_numeric(value, "MCR_STORE_HOST"))
    if (is_local_address(a)) return a;
  throw InvalidArgument(fmt::format(
      "MCR_STORE_HOST='{}' is neither a network interface of this host nor one of its addresses; "
      "name the interface other hosts reach rank 0 through (e.g. eth0)",
      value));
}

// Whether torchrun's run id can serve as the job's secret: torchrun --standalone draws it with
// uuid.uuid4() (122 random bits) and hands it only to its own workers' environments, which other
// users of the host cannot read. A run id a user chose (--rdzv-id=job42) is not a secret, so only
// the shape of a version-4 UUID counts.
bool is_random_run_id(std::string_view id) {
  if (id.size() != 36) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return id[14] == '4';
}

// torchrun-style: rank 0 must own the address MASTER_ADDR names, or no rank could reach it.
void check_master_addr_is_local(const LaunchInfo& l) {
  const auto addrs = resolve_numeric(l.master_addr, "MASTER_ADDR");
  if (std::any_of(addrs.begin(), addrs.end(), [](const auto& a) { return is_local_address(a); })) {
    return;
  }
  throw InvalidArgument(fmt::format(
      "MASTER_ADDR='{}' resolves to {}, none of which is an address of this host; rank 0 runs the "
      "rendezvous store and listens on MASTER_ADDR, so it must name rank 0's host",
      l.master_addr, fmt::join(addrs, ", ")));
}

struct StoreAddress {
  std::string host;
  int port = 0;
  StoreJob job;
};

StoreAddress torchrun_store(Runtime& rt) {
  const LaunchInfo& l = rt.launch;
  StoreAddress a;
  a.job = torchrun_store_job(l);
  a.job.world_size = l.size;
  // An MPI launcher's world of several with no MPI to form it through (a build without MPI under
  // mpirun, or srun with PMI): nothing says where rank 0 listens. Rank 0 served a store on a port
  // of its own on loopback and waited out its timeout; the others were told "port 0".
  if (l.size > 1 && l.master_addr.empty()) {
    throw InvalidArgument(fmt::format(
        "{} started {} ranks as an MPI job, but this build of mcr has no MPI to form the world "
        "through (MCR_WITH_MPI=OFF): build it with MPI, or start the ranks without an MPI "
        "launcher (torchrun, or RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set per process; "
        "under Slurm, srun --mpi=none)",
        to_string(l.launcher), l.size));
  }
  // A world of one needs nobody to reach it: loopback, on a port of the kernel's choosing. The
  // launch says where rank 0 listens otherwise (torchrun, srun without PMI).
  const bool alone = l.size == 1;
  a.host = alone ? "127.0.0.1" : l.master_addr;
  a.port = alone ? 0 : l.master_port;
  if (l.rank == 0) {
    if (!alone) check_master_addr_is_local(l);
    rt.store_server = std::make_unique<TcpStoreServer>(a.host, a.port, a.job);
    a.port = rt.store_server->port();
  }
  if (!alone && a.job.token.empty() && l.rank == 0) {
    // Said once, by the rank that runs the store: nothing secret identifies this job.
    log_line(fmt::format(
        "warning: the rendezvous store on {}:{} admits any process that reaches it: set "
        "MCR_STORE_TOKEN to the same secret on every rank (torchrun --standalone provides one "
        "itself; docs/reliability.md, \"The rendezvous store\")",
        a.host, a.port));
  }
  return a;
}

// mpirun / srun: rank 0 decides and tells every rank, errors included, through the exchange.
StoreAddress mpi_store(Runtime& rt, Exchange& mpi, bool single_host) {
  const LaunchInfo& l = rt.launch;
  std::string verdict;
  std::exception_ptr failure;
  if (l.rank == 0) {
    try {
      std::string address = "127.0.0.1";
      if (!single_host) {
        address = env("MCR_STORE_HOST") != nullptr ? store_host_address(env("MCR_STORE_HOST"))
                                                   : reachable_address();
      }
      StoreJob job;
      job.token = random_hex(16);
      const std::string launcher_id = launcher_job_id();
      job.job_id = !launcher_id.empty() ? launcher_id : fmt::format("mpi:{}", random_hex(8));
      job.world_size = l.size;
      rt.store_server = std::make_unique<TcpStoreServer>(address, 0, job);
      verdict = fmt::format("ok\n{}\n{}\n{}\n{}", address, rt.store_server->port(), job.token,
                            job.job_id);
    } catch (const InvalidArgument& e) {
      failure = std::current_exception();
      verdict = fmt::format("invalid\n{}", e.what());
    } catch (const std::exception& e) {
      failure = std::current_exception();
      verdict = fmt::format("error\n{}", e.what());
    }
  }
  const auto all = mpi.all_gather(to_bytes(verdict));
  if (failure) std::rethrow_exception(failure);
  const std::string message = from_bytes(all.front());
  std::vector<std::string> parts;
  std::string_view rest = message;
  for (int i = 0; i < 4 && !rest.empty(); ++i) {
    const auto nl = rest.find('\n');
    parts.emplace_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  parts.emplace_back(rest);
  if (parts.front() == "invalid") {
    throw InvalidArgument(fmt::format("rank 0 could not start the rendezvous store: {}", parts[1]));
  }
  if (parts.front() != "ok" || parts.size() != 5) {
    throw BackendError(fmt::format("rank 0 could not start the rendezvous store: {}",
                                   parts.size() > 1 ? parts[1] : message));
  }
  StoreAddress a;
  a.host = parts[1];
  a.port = std::stoi(parts[2]);
  a.job.token = parts[3];
  a.job.job_id = parts[4];
  a.job.world_size = l.size;
  return a;
}

// What both ways of setting up share: the host identities (gathered through MPI already, or now
// through the store's exchange, the first world exchange of the job), then the Bootstrap.
void form_bootstrap(Runtime& rt, const std::string& me, std::vector<Bytes> identities,
                    std::unique_ptr<Exchange> exchange, std::unique_ptr<Store> store,
                    std::chrono::milliseconds timeout) {
  if (identities.empty()) {
    identities =
        rt.launch.size > 1 ? exchange->all_gather(to_bytes(me)) : std::vector<Bytes>{to_bytes(me)};
  }
  const bool single_host = all_equal(identities);
  std::vector<std::string> names;
  for (const auto& b : identities)
    names.push_back(from_bytes(b));
  rt.launch.host_id = me;
  rt.launch.single_host = single_host;
  rt.launch.host_of_rank = host_indices(names);
  rt.bootstrap =
      std::make_unique<Bootstrap>(rt.launch, std::move(exchange), std::move(store), timeout);
}

}  // namespace

StoreJob torchrun_store_job(const LaunchInfo& l) {
  StoreJob job;
  job.token = env("MCR_STORE_TOKEN") != nullptr ? env("MCR_STORE_TOKEN") : "";
  const char* run_id = env("TORCHELASTIC_RUN_ID");
  const bool secret_run_id = job.token.empty() && l.launcher != Launcher::slurm &&
                             run_id != nullptr && is_random_run_id(run_id);
  if (secret_run_id) job.token = fmt::format("torchelastic-run:{}", run_id);
  // The job id travels in clear in refusals and logs: never the run id that serves as the secret.
  if (l.launcher == Launcher::slurm) {
    job.job_id = launcher_job_id();
  } else if (secret_run_id) {
    job.job_id = "torchrun";
  } else {
    job.job_id = fmt::format("torchrun:{}", run_id != nullptr ? run_id : "default");
  }
  job.world_size = l.size;
  return job;
}

void start_store(Runtime& rt, std::unique_ptr<Exchange> mpi, std::chrono::milliseconds timeout) {
  const std::string me = host_identity();
  std::vector<Bytes> identities;
  bool single_host = rt.launch.size == 1;
  if (mpi != nullptr) {
    identities = mpi->all_gather(to_bytes(me));
    single_host = all_equal(identities);
  }

  const StoreAddress a = mpi != nullptr ? mpi_store(rt, *mpi, single_host) : torchrun_store(rt);
  if (rt.store_server) {
    rt.store_server->set_goodbye_grace(std::min(timeout, std::chrono::milliseconds(2000)));
  }
  auto store = connect_tcp_store(a.host, a.port, timeout, a.job, rt.launch.rank);
  rt.rendezvous = store->description();
  rt.world_exchange = mpi != nullptr ? "mpi" : "store";
  rt.store_host = a.host;
  std::unique_ptr<Exchange> exchange =
      mpi ? std::move(mpi) : make_store_exchange(*store, rt.launch.rank, rt.launch.size, timeout);
  form_bootstrap(rt, me, std::move(identities), std::move(exchange), std::move(store), timeout);
}

void use_given_store(Runtime& rt, std::shared_ptr<KeyValueStore> given,
                     std::unique_ptr<Exchange> mpi, std::chrono::milliseconds timeout) {
  const std::string me = host_identity();
  std::vector<Bytes> identities;
  if (mpi != nullptr) identities = mpi->all_gather(to_bytes(me));
  std::unique_ptr<Store> store = adopt_given_store(std::move(given), rt.launch.rank);
  rt.store_given = true;
  rt.rendezvous = store->description();
  rt.world_exchange = mpi != nullptr ? "mpi" : "store";
  rt.store_host.clear();
  std::unique_ptr<Exchange> exchange =
      mpi ? std::move(mpi) : make_store_exchange(*store, rt.launch.rank, rt.launch.size, timeout);
  form_bootstrap(rt, me, std::move(identities), std::move(exchange), std::move(store), timeout);
}

}  // namespace mcr::detail
