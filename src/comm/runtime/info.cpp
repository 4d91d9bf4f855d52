#include "mcr/comm/info.hpp"

#include <algorithm>

#include "core/backend.hpp"
#include "mcr/errors.hpp"
#include "mcr_build_config.hpp"
#include "runtime/runtime.hpp"

#include <fmt/format.h>

namespace mcr {

std::string version() {
  return MCR_VERSION_STRING;
}

RuntimeInfo runtime_info() {
  detail::Runtime& rt = detail::initialized_runtime();
  RuntimeInfo info;
  info.version = version();
  info.build["build_type"] = MCR_BUILD_TYPE;
  info.build["compiler"] = MCR_CXX_COMPILER;
  for (const std::string& name : backend_names()) {
    const auto built = detail::compiled_backend_names();
    const bool compiled = std::find(built.begin(), built.end(), name) != built.end();
    info.build[name] = compiled ? "on" : "off";
  }
  info.build["cuda"] = MCR_HAVE_CUDA ? "on" : "off";
  info.build["cublaslt"] = MCR_HAVE_CUBLASLT ? "on" : "off";
  info.build["blas"] = MCR_HAVE_BLAS ? "on" : "off";
  info.launcher = detail::to_string(rt.launch.launcher);
  info.rendezvous = rt.rendezvous;
  info.world_exchange = rt.world_exchange;
  info.store_host = rt.store_host;
  info.rank = rt.launch.rank;
  info.size = rt.launch.size;
  info.rules = rt.rules ? rt.rules->canonical() : "";
  info.rules_source = rt.rules_source;
  info.tuning_source = rt.table_source;
  info.timeout = rt.world->timeout;
  for (const auto& f : detail::compiled_backends()) {
    BackendInfo b;
    b.name = std::string(f.name);
    b.library = f.library_version();
    for (const auto& [n, why] : rt.unusable) {
      if (n == f.name) b.reason = why;
    }
    detail::Backend* inst = nullptr;
    for (auto& be : rt.world->backends) {
      if (be->name() == f.name) inst = be.get();
    }
    b.usable = inst != nullptr;
    if (inst != nullptr) {
      for (auto kind : {Device::Kind::cpu, Device::Kind::cuda}) {
        for (OpType op : kAllOpTypes) {
          for (DType t : kAllDTypes) {
            for (ReduceOp r : kAllReduceOps) {
              if (!is_reduction(op) && r != ReduceOp::sum) continue;
              if (is_reduction(op) && !reduce_op_valid_for(r, t)) continue;
              auto s = inst->supports(op, t, r, kind);
              b.capabilities.push_back({op, t, r, kind, s.ok, std::string(s.ok ? s.how : s.why)});
            }
          }
        }
      }
    }
    info.backends.push_back(std::move(b));
  }
  return info;
}

Selection explain_selection(OpType op, DType dtype, std::size_t bytes, int ranks, ReduceOp reduce,
                            Device device, CallForm form) {
  detail::Runtime& rt = detail::initialized_runtime();
  if (ranks < 1) {
    throw InvalidArgument(fmt::format("explain_selection: ranks {} must be >= 1", ranks));
  }
  std::vector<detail::Backend*> raw;
  for (auto& b : rt.world->backends)
    raw.push_back(b.get());
  // The world's shape when asked about the world's size; another size has no known placement, so
  // only table entries that name no topology apply to it.
  const HostShape shape = ranks == rt.world->size ? rt.world->selector->shape() : HostShape{};
  detail::Selector selector(rt.rules, rt.table, raw, rt.unusable, ranks, shape);
  return selector.explain(op, dtype, reduce, device.kind, bytes, {}, form);
}

}  // namespace mcr
