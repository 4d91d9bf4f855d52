#include "backends/gloo/gloo_check.hpp"

#include <exception>
#include <string>

#include <fmt/format.h>
#include <gloo/common/error.h>

#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Gloo reports an expired wait, and the pair closure it causes on other operations of the same
// context, only through the text of an IoException.
bool is_timeout_message(std::string_view what) {
  return what.find("Timed out") != std::string_view::npos ||
         what.find("timed out") != std::string_view::npos ||
         what.find("Application timeout") != std::string_view::npos;
}

// A peer process that exits or is killed closes its sockets: gloo's pairs read EOF or a reset.
bool is_peer_loss_message(std::string_view what) {
  return what.find("Connection closed by peer") != std::string_view::npos ||
         what.find("Connection reset by peer") != std::string_view::npos;
}

}  // namespace

void rethrow_gloo_error(std::string_view call, const char* file, int line,
                        const GlooCallSite& site) {
  auto describe = [&](std::string_view what) {
    return fmt::format("gloo: {} failed at {}:{} (rank {}, {} #{}): {}", call, base_name(file),
                       line, site.rank, site.op, site.sequence, what);
  };
  try {
    throw;
  } catch (const Error&) {
    throw;  // already ours (e.g. the store timed out during rendezvous)
  } catch (const gloo::IoException& e) {
    if (is_timeout_message(e.what())) {
      throw TimeoutError(describe(e.what()), std::string(site.op), site.sequence, "gloo");
    }
    if (is_peer_loss_message(e.what())) {
      throw BackendError(describe(fmt::format(
          "{}; a peer closed its connection: a rank of this communicator exited or was killed "
          "(or destroyed the communicator early)",
          e.what())));
    }
    throw BackendError(describe(e.what()));
  } catch (const std::exception& e) {
    throw BackendError(describe(e.what()));
  } catch (...) {
    throw BackendError(describe("unknown exception"));
  }
}

}  // namespace mcr::detail
