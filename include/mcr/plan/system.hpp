// A training system as the planner sees it: nodes of identical accelerators, one link tier inside a
// node and one between nodes, each described by per-GPU bandwidth and latency (α-β). Systems are
// data: data/systems/*.json (format: docs/planner.md).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcr::plan {

/// One tier of links. `bandwidth_gbs` is what one GPU can send in one direction at once (decimal
/// GB/s): NVLink/NVSwitch per-GPU bandwidth inside a node, the GPU's share of the network
/// adapters between nodes. `efficiency` is the fraction of it a large collective reaches.
struct Link {
  double bandwidth_gbs = 0;
  double latency_us = 0;
  double efficiency = 1.0;
  std::string topology;  ///< "nvswitch", "fat-tree", "shared-memory", ... (informational)

  /// Achieved bytes per second.
  double bytes_per_s() const { return bandwidth_gbs * 1e9 * efficiency; }
};

/// Nanoseconds per element of one class of memory-bound kernel, forward and backward, on one
/// device (see SystemSpec::elementwise_ns).
struct ElementwiseRate {
  double forward_ns = 0;
  double backward_ns = 0;
};

/// The kernel classes a system may give an element-wise rate for, and what one element is:
/// norm, residual (bias-dropout-add), embedding: one of the s*b*h activations; activation: one of
/// the s*b*d_ff MLP values; attention: one of the b*a*s*s scores (softmax + dropout);
/// cross_entropy: one logit (forward and gradient together, in `forward_ns`); optimizer: one
/// parameter.
const std::vector<std::string>& elementwise_classes();

struct SystemSpec {
  std::string name;
  std::string description;
  std::string device;  ///< device catalog name (data/devices), or "local-cpu"
  int nodes = 1;
  int gpus_per_node = 1;
  /// Fraction of the device's single-GEMM throughput (codesign model) that GEMMs sustain inside a
  /// whole training step on this system (clocks under sustained power, interference from
  /// concurrent communication kernels). Fitted, see docs/planner.md; 1 = the GEMM model as is.
  double compute_efficiency = 1.0;
  /// Per GEMM dtype ("fp8", ...), a further factor on compute_efficiency: how much less of its
  /// peak a GEMM of that dtype reaches than one of the models' 16-bit dtype (FP8 GEMMs reach a
  /// smaller share of their doubled peak). Missing dtypes: 1.
  std::map<std::string, double> dtype_efficiency;
  /// Fraction of the device's memory_bandwidth_gbs that the step's memory-bound kernels (norms,
  /// activations, softmax, optimizer) reach; 0 = the device's efficiency.memory_efficiency. A
  /// calibrated CPU device needs it: calibration fits memory_efficiency to GEMMs, where it prices
  /// the memory side of small GEMMs, while the detected bandwidth is already a measured copy rate.
  double stream_efficiency = 0;
  /// Per-element cost of the memory-bound kernels by class (elementwise_classes()). A class given
  /// here is priced by its elements at this rate instead of its bytes: on a CPU these loops are
  /// bound by exp, tanh, reductions and random numbers over cache-resident tensors, not by DRAM
  /// bytes. Empty (GPUs): bytes alone. Measured once per machine by
  /// perf/train_step_elementwise.cpp (docs/planner.md).
  std::map<std::string, ElementwiseRate> elementwise_ns;
  Link intra;  ///< between GPUs of one node
  Link inter;  ///< between nodes
  std::map<std::string, std::string> sources;

  int total_gpus() const { return nodes * gpus_per_node; }
  /// dtype_efficiency of `dtype` (codesign name, e.g. "fp8"), 1 when not given.
  double efficiency_of(const std::string& dtype) const;
  /// Throws mcr::InvalidArgument naming the field when a value is missing or out of range.
  void validate() const;
};

void to_json(nlohmann::json& j, const SystemSpec& s);
void from_json(const nlohmann::json& j, SystemSpec& s);

/// Reads and validates a system file; errors name the file and the field.
SystemSpec load_system(const std::filesystem::path& path);
/// `<data_dir>/systems/<name>.json`; an unknown name lists the catalog.
SystemSpec system_from_catalog(const std::string& name);
std::vector<std::string> catalog_systems();
/// A catalog name, or a path (anything containing '/' or ending in .json).
SystemSpec resolve_system(const std::string& spec);

}  // namespace mcr::plan
