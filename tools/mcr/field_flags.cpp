#include "field_flags.hpp"

#include <cctype>
#include <utility>

namespace mcr::cli {
namespace {

// Fields of mcr::plan::Layout and PlanRequest and the model terms the planner's errors use, with
// their flags.
constexpr std::pair<std::string_view, std::string_view> kFieldFlags[] = {
    {"layout.gpus", "--gpus"},
    {"layout.tp", "--tp"},
    {"layout.pp", "--pp"},
    {"layout.dp", "--dp"},
    {"layout.cp", "--cp"},
    {"layout.ep", "--ep"},
    {"layout.etp", "--etp"},
    {"layout.micro_batch", "--micro-batch"},
    {"layout.global_batch", "--global-batch"},
    {"layout.interleave", "--interleave"},
    {"layout.zero", "--zero"},
    {"layout.recompute", "--recompute"},
    {"layout.recompute_modules", "--recompute-modules"},
    {"layout.sequence_parallel", "--sequence-parallel"},
    {"layout.allow_tp_across_nodes", "--allow-tp-across-nodes"},
    {"layout.uneven_pipeline", "--uneven-pipeline"},
    {"layout.fp8", "--fp8"},
    {"layout.fp8_params", "--fp8-params"},
    {"layout.distributed_optimizer", "--distributed-optimizer"},
    {"layout.moe_dispatcher", "--moe-dispatcher"},
    {"layout.capacity_factor", "--capacity-factor"},
    {"model.heads", "--heads"},
    {"model.kv_heads", "--kv-heads"},
    {"model.ffn", "--ffn"},
    {"model.layers", "--layers"},
    // mcr::plan::PlanRequest (mcr plan).
    {"request.dp_bucket_mb", "--dp-bucket-mb"},
    {"request.optimizer_bytes", "--optimizer-bytes"},
    // mcr::codesign::bench::GemmRequest (mcr gemm).
    {"request.m", "-m"},
    {"request.n", "-n"},
    {"request.k", "-k"},
    {"request.batch", "--batch"},
    {"request.dtypes", "--dtype"},
    {"request.presets", "--preset"},
    {"request.models", "--model"},
    {"request.threads", "--threads"},
    {"request.device", "--device"},
    {"request.compare", "--compare"},
    {"request.measure.clock", "--clock"},
    // mcr::bench::SweepOptions (mcr bench) and TuneOptions (mcr tune).
    {"sweep.reduce", "--reduce"},
    {"tune.forms", "--form"},
    {"tune.in_place", "--place"},
};

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

std::string with_flag_names(std::string_view message) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    bool replaced = false;
    if (i == 0 || !identifier_char(message[i - 1])) {
      for (const auto& [field, flag] : kFieldFlags) {
        const std::size_t end = i + field.size();
        // Whole names only: layout.recompute is not the start of layout.recompute_modules.
        if (message.compare(i, field.size(), field) == 0 &&
            (end == message.size() || !identifier_char(message[end]))) {
          out += flag;
          i = end;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += message[i++];
  }
  return out;
}

}  // namespace mcr::cli
