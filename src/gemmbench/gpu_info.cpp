#include "mcr/gemmbench/gpu_info.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace mcr::codesign::bench {

std::string catalog_name_for_gpu(std::string_view device_name) {
  std::string name(device_name);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto has = [&](std::string_view part) { return name.find(part) != std::string::npos; };
  // Products whose names contain a catalog part's but whose peaks and memory differ (H100 NVL:
  // lower clocks and more, faster memory than the SXM; GH200 and GB200 are not the H200 and B200
  // boards) are not the catalog's: the user describes them.
  if (has("nvl") || has("gh200") || has("gb200")) return {};
  // Most specific first: "a100" contains "a10", "h100 pcie" must win over "h100".
  if (has("h200")) return "h200";
  if (has("h100") && has("pcie")) return "h100-pcie";
  if (has("h100")) return "h100-sxm";
  if (has("a100") && (has("80gb") || has("80 gb"))) return "a100-80gb";
  if (has("a100")) return "a100-40gb";
  if (has("b200")) return "b200";
  if (has("l40s")) return "l40s";
  if (has("v100")) return "v100-sxm2-32gb";
  if (has("mi300x")) return "mi300x";
  if (has("mi250x")) return "mi250x-gcd";
  // "NVIDIA A10" exactly, not A100/A10G-like names we cannot vouch for.
  if (name == "nvidia a10" || name == "a10") return "a10";
  return {};
}

}  // namespace mcr::codesign::bench
