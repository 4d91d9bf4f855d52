#include "backends/gloo/gloo_check.hpp"

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include "core/library_error.hpp"
#include "mcr/errors.hpp"
#include "runtime/launch_hooks.hpp"

namespace mcr::detail {
namespace {

// Gloo reports an expired wait, and the pair closure it causes on other operations of the same
// context, only through the text of an IoException.
bool is_timeout_message(std::string_view what) {
  return what.find("Timed out") != std::string_view::npos ||
         what.find("timed out") != std::string_view::npos ||
         what.find("Application timeout") != std::string_view::npos;
}

std::atomic<int> g_guard_rank{-1};

std::mutex& peers_mutex() {
  static auto& m = *new std::mutex;
  return m;
}
std::vector<std::string>& peer_addresses() {
  static auto& v = *new std::vector<std::string>;
  return v;
}
std::terminate_handler g_previous_terminate = nullptr;

// gloo's TCP pair checks that an incoming message fits the buffer the operation posted; the check
// fails on gloo's I/O thread, where nothing catches it.
constexpr std::string_view kSizeCheck = "op.preamble.length <= op.nbytes";

[[noreturn]] void on_terminate() noexcept {
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const gloo::EnforceNotMet& x) {
      // Our calls into gloo convert every exception (MCR_GLOO_CHECK), so an uncaught gloo
      // exception comes from a thread gloo owns: its I/O loop.
      const std::string_view what = x.what();
      const bool size = what.find(kSizeCheck) != std::string_view::npos;
      std::fprintf(
          stderr,
          "mcr: BackendError: gloo's I/O thread failed on rank %d: %s\nmcr: %s gloo cannot "
          "continue after an error on its I/O thread, so the job is ended. Cross-rank "
          "verification makes every rank raise MismatchError naming the operation, the field "
          "and the ranks before such an operation starts: by default for the first call of each "
          "signature; MCR_VERIFY=1 checks every call (this one was not checked: MCR_VERIFY=0, "
          "or a signature already verified).\n",
          g_guard_rank.load(), x.what(),
          size ? "A peer sent a larger message than this rank's operation expects: the ranks "
                 "called a Gloo operation with different counts or dtypes (or different "
                 "operations)."
               : "");
      std::fflush(stderr);
      abort_job(134);  // 128 + SIGABRT, what gloo's own end would have been
    } catch (...) {    // NOLINT(bugprone-empty-catch): not gloo's; the previous handler decides
    }
  }
  if (g_previous_terminate != nullptr) g_previous_terminate();
  std::abort();
}

// A peer process that exits or is killed closes its sockets: gloo's pairs read EOF or a reset.
bool is_peer_loss_message(std::string_view what) {
  return what.find("Connection closed by peer") != std::string_view::npos ||
         what.find("Connection reset by peer") != std::string_view::npos;
}

}  // namespace

void install_gloo_io_guard(int rank) {
  g_guard_rank.store(rank);
  static const bool installed = [] {
    g_previous_terminate = std::set_terminate(&on_terminate);
    return true;
  }();
  (void)installed;
}

void set_gloo_peer_addresses(std::vector<std::string> by_world_rank) {
  std::lock_guard lock(peers_mutex());
  peer_addresses() = std::move(by_world_rank);
}

int gloo_peer_rank_in(std::string_view what) {
  std::lock_guard lock(peers_mutex());
  const auto& all = peer_addresses();
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::string& a = all[r];
    // The address must end there: "[127.0.0.1]:4000" is not "[127.0.0.1]:40001".
    for (auto at = what.find(a); at != std::string_view::npos; at = what.find(a, at + 1)) {
      const auto end = at + a.size();
      if (end == what.size() || what[end] < '0' || what[end] > '9') return static_cast<int>(r);
    }
  }
  return -1;
}

void rethrow_gloo_error(std::string_view call, const char* file, int line,
                        const GlooCallSite& site) {
  const std::string op = fmt::format("{} #{}", site.op, site.sequence);
  auto describe = [&](std::string_view name, std::string_view what, std::string_view more = {}) {
    return format_call_error(fmt::format("gloo: {}", call), file, line, {site.rank, op}, name, what,
                             more);
  };
  constexpr std::string_view kIo = "gloo::IoException";
  try {
    throw;
  } catch (const Error&) {
    throw;  // already ours (e.g. the store timed out during rendezvous)
  } catch (const gloo::IoException& e) {
    if (is_timeout_message(e.what())) {
      throw TimeoutError(describe(kIo, e.what()), std::string(site.op), site.sequence, "gloo");
    }
    if (is_peer_loss_message(e.what())) {
      const int peer = gloo_peer_rank_in(e.what());
      throw BackendError(describe(
          kIo, e.what(),
          fmt::format("{} closed its connection: it exited or was killed, gave up after "
                      "an error of its own (a timeout, or a peer it lost), or destroyed "
                      "the communicator early",
                      peer >= 0 ? fmt::format("world rank {}", peer) : std::string("a peer"))));
    }
    throw BackendError(describe(kIo, e.what()));
  } catch (const gloo::Exception& e) {
    throw BackendError(describe("gloo::Exception", e.what()));
  } catch (const std::exception& e) {
    throw BackendError(describe("std::exception", e.what()));
  } catch (...) {
    throw BackendError(describe("unknown exception", "not derived from std::exception"));
  }
}

}  // namespace mcr::detail
