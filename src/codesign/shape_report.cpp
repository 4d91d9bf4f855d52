#include "mcr/codesign/shape_report.hpp"

#include "mcr/codesign/report.hpp"

namespace mcr::codesign {

ShapeReport analyse_shape(const ModelShape& model, const DeviceSpec& device,
                          const ShapeReportOptions& o) {
  ShapeReport r;
  r.advised = o.advise;
  if (o.advise) {
    AdvisorOptions ao = o.advisor;
    ao.training = o.training;
    r.advice = advise(model, device, ao);
  }
  r.analysis = o.advise ? r.advice.input_analysis : analyze(model, device, o.training);
  r.findings = check_guidelines(model, device, r.analysis);
  for (auto& f : check_memory(model, device, o.layout, o.training))
    r.findings.push_back(std::move(f));
  r.params = count_parameters(model);
  r.flops = count_flops(model);
  r.training_memory = training_memory(model, o.layout);
  r.inference_memory = inference_memory(model, o.layout);
  return r;
}

nlohmann::json to_json(const ShapeReport& r, const ModelShape& model, const DeviceSpec& device,
                       const ShapeReportOptions& o) {
  nlohmann::json j = analysis_json(r.analysis);
  j["params"] = params_json(r.params);
  j["flops"] = flops_json(r.flops);
  j["memory"] = {{"training", memory_json(r.training_memory)},
                 {"inference", memory_json(r.inference_memory)},
                 {"device_memory_gb", device.memory_gb},
                 {"layout",
                  {{"t", model.t},
                   {"pp", o.layout.pp},
                   {"dp", o.layout.dp},
                   {"zero_stage", o.layout.zero_stage},
                   {"checkpoint_activations", o.layout.checkpoint_activations},
                   {"sequence_parallel", o.layout.sequence_parallel},
                   {"generated_tokens", o.layout.generated_tokens}}}};
  j["guidelines"] = findings_json(r.findings);
  if (r.advised) j["advice"] = advice_json(r.advice);
  return j;
}

}  // namespace mcr::codesign
