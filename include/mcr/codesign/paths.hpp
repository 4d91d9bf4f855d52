// Where the analyser finds its data files (device catalog, model presets).
#pragma once

#include <filesystem>

namespace mcr::codesign {

/// The data directory, holding devices/*.json and models/*.json: $MCR_DATA_DIR if set and
/// non-empty; else <prefix>/share/mcr beside the running executable when it is installed there;
/// else the source tree's data/ folder; else the install prefix's share/mcr configured at build
/// time.
std::filesystem::path data_dir();

}  // namespace mcr::codesign
