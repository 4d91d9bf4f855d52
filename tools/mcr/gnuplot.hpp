// Running gnuplot on a script the tool wrote, with every string in the script quoted.
#pragma once

#include <string>
#include <string_view>

namespace mcr::cli {

// `text` as one gnuplot single-quoted string: quotes doubled (gnuplot's only escape there) and
// control characters replaced by spaces, so a model's name or a path cannot end the string and
// add commands to the script (gnuplot's `system` runs shell commands).
std::string gnuplot_quoted(std::string_view text);

// A file name as one gnuplot string (gnuplot_quoted), made to start with "./" where it would
// start with '|' or '<': gnuplot reads such an output or data file name as a shell pipe even
// when quoted.
std::string gnuplot_file(std::string_view path);

// Whether an executable `gnuplot` is in a directory of PATH.
bool gnuplot_on_path();

// Runs `gnuplot SCRIPT` directly, without a shell (a path holding a quote or `;` is one argument),
// and returns its exit status (127 when it could not be started, 128 + N when signal N ended it).
int run_gnuplot(const std::string& script);

}  // namespace mcr::cli
