// Where the analyser finds its data files (device catalog, model presets).
#pragma once

#include <filesystem>

namespace mcr::codesign {

/// The data directory: $MCR_DATA_DIR if set and non-empty, else the source tree's data/ folder
/// compiled into the library. Holds devices/*.json and models/*.json.
std::filesystem::path data_dir();

}  // namespace mcr::codesign
