// Signal dispositions the runtime sets for the whole process.
#pragma once

namespace mcr::detail {

/// Sets SIGPIPE to ignored if the program left it at its default action. Every library mcr runs
/// over writes to sockets (Gloo's pairs, Open MPI's TCP transport, the TCP store), and a write to
/// a connection that a dead peer closed raises SIGPIPE, whose default action ends the process
/// without a word; ignored, the write fails with EPIPE and becomes the library's error. A handler
/// the program installed itself is left alone. Throws mcr::Error naming the call if the
/// disposition cannot be read or set.
void ignore_default_sigpipe();

}  // namespace mcr::detail
