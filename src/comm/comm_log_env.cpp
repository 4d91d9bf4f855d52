// Placeholder: the communication log is not built yet; MCR_LOG is ignored.
#include "comm_log_hooks.hpp"

namespace mcr::detail {
void attach_env_comm_log(Communicator&) {}
void finish_env_comm_log(Communicator&) {}
}  // namespace mcr::detail
