// Measured GEMM timings and the file formats they are stored in (JSON for round trips, CSV for
// spreadsheets). Format reference: docs/gemm.md "File formats".
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/gemm.hpp"
#include "mcr/gemmbench/runner.hpp"

namespace mcr::codesign::bench {

/// Format tag and version written into every measurements file.
inline constexpr const char* kMeasurementsFormat = "mcr-gemm-measurements";
inline constexpr int kMeasurementsVersion = 1;

struct GemmMeasurement {
  Gemm gemm;
  Timing timing;

  /// Useful TFLOP/s at the median time: gemm.flops() / median_s / 1e12.
  double tflops() const;
  /// Minimum-traffic bandwidth at the median time: gemm.bytes() / median_s / 1e9.
  double gbs() const;
};
bool operator==(const GemmMeasurement& a, const GemmMeasurement& b);

/// A GEMM the backend could not run (e.g. no cuBLASLt algorithm for an fp8 shape), with the reason.
struct SkippedGemm {
  Gemm gemm;
  std::string reason;
};

struct MeasurementSet {
  std::string backend;              ///< "cblas" or "cublaslt"
  std::string backend_description;  ///< library, version, threads, device
  /// The device the GEMMs ran on, in the analyser's description; calibrate starts from it.
  std::optional<DeviceSpec> device;
  MeasureOptions options;
  std::string command;  ///< command line that reproduces the measurements
  std::vector<GemmMeasurement> rows;
  std::vector<SkippedGemm> skipped;
};

void to_json(nlohmann::json& j, const GemmMeasurement& m);
void from_json(const nlohmann::json& j, GemmMeasurement& m);
void to_json(nlohmann::json& j, const MeasurementSet& s);
/// Checks the format tag and version; errors name the field.
void from_json(const nlohmann::json& j, MeasurementSet& s);

/// Writes pretty JSON. Throws mcr::Error naming the path when it cannot be written.
void save_measurements(const MeasurementSet& set, const std::filesystem::path& path);
/// Reads a measurements file. Throws mcr::InvalidArgument naming the path and the problem.
MeasurementSet load_measurements(const std::filesystem::path& path);

/// One header line, then one line per measurement (role,m,n,k,batch,dtype,flops,bytes,median_s,
/// min_s,max_s,samples,tflops,gbs).
void write_measurements_csv(std::ostream& out, const MeasurementSet& set);

}  // namespace mcr::codesign::bench
