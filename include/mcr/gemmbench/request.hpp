// What a GEMM sweep is asked to run (`mcr gemm` fills one from its flags; a program can fill one
// the same way): a grid of dimensions and/or the GEMMs of models, the backend to run them on and
// the device predictions refer to. prepare_sweep() turns it into the GEMMs, the runner and the
// device, checking everything that can be checked before measuring. Errors name the fields
// ("request.m").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/gemm.hpp"
#include "mcr/gemmbench/measurement.hpp"
#include "mcr/gemmbench/runner.hpp"

namespace mcr::codesign::bench {

struct GemmRequest {
  /// Grid dimensions (parse_dim_values syntax); m, n and k are given together or not at all.
  std::string m, n, k, batch = "1";
  /// Comma-separated dtype lists. Empty: fp32 for the grid, each model's own dtype for its GEMMs.
  std::vector<std::string> dtypes;
  std::vector<std::string> presets;               ///< model presets whose GEMMs to run
  std::vector<std::string> models;                ///< Hugging Face config.json files, the same
  std::int64_t seq = 0, micro_batch = 0, tp = 0;  ///< the models' s, b and t where > 0
  bool training = false;                          ///< the models' backward GEMMs as well
  std::string backend = "auto";                   ///< auto (a GPU when one is visible), cpu or gpu
  int threads = 0;                                ///< CPU BLAS threads (0: every usable core)
  int gpu = 0;                                    ///< CUDA device index
  /// Device predictions refer to: catalog name or file; empty or "local": this CPU or GPU.
  std::string device;
  bool compare = false;    ///< predictions are wanted: the device must predict every GEMM
  bool probe_peak = true;  ///< local CPU: measure the fp32 peak (see local_cpu_device())
  MeasureOptions measure;  ///< how each GEMM is timed
};

/// The dtypes of comma-separated lists, in order. Throws InvalidArgument naming request.dtypes.
std::vector<DType> parse_dtype_lists(const std::vector<std::string>& lists);

/// The models' GEMMs (layer and logits, with their overrides; roles prefixed by the model's name)
/// for each requested dtype, then the grid's. Throws InvalidArgument naming the field when m, n, k
/// are not given together, a dimension does not parse, the grid would hold more than
/// kMaxGridGemms GEMMs, a setting is given without the GEMMs it applies to (batch without the
/// grid; seq, micro_batch, tp or training without a model), or nothing is requested.
std::vector<Gemm> requested_gemms(const GemmRequest& request);
/// The same, adding to `warnings` what the import of each config in request.models could not
/// model ("FILE: warning"), as `mcr shape --config` says it.
std::vector<Gemm> requested_gemms(const GemmRequest& request, std::vector<std::string>* warnings);

/// The runner of request.backend; auto takes the GPU when cuBLASLt and request.gpu are present.
std::unique_ptr<GemmRunner> make_runner(const GemmRequest& request);

/// The device predictions refer to: request.device if it names one, else this machine's CPU or
/// GPU (as the runner). Without request.compare a local device that cannot be described is
/// nullopt instead of an error.
std::optional<DeviceSpec> prediction_device(const GemmRequest& request, const GemmRunner& runner);

/// Everything a sweep needs, checked before any GEMM is timed.
struct PreparedSweep {
  std::vector<Gemm> gemms;
  std::unique_ptr<GemmRunner> runner;
  std::optional<DeviceSpec> device;   ///< set when request.compare (else when describable)
  std::vector<std::string> warnings;  ///< the configs' import warnings (requested_gemms)
};

/// The sampler's options hold together: 1 <= min_samples <= max_samples, 0 <= min_seconds <=
/// max_seconds, no negative warmup. Throws InvalidArgument naming the fields and their flags.
void check_measure_options(const MeasureOptions& options);

/// requested_gemms(), then the checks: the measure options (check_measure_options); the process
/// CPU clock needs the CPU backend (also where request.backend auto chose the GPU) with one
/// thread; the runner must run every GEMM's dtype (UnsupportedError); with request.compare the
/// device must have a peak for every dtype. Then the runner and the device.
PreparedSweep prepare_sweep(const GemmRequest& request);

/// Measurements saved earlier (load_measurements), their device replaced by request.device when
/// it names one. With request.compare the set must record a device or the request name one.
MeasurementSet load_for_report(const GemmRequest& request, const std::string& path);

}  // namespace mcr::codesign::bench
