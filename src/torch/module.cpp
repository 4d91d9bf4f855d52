// The Python extension mcr.torch._mcr_torch: runtime bring-up on the communication thread,
// communicator handles, the ProcessGroupMCR class, explain() and the backend override switch.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <mcr/comm.hpp>
#include <mcr/comm/info.hpp>
#include <mcr/comm/launch.hpp>
#include <mcr/comm/selection.hpp>

#include "c10d_store.hpp"
#include "comm_thread.hpp"
#include "device_order.hpp"
#include "native_timing.hpp"
#include "process_group.hpp"

namespace py = pybind11;

namespace mcr::torch_ext {
namespace {

/// A communicator as Python holds it: opaque, only ever used on the communication thread.
struct CommHandle {
  std::shared_ptr<mcr::Communicator> comm;
  int rank = -1;
  int size = 0;
  std::vector<int> global_ranks;
  int local_ranks = 0;  // the world's ranks on this host (0: hosts hold different numbers)
};

std::optional<mcr::Communicator>& world_slot() {  // communication thread only
  static std::optional<mcr::Communicator> w;
  return w;
}

// Python may drop the last reference on any thread; the communicator's state is destroyed by the
// thread that holds the right to call mcr, on the communication thread (or leaked once the runtime
// has shut down).
void release(mcr::Communicator* c) {
  CommThread& t = CommThread::instance();
  if (t.holds_right_to_call()) {
    delete c;
  } else {
    t.post_task([c] { delete c; });  // dropped (leaked) once the runtime has shut down
  }
}

CommHandle describe(mcr::Communicator c) {  // on the communication thread
  CommHandle h{std::shared_ptr<mcr::Communicator>(new mcr::Communicator(std::move(c)), release),
               -1,
               0,
               {},
               world_slot() ? world_slot()->ranks_per_host() : 0};
  if (h.comm->valid()) {
    h.rank = h.comm->rank();
    h.size = h.comm->size();
    for (int r = 0; r < h.size; ++r)
      h.global_ranks.push_back(h.comm->global_rank(r));
  }
  return h;
}

// MCR_TORCH_INLINE: 1 (default) lets a posting thread issue an operation itself while the
// communication thread is idle (comm_thread.hpp); 0 hands every operation to that thread.
bool caller_issue_requested() {
  const char* v = std::getenv("MCR_TORCH_INLINE");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "1") return true;
  if (std::string_view(v) == "0") return false;
  throw mcr::InvalidArgument(std::string("MCR_TORCH_INLINE='") + v +
                             "' must be 1 (issue on the calling thread while the communication "
                             "thread is idle, the default) or 0 (always hand over)");
}

// MCR_TORCH_CALLER_POLL_BYTES: the largest asynchronous operation (bytes of its outputs) that a
// posting thread which issued it itself polls before handing it over (caller_poll_for()).
std::size_t caller_poll_max_bytes_requested() {
  const char* v = std::getenv("MCR_TORCH_CALLER_POLL_BYTES");
  if (v == nullptr || *v == '\0') return kDefaultCallerPollMaxBytes;
  try {
    return mcr::parse_size(v);
  } catch (const mcr::InvalidArgument& e) {
    throw mcr::InvalidArgument(std::string("MCR_TORCH_CALLER_POLL_BYTES='") + v + "': " + e.what());
  }
}

// The runtime's timeout for a world formed under torch's `timeout` (init_process_group's or the
// first mcr group's): that group's own (group_timeout), as torch's backends wait it to form their
// groups, within the longest InitOptions::timeout takes (one week); a malformed MCR_TIMEOUT raises
// here as init() would. 0 (no timeout given) leaves the runtime to MCR_TIMEOUT or its default.
std::chrono::milliseconds world_timeout(std::chrono::milliseconds timeout) {
  constexpr std::chrono::milliseconds kInitLongest = std::chrono::hours(24 * 7);
  if (timeout.count() <= 0) return std::chrono::milliseconds{0};
  return std::min(group_timeout(timeout), kInitLongest);
}

// mcr::init(options), on the communication thread. A failed init leaves the runtime unformed, and
// init raises until finalize. With torch's store and no MPI launcher (torchrun), that finalize
// happens here, so that init_process_group may be tried again as with torch's own backends (all
// ranks try again: each attempt meets its peers' under a new store generation). Under an MPI
// launcher the world cannot be formed twice (MPI initialises once per process): a later attempt
// says so and why the first failed.
std::optional<mcr::Communicator> init_once_more_allowed(const mcr::InitOptions& options) {
  static std::string failed_under_launcher;  // the first failure's message, under MPI
  if (!failed_under_launcher.empty()) {
    throw mcr::Error(
        "mcr: forming the world failed earlier in this process, under an MPI launcher, where it "
        "cannot be formed again (MPI initialises once per process): start the job again. The "
        "failure: " +
        failed_under_launcher);
  }
  try {
    return mcr::init(options);
  } catch (const std::exception& e) {
    bool under_mpi = false;
    try {
      under_mpi = mcr::launch_info(true).mpi_world;  // true: MASTER_ADDR/PORT not required
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): a malformed launch, which
    }                                  // init's own error (raised below) names
    if (under_mpi) {
      failed_under_launcher = e.what();
    } else if (options.store) {
      // init's error is the one to raise; with no world, nothing was in flight for finalize to
      // report.
      try {
        mcr::finalize();
      } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): see above
      }
    }
    throw;
  }
}

// Brings the runtime up. With `store` (a c10d store, not None), the world is formed through it as
// rank `rank` of `size` (InitOptions::store): the path of init_process_group("mcr") without an MPI
// launcher, so that torch's store is the job's only rendezvous. `timeout`: torch's for the group
// being created (world_timeout()).
CommHandle init_runtime(const py::object& store, int rank, int size,
                        std::chrono::milliseconds timeout) {
  mcr::InitOptions options;
  options.timeout = world_timeout(timeout);
  if (!store.is_none()) {
    options.store = wrap_c10d_store(store.cast<c10::intrusive_ptr<c10d::Store>>());
    options.rank = rank;
    options.size = size;
  }
  py::gil_scoped_release no_gil;
  const std::thread::id caller = std::this_thread::get_id();
  return CommThread::instance().call([&options, caller] {
    if (!world_slot()) {
      const bool inline_wanted = caller_issue_requested();
      const std::size_t poll_bytes = caller_poll_max_bytes_requested();
      world_slot() = init_once_more_allowed(options);
      CommThread::instance().set_inline_waiter(caller);
      CommThread::instance().set_caller_issue(inline_wanted && mcr::any_thread_may_call());
      CommThread::instance().set_reliefs_allowed(mcr::any_thread_may_call());
      CommThread::instance().set_caller_poll_max_bytes(poll_bytes);
    }
    return describe(*world_slot());
  });
}

// How the runtime formed its world: {"rendezvous": "torch store" | "tcp store", "world_exchange":
// "mpi" | "store", "store_host": rank 0's TCP store address or ""} (mcr::RuntimeInfo).
py::dict rendezvous() {
  mcr::RuntimeInfo info;
  {
    py::gil_scoped_release no_gil;
    info = CommThread::instance().call([] {
      if (!world_slot()) throw mcr::Error("mcr runtime is not initialised");
      return mcr::runtime_info();
    });
  }
  py::dict out;
  out["rendezvous"] = info.rendezvous;
  out["world_exchange"] = info.world_exchange;
  out["store_host"] = info.store_host;
  return out;
}

// The launcher's placement of this process (mcr::launch_info), read from the environment the
// same way init() reads it: {"launcher", "rank", "size", "local_rank", "local_size",
// "master_addr", "master_port", "mpi_world"}. Needs no runtime.
py::dict launch_info(bool store_given) {
  const mcr::LaunchInfo l = mcr::launch_info(store_given);
  py::dict out;
  out["launcher"] = std::string(mcr::to_string(l.launcher));
  out["rank"] = l.rank;
  out["size"] = l.size;
  out["local_rank"] = l.local_rank;
  out["local_size"] = l.local_size;
  out["master_addr"] = l.master_addr;
  out["master_port"] = l.master_port;
  out["mpi_world"] = l.mpi_world;
  return out;
}

CommHandle world() {
  py::gil_scoped_release no_gil;
  return CommThread::instance().call([] {
    if (!world_slot())
      throw mcr::Error("mcr runtime is not initialised (mcr.torch.init_processes)");
    return describe(*world_slot());
  });
}

// Collective over the members of the new group only: torch calls a backend's creator on the
// members alone (and DeviceMesh, or new_group(use_local_synchronization=True), only on them), so
// the group is formed by its members (Communicator::member_group). `key` tells the groups formed
// from one parent apart (_backend.py derives it from the ranks). A member that does not come within
// the group's timeout (torch's, capped by MCR_TIMEOUT as for its operations) makes every member
// raise, as torch's own backends' rendezvous does within that timeout.
CommHandle member_group(const CommHandle& parent, std::vector<int> ranks, const std::string& key,
                        std::chrono::milliseconds timeout) {
  py::gil_scoped_release no_gil;
  return CommThread::instance().call(
      [&] { return describe(parent.comm->member_group(ranks, key, group_timeout(timeout))); });
}

// Rank 0's string on every rank of `h` (used to agree on a rendezvous address under mpirun).
std::string broadcast_string(const CommHandle& h, const std::string& s) {
  py::gil_scoped_release no_gil;
  return CommThread::instance().call([&] {
    std::vector<char> buf(1024, '\0');
    if (h.rank == 0)
      std::copy_n(s.begin(), std::min<std::size_t>(s.size(), buf.size() - 1), buf.begin());
    mcr::Communicator c = *h.comm;
    c.broadcast(mcr::Tensor(buf.data(), buf.size(), mcr::DType::u8), 0);
    return std::string(buf.data());
  });
}

py::dict explain(const ProcessGroupMCR& pg, const std::string& op, const std::string& dtype,
                 std::size_t bytes, const std::string& reduce, const std::string& device) {
  auto o = mcr::parse_op(op);
  if (!o) throw mcr::InvalidArgument("explain: unknown operation '" + op + "'");
  auto d = mcr::parse_dtype(dtype);
  if (!d) throw mcr::InvalidArgument("explain: unknown dtype '" + dtype + "'");
  auto r = mcr::parse_reduce_op(reduce);
  if (!r) throw mcr::InvalidArgument("explain: unknown reduce op '" + reduce + "'");
  if (device != "cpu" && device != "cuda") {
    throw mcr::InvalidArgument("explain: device '" + device + "' is not 'cpu' or 'cuda'");
  }
  // Explained as the operation would be issued: on the tensor's device kind, in its i* form (the
  // backend issues every op so, on the communication thread), with the backend that
  // mcr.torch.backend() forces, if any.
  const mcr::Device on = device == "cuda" ? mcr::Device::cuda(0) : mcr::Device::cpu();
  const std::string forced = ProcessGroupMCR::backend_override();
  mcr::Selection sel;
  {
    py::gil_scoped_release no_gil;
    sel = CommThread::instance().call([&] {
      return pg.communicator().explain(*o, *d, bytes, *r, on, mcr::CallForm::async, forced);
    });
  }
  py::dict out;
  out["backend"] = sel.backend;
  out["source"] = sel.source;
  py::list steps;
  for (const auto& s : sel.steps)
    steps.append(py::make_tuple(s.backend, s.chosen, s.reason));
  out["steps"] = steps;
  py::list composed;  // hier: each step's level, op, size, library and why
  for (const auto& c : sel.composed) {
    py::dict step;
    step["level"] = c.within_host ? "within hosts" : "between hosts";
    step["op"] = std::string(mcr::to_string(c.op));
    step["bytes"] = c.bytes;
    step["times"] = c.times;
    step["backend"] = c.backend;
    step["source"] = c.source;
    step["reason"] = c.reason;
    composed.append(step);
  }
  out["composed_steps"] = composed;
  return out;
}

void shutdown_runtime(bool abandon) {
  py::gil_scoped_release no_gil;
  CommThread::instance().shutdown(
      [] {
        world_slot().reset();
        mcr::finalize();
      },
      abandon);
}

}  // namespace
}  // namespace mcr::torch_ext

PYBIND11_MODULE(_mcr_torch, m) {
  using namespace mcr::torch_ext;
  m.doc() = "mcr's c10d backend (ProcessGroupMCR) and runtime helpers; use the mcr.torch package";

  // mcr's exceptions reach Python as RuntimeError subclasses with the runtime's message. The
  // translators run latest-registered first, so TimeoutError is matched before its base.
  auto& error = py::register_exception<mcr::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<mcr::TimeoutError>(m, "TimeoutError", error.ptr());

  py::class_<CommHandle>(m, "Communicator")
      .def_property_readonly("valid", [](const CommHandle& h) { return h.comm->valid(); })
      .def_readonly("rank", &CommHandle::rank)
      .def_readonly("size", &CommHandle::size)
      .def_readonly("global_ranks", &CommHandle::global_ranks);

  m.def("init_runtime", &init_runtime, py::arg("store") = py::none(), py::arg("rank") = -1,
        py::arg("size") = 0, py::arg("timeout") = std::chrono::milliseconds{0});
  m.def("rendezvous", &rendezvous);
  m.def("launch_info", &launch_info, py::arg("store_given") = false);
  m.def("comm_thread_counts", [] {
    const auto c = CommThread::instance().counts();
    py::dict d;
    d["posted"] = c.posted;
    d["issued_by_caller"] = c.issued_by_caller;
    d["completed_by_caller"] = c.completed_by_caller;
    d["driven_by_waiter"] = c.driven_by_waiter;
    d["relieved"] = c.relieved;
    d["waited_in_library"] = c.waited_in_library;
    return d;
  });
  // How long a poster polls an asynchronous operation of `nbytes` it issued itself, in µs, on a
  // host with a core to spare (`spin`) or not: the rule of caller_poll_for() with this process's
  // MCR_TORCH_CALLER_POLL_BYTES.
  m.def("caller_poll_us", [](bool spin, std::size_t nbytes) {
    return caller_poll_for(spin, nbytes, CommThread::instance().caller_poll_max_bytes()).count();
  });
  m.def("is_initialized", [] {
    // Asked of the communication thread, which owns the runtime; false once it has shut down.
    py::gil_scoped_release no_gil;
    try {
      return CommThread::instance().call([] { return world_slot().has_value(); });
    } catch (const mcr::Error&) {
      return false;
    }
  });
  m.def("world", &world);
  m.def("cuda_tensors_supported", &cuda_tensors_supported);
  m.def("member_group", &member_group, py::arg("parent"), py::arg("ranks"), py::arg("key"),
        py::arg("timeout") = std::chrono::milliseconds{0});
  m.def("broadcast_string", &broadcast_string);
  m.def("explain", &explain, py::arg("group"), py::arg("op"), py::arg("dtype"), py::arg("bytes"),
        py::arg("reduce") = "sum", py::arg("device") = "cpu");
  m.def("shutdown", &shutdown_runtime, py::arg("abandon") = false);
  m.def("exiting_on_error", [](const std::string& reason) { mcr::exiting_on_error(reason); });
  m.def(
      "time_native",
      [](const ProcessGroupMCR& pg, const std::string& op, const at::Tensor& input,
         const at::Tensor& output, int iters, int warmup, const std::string& backend) {
        py::gil_scoped_release no_gil;
        return time_native(pg, op, input, output, iters, warmup, backend);
      },
      py::arg("group"), py::arg("op"), py::arg("input"), py::arg("output"), py::arg("iters"),
      py::arg("warmup") = 0, py::arg("backend") = "");
  m.def("set_backend_override", &ProcessGroupMCR::set_backend_override);
  m.def("backend_override", &ProcessGroupMCR::backend_override);

  py::class_<ProcessGroupMCR, c10d::Backend, c10::intrusive_ptr<ProcessGroupMCR>>(m,
                                                                                  "ProcessGroupMCR")
      .def(py::init([](const CommHandle& h, int rank, int size, std::chrono::milliseconds timeout) {
             TORCH_CHECK(h.comm->valid(), "mcr: this rank is not a member of the communicator");
             TORCH_CHECK(h.rank == rank && h.size == size, "mcr: torch sees rank ", rank, " of ",
                         size, ", the mcr communicator rank ", h.rank, " of ", h.size);
             return c10::make_intrusive<ProcessGroupMCR>(*h.comm, rank, size, timeout,
                                                         h.local_ranks);
           }),
           py::arg("comm"), py::arg("rank"), py::arg("size"), py::arg("timeout"))
      .def_property_readonly("timeout", &ProcessGroupMCR::timeout)
      // split_group deep-copies the parent backend's `options` when given none; torch 2.11 binds
      // them for its own backends only (on this one: AttributeError).
      .def_property_readonly("options", [](ProcessGroupMCR& pg) {
        return c10::static_intrusive_pointer_cast<OptionsMCR>(pg.getBackendOptions());
      });

  py::class_<OptionsMCR, c10d::Backend::Options, c10::intrusive_ptr<OptionsMCR>>(m, "Options")
      .def("__copy__", [](const OptionsMCR& o) { return c10::make_intrusive<OptionsMCR>(o); })
      .def("__deepcopy__", [](const OptionsMCR& o, const py::dict& /*memo*/) {
        return c10::make_intrusive<OptionsMCR>(o);
      });
}
