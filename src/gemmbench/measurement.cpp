#include "mcr/gemmbench/measurement.hpp"

#include <fmt/core.h>

#include <fstream>
#include <ostream>

#include "mcr/errors.hpp"

namespace mcr::codesign::bench {

double GemmMeasurement::tflops() const {
  return timing.median_s > 0 ? gemm.flops() / timing.median_s / 1e12 : 0.0;
}

double GemmMeasurement::gbs() const {
  const double bytes =
      timing.call_bytes > 0 ? static_cast<double>(timing.call_bytes) : gemm.bytes();
  return timing.median_s > 0 ? bytes / timing.median_s / 1e9 : 0.0;
}

bool operator==(const GemmMeasurement& a, const GemmMeasurement& b) {
  const auto& x = a.timing;
  const auto& y = b.timing;
  return a.gemm == b.gemm && x.median_s == y.median_s && x.min_s == y.min_s && x.max_s == y.max_s &&
         x.samples == y.samples && x.calls_per_sample == y.calls_per_sample &&
         x.buffer_sets == y.buffer_sets && x.working_set_bytes == y.working_set_bytes &&
         x.call_bytes == y.call_bytes;
}

void to_json(nlohmann::json& j, const GemmMeasurement& m) {
  const auto& g = m.gemm;
  j = {{"role", g.role},
       {"m", g.m},
       {"n", g.n},
       {"k", g.k},
       {"batch", g.batch},
       {"dtype", to_string(g.dtype)},
       {"pass", to_string(g.pass)},
       {"flops", g.flops()},
       {"bytes", g.bytes()},
       {"median_s", m.timing.median_s},
       {"min_s", m.timing.min_s},
       {"max_s", m.timing.max_s},
       {"samples", m.timing.samples},
       {"calls_per_sample", m.timing.calls_per_sample},
       {"buffer_sets", m.timing.buffer_sets},
       {"working_set_bytes", m.timing.working_set_bytes},
       {"call_bytes", m.timing.call_bytes},
       {"tflops", m.tflops()}};
}

void from_json(const nlohmann::json& j, GemmMeasurement& m) {
  m.gemm.role = j.value("role", std::string{});
  j.at("m").get_to(m.gemm.m);
  j.at("n").get_to(m.gemm.n);
  j.at("k").get_to(m.gemm.k);
  m.gemm.batch = j.value("batch", std::int64_t{1});
  m.gemm.dtype = parse_dtype(j.at("dtype").get<std::string>());
  m.gemm.pass = parse_pass(j.value("pass", std::string{"forward"}));
  m.gemm.validate();
  j.at("median_s").get_to(m.timing.median_s);
  if (!(m.timing.median_s > 0)) {
    throw InvalidArgument(fmt::format("median_s must be positive, got {}", m.timing.median_s));
  }
  m.timing.min_s = j.value("min_s", m.timing.median_s);
  m.timing.max_s = j.value("max_s", m.timing.median_s);
  m.timing.samples = j.value("samples", 1);
  m.timing.calls_per_sample = j.value("calls_per_sample", 1);
  m.timing.buffer_sets = j.value("buffer_sets", 1);
  m.timing.working_set_bytes = j.value("working_set_bytes", std::size_t{0});
  m.timing.call_bytes = j.value("call_bytes", std::size_t{0});
}

void to_json(nlohmann::json& j, const MeasurementSet& s) {
  const auto& o = s.options;
  j = {{"format", kMeasurementsFormat},
       {"version", kMeasurementsVersion},
       {"backend", s.backend},
       {"backend_description", s.backend_description},
       {"command", s.command},
       {"options",
        {{"warmup_iterations", o.warmup_iterations},
         {"warmup_seconds", o.warmup_seconds},
         {"min_samples", o.min_samples},
         {"max_samples", o.max_samples},
         {"min_seconds", o.min_seconds},
         {"max_seconds", o.max_seconds},
         {"rotation_bytes", o.rotation_bytes},
         {"max_buffer_sets", o.max_buffer_sets},
         {"clock", to_string(o.clock)}}},
       {"measurements", s.rows}};
  if (s.device) j["device"] = *s.device;
  if (!s.skipped.empty()) {
    auto& skipped = j["skipped"];
    for (const auto& k : s.skipped) {
      skipped.push_back({{"role", k.gemm.role},
                         {"m", k.gemm.m},
                         {"n", k.gemm.n},
                         {"k", k.gemm.k},
                         {"batch", k.gemm.batch},
                         {"dtype", to_string(k.gemm.dtype)},
                         {"reason", k.reason}});
    }
  }
}

void from_json(const nlohmann::json& j, MeasurementSet& s) {
  const auto format = j.value("format", std::string{});
  if (format != kMeasurementsFormat) {
    throw InvalidArgument(
        fmt::format("field 'format' is '{}', expected '{}'", format, kMeasurementsFormat));
  }
  const int version = j.value("version", 0);
  if (version != kMeasurementsVersion) {
    throw InvalidArgument(fmt::format("field 'version' is {}, this mcr reads version {}", version,
                                      kMeasurementsVersion));
  }
  s.backend = j.value("backend", std::string{});
  s.backend_description = j.value("backend_description", std::string{});
  s.command = j.value("command", std::string{});
  if (j.contains("options")) {
    const auto& o = j.at("options");
    MeasureOptions d;
    s.options.warmup_iterations = o.value("warmup_iterations", d.warmup_iterations);
    s.options.warmup_seconds = o.value("warmup_seconds", d.warmup_seconds);
    s.options.min_samples = o.value("min_samples", d.min_samples);
    s.options.max_samples = o.value("max_samples", d.max_samples);
    s.options.min_seconds = o.value("min_seconds", d.min_seconds);
    s.options.max_seconds = o.value("max_seconds", d.max_seconds);
    s.options.rotation_bytes = o.value("rotation_bytes", d.rotation_bytes);
    s.options.max_buffer_sets = o.value("max_buffer_sets", d.max_buffer_sets);
    s.options.clock = parse_clock(o.value("clock", std::string("wall")));
  }
  s.device.reset();
  if (j.contains("device")) s.device = j.at("device").get<DeviceSpec>();
  s.skipped.clear();
  for (const auto& k : j.value("skipped", nlohmann::json::array())) {
    SkippedGemm skipped;
    skipped.gemm.role = k.value("role", std::string{});
    skipped.gemm.m = k.value("m", std::int64_t{0});
    skipped.gemm.n = k.value("n", std::int64_t{0});
    skipped.gemm.k = k.value("k", std::int64_t{0});
    skipped.gemm.batch = k.value("batch", std::int64_t{1});
    skipped.gemm.dtype = parse_dtype(k.value("dtype", std::string{"fp32"}));
    skipped.reason = k.value("reason", std::string{});
    s.skipped.push_back(std::move(skipped));
  }
  s.rows.clear();
  const auto& rows = j.at("measurements");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    try {
      s.rows.push_back(rows[i].get<GemmMeasurement>());
    } catch (const std::exception& e) {
      throw InvalidArgument(fmt::format("measurements[{}]: {}", i, e.what()));
    }
  }
}

void save_measurements(const MeasurementSet& set, const std::filesystem::path& path) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("cannot write measurements file '{}'", path.string()));
  out << nlohmann::json(set).dump(2) << '\n';
  if (!out) throw Error(fmt::format("failed writing measurements file '{}'", path.string()));
}

MeasurementSet load_measurements(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw InvalidArgument(fmt::format("measurements file '{}' cannot be opened", path.string()));
  }
  try {
    return nlohmann::json::parse(in).get<MeasurementSet>();
  } catch (const std::exception& e) {
    throw InvalidArgument(fmt::format("measurements file '{}': {}", path.string(), e.what()));
  }
}

void write_measurements_csv(std::ostream& out, const MeasurementSet& set) {
  out << "role,m,n,k,batch,dtype,flops,bytes,median_s,min_s,max_s,samples,tflops,gbs\n";
  for (const auto& r : set.rows) {
    const auto& g = r.gemm;
    out << fmt::format("{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{:.6g},{:.6g}\n",
                       g.role, g.m, g.n, g.k, g.batch, to_string(g.dtype), g.flops(), g.bytes(),
                       r.timing.median_s, r.timing.min_s, r.timing.max_s, r.timing.samples,
                       r.tflops(), r.gbs());
  }
}

}  // namespace mcr::codesign::bench
