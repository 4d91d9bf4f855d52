// Trace files for `mcr replay`: the JSON op list ("format": "mcr-trace") and the Chrome trace an
// MCR_LOG=trace run writes, both read into one validated list of ops before any rank communicates.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcr/bench/point.hpp"
#include "mcr/bench/replay.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {
namespace {

using nlohmann::json;

// A trace this long is a mistake (a repeat or steps count off by orders of magnitude), not a step.
constexpr std::size_t kMaxOps = 1'000'000;
// A message of the trace: 256 TiB, as far as the communication log keeps byte counts exactly.
constexpr std::size_t kMaxTraceBytes = std::size_t{1} << 48;

// "FILE: ops[3].dtype 'f33': unknown element type (...)".
[[noreturn]] void bad_field(const std::string& path, std::string_view where, const json& value,
                            std::string_view rule) {
  throw InvalidArgument(fmt::format("{}: {} {}: {}", path, where, value.dump(), rule));
}

int group_index(Trace& trace, const std::vector<int>& ranks) {
  const auto it = std::find(trace.groups.begin(), trace.groups.end(), ranks);
  if (it != trace.groups.end()) return static_cast<int>(it - trace.groups.begin());
  trace.groups.push_back(ranks);
  return static_cast<int>(trace.groups.size()) - 1;
}

// `most` keeps the products and sums made of these counts (ops x steps, count x element size) from
// wrapping around: a wrapped bound check would pass a trace it exists to refuse.
std::size_t positive_count(const std::string& path, const std::string& where, const json& v,
                           std::size_t least, std::size_t most) {
  const bool fits =
      v.is_number_unsigned()  ? v.get<std::uint64_t>() >= least && v.get<std::uint64_t>() <= most
      : v.is_number_integer() ? v.get<long long>() >= static_cast<long long>(least) &&
                                    static_cast<unsigned long long>(v.get<long long>()) <= most
                              : false;
  if (!fits)
    bad_field(path, where, v, fmt::format("must be an integer from {} to {}", least, most));
  return v.get<std::size_t>();
}

// ---- the JSON op list ---------------------------------------------------------------------------

constexpr std::string_view kOpFields[] = {"op",   "bytes", "count",  "dtype", "group",  "async",
                                          "wait", "root",  "repeat", "name",  "comment"};
constexpr std::string_view kTopFields[] = {"format",  "version",    "world_size", "ops",
                                           "steps",   "iterations", "name",       "description",
                                           "comment", "derivation"};

std::vector<int> parse_group(const std::string& path, const std::string& where, const json& g) {
  if (g.is_string() && g.get<std::string>() == "world") return {};
  if (!g.is_array() || g.empty())
    bad_field(path, where, g, "must be \"world\" or a non-empty list of global ranks");
  std::vector<int> ranks;
  for (const auto& r : g) {
    if (!r.is_number_integer() || r.get<long long>() < 0 || r.get<long long>() > 1'000'000)
      bad_field(path, where, g, "every member must be a global rank (an integer >= 0)");
    const int q = r.get<int>();
    if (std::find(ranks.begin(), ranks.end(), q) != ranks.end())
      bad_field(path, where, g, fmt::format("rank {} is listed twice", q));
    ranks.push_back(q);
  }
  return ranks;
}

Trace parse_op_list(const json& doc, const std::string& path) {
  Trace trace;
  trace.path = path;
  trace.format = "mcr-trace";
  for (const auto& [key, value] : doc.items()) {
    if (std::find(std::begin(kTopFields), std::end(kTopFields), key) == std::end(kTopFields))
      bad_field(path, key, value, "unknown field (a typo?)");
  }
  if (!doc.contains("version") || doc["version"] != 1)
    bad_field(path, "version", doc.value("version", json()), "must be 1");
  int declared_world = 0;
  if (doc.contains("world_size"))
    declared_world = static_cast<int>(
        positive_count(path, "world_size", doc["world_size"], 1, std::numeric_limits<int>::max()));
  std::size_t steps = 1;
  for (const char* key : {"steps", "iterations"}) {
    if (doc.contains(key)) steps *= positive_count(path, key, doc[key], 1, kMaxOps);
  }
  if (!doc.contains("ops") || !doc["ops"].is_array() || doc["ops"].empty())
    bad_field(path, "ops", doc.value("ops", json()), "must be a non-empty list of ops");

  std::vector<std::pair<TraceOp, std::size_t>> once;  // the op and its repeat count
  int needed = 1;
  const auto& ops = doc["ops"];
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const json& o = ops[i];
    const std::string at = fmt::format("ops[{}]", i);
    auto field = [&](std::string_view f) { return fmt::format("{}.{}", at, f); };
    if (!o.is_object()) bad_field(path, at, o, "must be an object with at least \"op\"");
    for (const auto& [key, value] : o.items()) {
      if (std::find(std::begin(kOpFields), std::end(kOpFields), key) == std::end(kOpFields))
        bad_field(path, field(key), value, "unknown field (a typo?)");
    }
    TraceOp op;
    op.source = i;
    if (!o.contains("op") || !o["op"].is_string())
      bad_field(path, field("op"), o.value("op", json()), "must be an operation name");
    const std::string name = o["op"].get<std::string>();
    if (name == "all") bad_field(path, field("op"), o["op"], "names one operation, not all");
    try {
      op.op = parse_bench_op(name, field("op"));
    } catch (const InvalidArgument&) {
      std::vector<std::string_view> known;
      for (OpType t : benchmark_ops())
        known.push_back(to_string(t));
      bad_field(path, field("op"), o["op"],
                fmt::format("unknown operation (known: {})", fmt::join(known, ", ")));
    }
    if (o.contains("dtype")) {
      const auto& d = o["dtype"];
      const auto t = d.is_string() ? parse_dtype(d.get<std::string>()) : std::nullopt;
      if (!t)
        bad_field(path, field("dtype"), d,
                  "unknown element type (use fp32, fp64, fp16, bf16, i8, u8, i32, i64)");
      op.dtype = *t;
    }
    const bool has_bytes = o.contains("bytes");
    const bool has_count = o.contains("count");
    if (op.op != OpType::barrier) {
      if (has_bytes == has_count)
        bad_field(path, at, o, "needs exactly one of \"bytes\" and \"count\"");
      const std::size_t e = dtype_size(op.dtype);
      if (has_bytes) {
        op.bytes = positive_count(path, field("bytes"), o["bytes"], 1, kMaxTraceBytes);
        if (op.bytes % e != 0)
          bad_field(
              path, field("bytes"), o["bytes"],
              fmt::format("must be a multiple of the {} element size {}", to_string(op.dtype), e));
      } else {
        op.bytes = positive_count(path, field("count"), o["count"], 1, kMaxTraceBytes / e) * e;
      }
    }
    std::vector<int> members;
    if (o.contains("group")) members = parse_group(path, field("group"), o["group"]);
    for (const int q : members)
      needed = std::max(needed, q + 1);
    if (op.op == OpType::send && members.size() == 1)
      bad_field(path, field("group"), o["group"], "send/recv needs at least 2 ranks");
    op.group = members.empty() ? -1 : group_index(trace, members);
    if (o.contains("async")) {
      if (!o["async"].is_boolean())
        bad_field(path, field("async"), o["async"], "must be true or false");
      op.async = o["async"].get<bool>();
    }
    if (o.contains("wait")) {
      if (!o["wait"].is_boolean())
        bad_field(path, field("wait"), o["wait"], "must be true or false");
      op.wait = o["wait"].get<bool>();
      if (op.wait && !op.async)
        bad_field(path, field("wait"), o["wait"], "only an async op can be a wait point");
    }
    if (o.contains("root")) {
      if (!has_root(op.op))
        bad_field(path, field("root"), o["root"], fmt::format("{} has no root", to_string(op.op)));
      if (!o["root"].is_number_integer() || o["root"].get<long long>() < 0)
        bad_field(path, field("root"), o["root"], "must be a group rank (an integer >= 0)");
      op.root = o["root"].get<int>();
      if (!members.empty() && op.root >= static_cast<int>(members.size()))
        bad_field(path, field("root"), o["root"],
                  fmt::format("must be a rank of the op's group of {}", members.size()));
      if (members.empty()) needed = std::max(needed, op.root + 1);
    }
    std::size_t repeat = 1;
    if (o.contains("repeat"))
      repeat = positive_count(path, field("repeat"), o["repeat"], 1, kMaxOps);
    once.emplace_back(op, repeat);
  }
  if (declared_world > 0 && declared_world < needed)
    bad_field(path, "world_size", doc["world_size"],
              fmt::format("the ops name ranks up to {}, so at least {} ranks are needed",
                          needed - 1, needed));
  trace.world_size = std::max(declared_world, needed);

  std::size_t total = 0;
  for (const auto& [op, repeat] : once)
    total += repeat;
  if (total > kMaxOps / steps) {
    throw InvalidArgument(fmt::format(
        "{}: {} ops per step x {} steps: more than {} ops (check \"repeat\" and \"steps\")", path,
        total, steps, kMaxOps));
  }
  for (std::size_t s = 0; s < steps; ++s) {
    for (const auto& [op, repeat] : once) {
      for (std::size_t k = 0; k < repeat; ++k)
        trace.ops.push_back(op);
    }
  }
  return trace;
}

// ---- the MCR_LOG trace --------------------------------------------------------------------------

// One collective instance: the records of every member of (group, collective index).
struct Instance {
  double first_ts = 0;
  double last_end = 0;    ///< the latest end (start + duration) of its members' records
  std::size_t event = 0;  ///< first event seen, for messages
  TraceOp op;
  int group_size = 0;
  std::uint64_t sequence = 0;  ///< of the first event seen, for messages
  std::uint64_t index = 0;     ///< among the group's collectives
  std::string group;
  std::map<int, int> members;  ///< group rank -> global rank
};

// One rank's record of a collective, read and checked.
struct CollectiveRecord {
  std::size_t event = 0;
  std::string group;
  std::uint64_t sequence = 0;
  int pid = 0;
};

// A process_name metadata event's "host" (written by MCR_LOG=trace with the gathered host map).
void read_host(Trace& trace, const std::string& path, const std::string& at, const json& ev) {
  if (ev.value("name", "") != "process_name" || !ev.contains("args") || !ev["args"].is_object() ||
      !ev["args"].contains("host")) {
    return;
  }
  const json& host = ev["args"]["host"];
  const json& pid = ev.contains("pid") ? ev["pid"] : json();
  // Bounded, so that a corrupt pid cannot make the map allocate gigabytes.
  constexpr int kMaxRanks = 1 << 20;
  if (!pid.is_number_integer() || pid.get<std::int64_t>() < 0 ||
      pid.get<std::int64_t>() >= kMaxRanks) {
    bad_field(path, at + ".pid", pid,
              fmt::format("must be a global rank (an integer from 0 to {})", kMaxRanks - 1));
  }
  if (!host.is_number_integer() || host.get<std::int64_t>() < 0 ||
      host.get<std::int64_t>() >= kMaxRanks) {
    bad_field(path, at + ".args.host", host, "must be a host index (an integer >= 0)");
  }
  const auto rank = static_cast<std::size_t>(pid.get<int>());
  if (trace.hosts.size() <= rank) trace.hosts.resize(rank + 1, -1);
  if (trace.hosts[rank] >= 0 && trace.hosts[rank] != host.get<int>()) {
    bad_field(path, at + ".args.host", host,
              fmt::format("rank {} was given host {} before: a rank has one host", rank,
                          trace.hosts[rank]));
  }
  trace.hosts[rank] = host.get<int>();
}

Trace parse_comm_log(const json& doc, const std::string& path) {
  Trace trace;
  trace.path = path;
  trace.format = "mcr-log";
  const auto& events = doc["traceEvents"];
  if (!events.is_array()) bad_field(path, "traceEvents", events, "must be a list of events");
  std::map<std::pair<std::string, std::uint64_t>, Instance> instances;
  std::vector<CollectiveRecord> records;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& ev = events[i];
    if (!ev.is_object()) continue;
    const std::string at = fmt::format("traceEvents[{}]", i);
    if (ev.value("ph", "") == "M") {
      read_host(trace, path, at, ev);
      continue;
    }
    if (ev.value("ph", "") != "X") continue;
    auto need = [&](const json& obj, const char* key, const std::string& where) -> const json& {
      if (!obj.contains(key)) bad_field(path, where, obj, fmt::format("lacks \"{}\"", key));
      return obj[key];
    };
    const json& args = need(ev, "args", at);
    const std::string name = need(ev, "name", at).is_string() ? ev["name"].get<std::string>() : "";
    const auto op = parse_op(name);
    if (!op) bad_field(path, at + ".name", ev["name"], "unknown operation");
    if (*op == OpType::send || *op == OpType::recv) {
      ++trace.skipped_p2p;
      continue;
    }
    const std::string a = at + ".args";
    // An all_to_all_v logs CallOptions::size_hint as its bytes; without one it reads 0, and a
    // replay would run it with one element per rank: left out and counted instead.
    if (*op == OpType::all_to_all_v && args.contains("bytes") &&
        args["bytes"].is_number_unsigned() && args["bytes"].get<std::size_t>() == 0) {
      ++trace.skipped_unsized;
      continue;
    }
    const json& dt = need(args, "dtype", a);
    const auto dtype = dt.is_string() ? parse_dtype(dt.get<std::string>()) : std::nullopt;
    if (!dtype) bad_field(path, a + ".dtype", dt, "unknown element type");
    const json& group = need(args, "group", a);
    const json& seq = need(args, "sequence", a);
    const json& grank = need(args, "group_rank", a);
    const json& gsize = need(args, "group_size", a);
    const json& bytes = need(args, "bytes", a);
    const json& pid = need(ev, "pid", at);
    if (!group.is_string()) bad_field(path, a + ".group", group, "must be a string");
    if (!seq.is_number_unsigned()) bad_field(path, a + ".sequence", seq, "must be an integer >= 0");
    if (!bytes.is_number_unsigned())
      bad_field(path, a + ".bytes", bytes, "must be an integer >= 0");
    if (!gsize.is_number_integer() || gsize.get<int>() < 1)
      bad_field(path, a + ".group_size", gsize, "must be an integer >= 1");
    if (!grank.is_number_integer() || grank.get<int>() < 0 || grank.get<int>() >= gsize.get<int>())
      bad_field(path, a + ".group_rank", grank, "must be in [0, group_size)");
    if (!pid.is_number_integer() || pid.get<int>() < 0)
      bad_field(path, at + ".pid", pid, "must be a global rank (an integer >= 0)");
    records.push_back(
        CollectiveRecord{i, group.get<std::string>(), seq.get<std::uint64_t>(), pid.get<int>()});
  }
  // A communicator's sequence numbers count its sends and receives too, which differ between
  // ranks (a pipeline stage sends what the next receives): a collective is matched across ranks by
  // its index among each rank's collectives on that group, as the flight records match them.
  std::map<std::pair<int, std::string>, std::vector<const CollectiveRecord*>> per_rank;
  for (const auto& r : records)
    per_rank[{r.pid, r.group}].push_back(&r);
  for (auto& [key, recs] : per_rank) {
    std::stable_sort(recs.begin(), recs.end(),
                     [](const auto* x, const auto* y) { return x->sequence < y->sequence; });
    for (std::size_t k = 0; k + 1 < recs.size(); ++k) {
      if (recs[k]->sequence == recs[k + 1]->sequence) {
        bad_field(path, fmt::format("traceEvents[{}]", recs[k + 1]->event),
                  events[recs[k + 1]->event],
                  fmt::format("rank {} recorded sequence {} of group {} twice (traceEvents[{}])",
                              key.first, recs[k]->sequence, key.second, recs[k]->event));
      }
    }
  }
  for (const auto& [key, recs] : per_rank) {
    for (std::size_t index = 0; index < recs.size(); ++index) {
      const std::size_t i = recs[index]->event;
      const json& ev = events[i];
      const json& args = ev["args"];
      const std::string at = fmt::format("traceEvents[{}]", i);
      const auto op = parse_op(ev["name"].get<std::string>());
      const auto dtype = parse_dtype(args["dtype"].get<std::string>());
      const json& gsize = args["group_size"];
      const json& grank = args["group_rank"];
      const json& bytes = args["bytes"];
      const json& pid = ev["pid"];
      auto& inst = instances[{key.second, index}];
      const double ts = ev.value("ts", 0.0);
      if (inst.members.empty()) {
        inst.first_ts = ts;
        inst.event = i;
        inst.group_size = gsize.get<int>();
        inst.sequence = recs[index]->sequence;
        inst.index = index;
        inst.group = key.second;
        inst.op.op = *op;
        inst.op.dtype = *dtype;
        inst.op.bytes = bytes.get<std::size_t>();
        inst.op.async = args.value("async", false);
        inst.op.source = i;
        inst.op.backend = ev.value("cat", "");
      } else if (inst.op.op != *op || inst.op.bytes != bytes.get<std::size_t>() ||
                 inst.group_size != gsize.get<int>()) {
        bad_field(path, at, ev,
                  fmt::format("disagrees with traceEvents[{}] on op, bytes or group size for the "
                              "same collective of the group",
                              inst.event));
      }
      inst.first_ts = std::min(inst.first_ts, ts);
      inst.op.latency_us = std::max(inst.op.latency_us, ev.value("dur", 0.0));
      inst.last_end = std::max(inst.last_end, ts + ev.value("dur", 0.0));
      inst.members[grank.get<int>()] = pid.get<int>();
    }
  }
  if (instances.empty()) {
    throw InvalidArgument(fmt::format(
        "{}: no collective operations in the trace ({} send/recv records and {} all_to_all_v "
        "records without a size are not replayed)",
        path, trace.skipped_p2p, trace.skipped_unsized));
  }
  // Replay order: by first start across members, then each group's own sequence restored, so the
  // order is one every rank can follow and each group runs its ops in its recorded order.
  std::vector<const Instance*> order;
  for (const auto& [key, inst] : instances) {
    if (static_cast<int>(inst.members.size()) != inst.group_size) {
      throw InvalidArgument(fmt::format(
          "{}: traceEvents[{}] ({} sequence {}, collective {} of its group): records of {} of its "
          "{} ranks; replay needs the trace of every rank (the one rank 0 writes at finalize)",
          path, inst.event, to_string(inst.op.op), inst.sequence, inst.index, inst.members.size(),
          inst.group_size));
    }
    order.push_back(&inst);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Instance* x, const Instance* y) { return x->first_ts < y->first_ts; });
  std::map<std::string, std::vector<std::size_t>> slots;  // group -> positions in `order`
  for (std::size_t k = 0; k < order.size(); ++k)
    slots[order[k]->group].push_back(k);
  std::vector<const Instance*> ordered(order.size());
  for (const auto& [group, positions] : slots) {
    std::vector<const Instance*> members;
    for (const std::size_t k : positions)
      members.push_back(order[k]);
    std::sort(members.begin(), members.end(),
              [](const Instance* x, const Instance* y) { return x->index < y->index; });
    for (std::size_t j = 0; j < positions.size(); ++j)
      ordered[positions[j]] = members[j];
  }
  for (const Instance* inst : ordered) {
    std::vector<int> ranks;
    for (const auto& [grank, global] : inst->members) {
      ranks.push_back(global);
      trace.world_size = std::max(trace.world_size, global + 1);
    }
    TraceOp op = inst->op;
    op.group = group_index(trace, ranks);
    trace.ops.push_back(op);
  }
  // The log records no waits. An asynchronous op is waited for, with everything issued since the
  // last wait, where the next op started only after all of them had ended: the overlap the run
  // had. (Without wait points a log of torch's operations, all asynchronous, replayed entirely in
  // flight, with a buffer set per op.)
  double run_end = -std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < ordered.size(); ++k) {
    TraceOp& op = trace.ops[k];
    if (!op.async) {  // the replay waits for what is in flight before a blocking op anyway
      run_end = -std::numeric_limits<double>::infinity();
      continue;
    }
    run_end = std::max(run_end, ordered[k]->last_end);
    if (k + 1 == ordered.size() || ordered[k + 1]->first_ts >= run_end) {
      op.wait = true;
      run_end = -std::numeric_limits<double>::infinity();
    }
  }
  if (!trace.hosts.empty()) {
    // Every rank that ran a collective has a host, or the map cannot place its groups. (Ranks
    // without operations may have none: a log collected over a sub-communicator.)
    if (trace.hosts.size() < static_cast<std::size_t>(trace.world_size))
      trace.hosts.resize(static_cast<std::size_t>(trace.world_size), -1);
    for (const auto& group : trace.groups) {
      for (const int q : group) {
        if (trace.hosts[static_cast<std::size_t>(q)] >= 0) continue;
        throw InvalidArgument(fmt::format(
            "{}: rank {} has no host in the trace's process metadata while other ranks have one "
            "(a trace written at finalize names every rank's host)",
            path, q));
      }
    }
  }
  return trace;
}

}  // namespace

Trace parse_trace(std::string_view text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InvalidArgument(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
  if (!doc.is_object())
    throw InvalidArgument(fmt::format("{}: a trace must be a JSON object", path));
  // A field of an unexpected JSON type that the readers take with a default (value("ph", ""))
  // surfaces as nlohmann's type error: named here with the file, as every other refusal is.
  try {
    if (doc.contains("traceEvents")) return parse_comm_log(doc, path);
    if (doc.value("format", json()) != "mcr-trace") {
      bad_field(path, "format", doc.value("format", json()),
                "must be \"mcr-trace\" (or the file an MCR_LOG=trace run writes, with "
                "\"traceEvents\")");
    }
    return parse_op_list(doc, path);
  } catch (const json::exception& e) {
    throw InvalidArgument(fmt::format("{}: malformed trace: {}", path, e.what()));
  }
}

Trace load_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("TRACE '{}': the file cannot be read", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_trace(text.str(), path);
}

void scale_trace(Trace& trace, double factor) {
  if (!(factor > 0) || !std::isfinite(factor))
    throw InvalidArgument(fmt::format("replay.scale {}: must be a number > 0", factor));
  // Every op is scaled before any is changed: a refused factor leaves the trace as it was.
  std::vector<std::size_t> scaled(trace.ops.size(), 0);
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const TraceOp& op = trace.ops[i];
    if (op.op == OpType::barrier) continue;
    const std::size_t e = dtype_size(op.dtype);
    const std::size_t count = op.bytes / e;
    // A count that divided evenly on 1..4 ranks (a multiple of 12) still does after scaling.
    const std::size_t unit = count % 12 == 0 ? 12 : 1;
    const double units = std::max(1.0, std::round(static_cast<double>(count / unit) * factor));
    // Checked in double before any conversion: a scaled size past 2^64 would be undefined to
    // convert, and one that wrapped would be replayed silently at a wrong, small size.
    const double bytes = units * static_cast<double>(unit * e);
    if (bytes > static_cast<double>(kMaxTraceBytes)) {
      throw InvalidArgument(fmt::format(
          "replay.scale {}: {} op {} would move {:.4g} bytes, above the trace's limit of 2^48",
          factor, trace.path, op.source, bytes));
    }
    scaled[i] = static_cast<std::size_t>(units) * unit * e;
  }
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    if (trace.ops[i].op != OpType::barrier) trace.ops[i].bytes = scaled[i];
  }
}

void check_trace_fits(const Trace& trace, int ranks) {
  if (trace.world_size > ranks) {
    throw InvalidArgument(fmt::format(
        "{}: the trace needs {} ranks, but this job has {} (run it with mpirun -np {} or more)",
        trace.path, trace.world_size, ranks, trace.world_size));
  }
  for (const auto& op : trace.ops) {
    const std::size_t n = op.group < 0 ? static_cast<std::size_t>(ranks)
                                       : trace.groups[static_cast<std::size_t>(op.group)].size();
    if (op.op == OpType::send && n < 2) {
      throw InvalidArgument(
          fmt::format("{}: op {} (send/recv) needs at least 2 ranks, but its group has {}",
                      trace.path, op.source, n));
    }
    if (has_root(op.op) && op.root >= static_cast<int>(n)) {
      throw InvalidArgument(
          fmt::format("{}: ops[{}].root {}: must be a rank of the op's group of {}", trace.path,
                      op.source, op.root, n));
    }
  }
}

}  // namespace mcr::bench
