// `mcr shape gemm`: one GEMM's predicted time and TFLOP/s on a device, with the model's reasons.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <memory>

#include "commands.hpp"
#include "mcr/codesign/gemm_model.hpp"
#include "mcr/codesign/report.hpp"

namespace mcr::cli {
namespace {

using namespace codesign;
using nlohmann::json;

struct GemmOptions {
  std::string device = "a100-80gb";
  std::string dtype = "bf16";
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  bool json_out = false;
};

void run_gemm(const GemmOptions& o) {
  const DeviceSpec device = resolve_device(o.device);
  Gemm g;
  g.role = "gemm";
  g.m = o.m;
  g.n = o.n;
  g.k = o.k;
  g.batch = o.batch;
  g.dtype = parse_dtype(o.dtype);
  const GemmPrediction p = predict(g, device);
  if (o.json_out) {
    json j = gemm_result_json(g, p);
    j["device"] = device.name;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("{} {}x{}x{} batch {} {} on {}: {:.2f} us, {:.1f} TFLOP/s\n  {}\n", g.role, g.m, g.n,
             g.k, g.batch, to_string(g.dtype), device.name, p.time_s * 1e6, p.tflops,
             p.explanation);
}

}  // namespace

void add_shape_gemm_command(CLI::App* shape) {
  auto* gemm =
      shape->add_subcommand("gemm", "predict one GEMM: C[MxN] = A[MxK] B[KxN], batch times");
  auto gopts = std::make_shared<GemmOptions>();
  gemm->add_option("--device", gopts->device, "catalog name or device JSON file")
      ->capture_default_str();
  gemm->add_option("--dtype", gopts->dtype, "fp32, tf32, fp16, bf16, fp8")->capture_default_str();
  gemm->add_option("-m", gopts->m, "M (rows of C)")->required();
  gemm->add_option("-n", gopts->n, "N (columns of C)")->required();
  gemm->add_option("-k", gopts->k, "K (reduction)")->required();
  gemm->add_option("--batch", gopts->batch, "batch count (BMM)")->capture_default_str();
  gemm->add_flag("--json", gopts->json_out, "JSON output");
  gemm->callback([gopts] { run_gemm(*gopts); });
}

}  // namespace mcr::cli
