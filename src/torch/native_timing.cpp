// Times an operation issued from C++ on the communication thread (native_timing.hpp).
#include "native_timing.hpp"

#include <chrono>
#include <functional>

#include <c10/util/Exception.h>

#include "comm_thread.hpp"
#include "tensors.hpp"

namespace mcr::torch_ext {

double time_native(const ProcessGroupMCR& pg, const std::string& op, const at::Tensor& input,
                   const at::Tensor& output, int iters, int warmup, const std::string& backend) {
  TORCH_CHECK(iters > 0, "mcr time_native: iters must be positive, got ", iters);
  TORCH_CHECK(warmup >= 0, "mcr time_native: warmup must not be negative, got ", warmup);
  TORCH_CHECK(input.is_contiguous() && output.is_contiguous(),
              "mcr time_native: input and output must be contiguous");
  checked_dtype(input, "time_native");
  const mcr::Tensor in = view(input);
  const mcr::Tensor out = view(output);
  // The asynchronous form, as the communication thread issues every operation, waited for here:
  // the difference to the Python figure is then the binding's own cost, not MPI's choice of
  // algorithm (its nonblocking collectives use other ones than its blocking calls).
  std::function<void(mcr::Communicator&, const mcr::CallOptions&)> call;
  if (op == "all_reduce") {
    call = [in](mcr::Communicator& c, const mcr::CallOptions& o) {
      c.iall_reduce(in, mcr::ReduceOp::sum, o).wait();
    };
  } else if (op == "all_gather") {
    call = [in, out](mcr::Communicator& c, const mcr::CallOptions& o) {
      c.iall_gather(in, out, o).wait();
    };
  } else if (op == "all_to_all") {
    call = [in, out](mcr::Communicator& c, const mcr::CallOptions& o) {
      c.iall_to_all(in, out, o).wait();
    };
  } else {
    TORCH_CHECK(false, "mcr time_native: op must be all_reduce, all_gather or all_to_all, got '",
                op, "'");
  }
  mcr::CallOptions options;
  options.backend = backend;
  options.timeout = pg.timeout();
  return CommThread::instance().call([&] {
    mcr::Communicator comm = pg.communicator();
    for (int i = 0; i < warmup; ++i)
      call(comm, options);
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      call(comm, options);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / iters;
  });
}

}  // namespace mcr::torch_ext
