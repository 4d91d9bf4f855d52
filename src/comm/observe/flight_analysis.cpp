// `mcr doctor`'s analysis (mcr/comm/flight_analysis.hpp): flight records merged per communicator.
#include "mcr/comm/flight_analysis.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iterator>
#include <nlohmann/json.hpp>

#include "mcr/errors.hpp"

namespace mcr {
namespace {

using nlohmann::json;

constexpr std::uint64_t kNotCollective = ~std::uint64_t{0};

struct Op {
  std::uint64_t seq = 0;
  std::string op, dtype, backend, form, state;
  std::size_t count = 0, bytes = 0;
  int root = -1;
  // Index among the communicator's collectives: ranks meet by it, as send/recv (one peer each)
  // shift sequence numbers. kNotCollective for send/recv.
  std::uint64_t collective = kNotCollective;
  bool p2p() const { return op == "send" || op == "recv"; }
  // A v-op's recorded count is the rank's own (all_gather_v's input, all_to_all_v's sends): ranks
  // differ there by design, as the verification knows (verify.cpp, uses_count).
  bool count_is_per_rank() const { return op == "all_gather_v" || op == "all_to_all_v"; }
  // The backend and the form too: the same all_reduce on mpi and on gloo (a backend forced on one
  // rank, with MCR_VERIFY=0), or blocking on one rank and asynchronous on another, never meets.
  bool same_call(const Op& o) const {
    return op == o.op && dtype == o.dtype && (count == o.count || count_is_per_rank()) &&
           root == o.root && backend == o.backend && form == o.form;
  }
  std::string describe() const {
    return fmt::format("{} {} x{} ({} B){} on {}, {}", op, dtype, count, bytes,
                       root >= 0 ? fmt::format(", root/peer {}", root) : "", backend, form);
  }
};

struct Member {
  int world_rank = -1;
  int group_rank = -1;
  std::uint64_t issued = 0;
  std::uint64_t collectives = 0;                             // collectives issued
  std::map<std::uint64_t, Op> ops;                           // by sequence number
  std::map<std::uint64_t, std::uint64_t> seq_of_collective;  // the collectives of `ops`
  const Op* collective(std::uint64_t c) const {
    auto it = seq_of_collective.find(c);
    return it == seq_of_collective.end() ? nullptr : &ops.at(it->second);
  }
  // The first collective at index `from` or later that this member has not completed (or not
  // reached: `collectives` then).
  std::uint64_t first_unfinished_collective(std::uint64_t from = 0) const {
    for (auto it = seq_of_collective.lower_bound(from); it != seq_of_collective.end(); ++it)
      if (ops.at(it->second).state != "completed") return it->first;
    return std::max(from, collectives);
  }
  std::string last_issued() const {
    if (issued == 0) return "issued nothing";
    auto it = ops.find(issued - 1);
    if (it == ops.end()) return fmt::format("last issued #{}", issued - 1);
    return fmt::format("last issued #{} {} ({})", issued - 1, it->second.op, it->second.state);
  }
};

struct Group {
  std::uint64_t id = 0;
  int size = 0;
  std::vector<int> world_ranks;
  std::map<int, Member> members;  // by group rank
  int world_of(int group_rank) const {
    return group_rank >= 0 && static_cast<std::size_t>(group_rank) < world_ranks.size()
               ? world_ranks[static_cast<std::size_t>(group_rank)]
               : -1;
  }
};

struct Record {
  std::string file, host, reason;
  int world_rank = -1;
  long pid = 0;
};

struct Job {
  std::vector<Record> records;
  std::map<std::uint64_t, Group> groups;
};

// A snapshot of a live job (SIGUSR1, dump_flight_record()) explains no failure. Its writer says
// so; a record without that field is known by its reason.
bool is_snapshot(const json& record) {
  if (const auto it = record.find("snapshot"); it != record.end() && it->is_boolean()) {
    return it->get<bool>();
  }
  const std::string reason = record.at("reason").get<std::string>();
  return reason == "SIGUSR1" || reason == "on demand";
}

// When the record at `path` was written, if it explains a failure: not a snapshot, and it holds
// a communicator. Unreadable files do not (the reading below names them).
std::optional<std::int64_t> failure_time(const std::filesystem::path& path) {
  try {
    std::ifstream in(path);
    const json j = json::parse(in);
    if (is_snapshot(j) || j.at("communicators").empty()) {
      return std::nullopt;
    }
    return j.at("time_unix_ns").get<std::int64_t>();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Job load(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InvalidArgument(fmt::format("DIR '{}' is not a directory", dir));
  }
  // Per rank, flight-rank<N>.json: a process's later dumps (flight-rank<N>.later-<k>.json)
  // follow the record that explains its failure, and would stand in for it. Where that file is
  // missing (its writer was killed before renaming it into place, while a signal's dump went
  // beside it), the earliest later dump stands in.
  const auto digits = [](std::string_view t) {
    return !t.empty() && t.size() < 10 &&
           std::all_of(t.begin(), t.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  };
  std::map<int, fs::path> records;
  std::map<int, std::map<int, fs::path>> later_dumps;  // rank -> k -> path
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !name.starts_with("flight-rank") || !name.ends_with(".json")) {
      continue;
    }
    std::string_view rest(name);
    rest.remove_prefix(std::string_view("flight-rank").size());
    rest.remove_suffix(std::string_view(".json").size());
    const std::size_t dot = rest.find(".later-");
    const std::string_view rank = rest.substr(0, dot);
    if (!digits(rank)) continue;
    const int r = std::stoi(std::string(rank));
    if (dot == std::string_view::npos) {
      records[r] = e.path();
      continue;
    }
    const std::string_view k = rest.substr(dot + std::string_view(".later-").size());
    if (!digits(k)) continue;
    later_dumps[r][std::stoi(std::string(k))] = e.path();
  }
  for (const auto& [r, later] : later_dumps) {
    auto it = records.find(r);
    // A failure that came while a snapshot was being written to the record file went beside it,
    // and the snapshot then took the record file, which a later dump (the exit hook's, say) may
    // have taken in turn: the earliest dump that explains a failure is the rank's record. Without
    // that race it is the record file, written first. Where the record file is missing (its
    // writer died before renaming it into place), the earliest dump that explains a failure
    // stands in, else the earliest (a snapshot before the failure's dump told a stale story).
    const bool missing = it == records.end();
    fs::path chosen = missing ? later.begin()->second : it->second;
    std::optional<std::int64_t> earliest;
    if (!missing) earliest = failure_time(chosen);
    for (const auto& [k, path] : later) {
      const auto t = failure_time(path);
      if (t && (!earliest || *t < *earliest)) {
        earliest = t;
        chosen = path;
      }
    }
    records[r] = chosen;
  }
  std::vector<fs::path> files;
  for (const auto& [r, path] : records)
    files.push_back(path);
  if (files.empty()) {
    throw InvalidArgument(fmt::format(
        "DIR '{}' holds no flight records (flight-rank<N>.json, written into MCR_FLIGHT_DIR)",
        dir));
  }
  Job job;
  for (const auto& f : files) {
    std::ifstream in(f);
    json j;
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {
      throw InvalidArgument(fmt::format("{}: not valid JSON: {}", f.string(), e.what()));
    }
    if (!j.is_object() || !j.contains("format") || j["format"] != "mcr-flight-record") {
      throw InvalidArgument(fmt::format(
          "{}: not an mcr flight record (\"format\" is not \"mcr-flight-record\")", f.string()));
    }
    try {
      Record r{f.string(), j.at("host").get<std::string>(), j.at("reason").get<std::string>(),
               j.at("world_rank").get<int>(), j.at("pid").get<long>()};
      job.records.push_back(r);
      for (const auto& c : j.at("communicators")) {
        // A communicator dumped before it was identified (records written before it became live
        // at identification) names no ranks: it is no group's member.
        if (c.at("world_ranks").empty()) continue;
        Group& g = job.groups[c.at("group_id").get<std::uint64_t>()];
        g.id = c.at("group_id").get<std::uint64_t>();
        g.size = c.at("group_size").get<int>();
        g.world_ranks = c.at("world_ranks").get<std::vector<int>>();
        Member m;
        m.world_rank = r.world_rank;
        m.group_rank = c.at("group_rank").get<int>();
        m.issued = c.at("issued").get<std::uint64_t>();
        // Records without collective indices (written before they were kept): sequence numbers
        // stand in, as they did.
        const bool indexed = c.contains("collectives");
        m.collectives = indexed ? c.at("collectives").get<std::uint64_t>() : m.issued;
        for (const auto& o : c.at("ops")) {
          Op op{o.at("seq").get<std::uint64_t>(),
                o.at("op").get<std::string>(),
                o.at("dtype").get<std::string>(),
                o.at("backend").get<std::string>(),
                o.at("form").get<std::string>(),
                o.at("state").get<std::string>(),
                o.at("count").get<std::size_t>(),
                o.at("bytes").get<std::size_t>(),
                o.value("root", -1)};
          // A collective without an index in an indexed record (dumped while its issue was being
          // recorded) cannot be matched, and is left out of the matching.
          if (!op.p2p()) {
            op.collective = !indexed ? op.seq : o.value("collective", kNotCollective);
          }
          m.ops[op.seq] = op;
        }
        for (const auto& [seq, op] : m.ops)
          if (op.collective != kNotCollective) m.seq_of_collective[op.collective] = seq;
        g.members[m.group_rank] = std::move(m);
      }
    } catch (const json::exception& e) {
      throw InvalidArgument(fmt::format("{}: malformed flight record: {}", f.string(), e.what()));
    }
  }
  return job;
}

// "sequence #S" where every member numbered collective `c` as S == c (no send/recv shifted
// them); else "collective #c" with each member's own sequence number.
std::string name_collective(const Group& g, std::uint64_t c) {
  std::string seqs;
  bool shifted = false;
  for (const auto& [r, m] : g.members) {
    const Op* op = m.collective(c);
    if (op == nullptr) continue;
    shifted = shifted || op->seq != c;
    seqs += fmt::format("{}#{} on rank {}", seqs.empty() ? "" : ", ", op->seq, r);
  }
  if (!shifted) return fmt::format("sequence #{}", c);
  return fmt::format("collective #{} (sequence {}; sequence numbers count send/recv too)", c, seqs);
}

json analyse(const Group& g) {
  json out{{"group_id", g.id},
           {"group_size", g.size},
           {"world_ranks", g.world_ranks},
           {"missing_ranks", json::array()},
           {"stuck", nullptr},
           {"unfinished_p2p", json::array()},
           {"divergence", nullptr}};
  for (int r = 0; r < g.size; ++r) {
    if (!g.members.contains(r))
      out["missing_ranks"].push_back({{"group_rank", r}, {"world_rank", g.world_of(r)}});
  }
  // The first unfinished collective of the group: the earliest collective some member has not
  // completed (or not reached). Collectives are matched by their index among the collectives.
  std::uint64_t most = 0;
  for (const auto& [r, m] : g.members)
    most = std::max(most, m.collectives);
  const auto first_unfinished = [&](std::uint64_t from) {
    std::uint64_t c = ~std::uint64_t{0};
    for (const auto& [r, m] : g.members)
      c = std::min(c, m.first_unfinished_collective(from));
    return c;
  };
  // Who reached collective `c` and how far each got.
  struct Standing {
    const Op* what = nullptr;
    json never_reached = json::array(), never_completed = json::array(), completed = json::array();
  };
  const auto standing = [&](std::uint64_t c) {
    Standing s;
    for (const auto& [r, m] : g.members) {
      const json who{{"group_rank", r}, {"world_rank", g.world_of(r)}};
      if (m.collectives <= c) {
        json w = who;
        w["last_issued"] = m.last_issued();
        s.never_reached.push_back(w);
        continue;
      }
      const Op* op = m.collective(c);
      if (op == nullptr) continue;  // beyond this member's ring
      if (s.what == nullptr) s.what = op;
      json w = who;
      w["state"] = op->state;
      w["seq"] = op->seq;
      (op->state == "completed" ? s.completed : s.never_completed).push_back(w);
    }
    return s;
  };
  std::uint64_t stuck = first_unfinished(0);
  if (!g.members.empty() && stuck < most) {
    // An asynchronous operation's record moves on only when its own handle is polled: one that
    // every member reached and some member completed was delivered by its library, and the others'
    // "started" is the record lagging behind a later call they block in. The first collective
    // past it that is unfinished is the one to explain (where some member never reached it).
    const auto explains = [](const Standing& s) {
      return !s.never_reached.empty() || s.completed.empty();
    };
    Standing s = standing(stuck);
    if (!explains(s)) {
      for (std::uint64_t c = first_unfinished(stuck + 1); c < most; c = first_unfinished(c + 1)) {
        Standing here = standing(c);
        if (explains(here)) {
          stuck = c;
          s = std::move(here);
          break;
        }
      }
    }
    out["stuck"] = {{"seq", s.what ? json(s.what->seq) : json(stuck)},
                    {"collective", stuck},
                    {"name", name_collective(g, stuck)},
                    {"op", s.what ? json(s.what->describe()) : json(nullptr)},
                    {"never_reached", s.never_reached},
                    {"never_completed", s.never_completed},
                    {"completed", s.completed}};
  }
  // Send/recv that never completed: each involves one peer, so they are listed, not matched.
  for (const auto& [r, m] : g.members) {
    for (const auto& [seq, op] : m.ops) {
      if (!op.p2p() || op.state == "completed") continue;
      out["unfinished_p2p"].push_back({{"group_rank", r},
                                       {"world_rank", g.world_of(r)},
                                       {"seq", seq},
                                       {"op", op.describe()},
                                       {"state", op.state}});
    }
  }
  // First divergence: a collective index at which members recorded different collectives.
  std::map<std::uint64_t, std::vector<std::pair<int, const Op*>>> by_collective;
  for (const auto& [r, m] : g.members)
    for (const auto& [c, seq] : m.seq_of_collective)
      by_collective[c].emplace_back(r, &m.ops.at(seq));
  for (const auto& [c, ops] : by_collective) {
    const bool differ = std::any_of(ops.begin(), ops.end(), [&](const auto& p) {
      return !p.second->same_call(*ops.front().second);
    });
    if (!differ) continue;
    json ranks = json::array();
    for (const auto& [r, op] : ops) {
      ranks.push_back({{"group_rank", r},
                       {"world_rank", g.world_of(r)},
                       {"seq", op->seq},
                       {"op", op->describe()}});
    }
    out["divergence"] = {{"seq", ops.front().second->seq},
                         {"collective", c},
                         {"name", name_collective(g, c)},
                         {"ranks", ranks}};
    break;
  }
  return out;
}

std::string rank_list(const json& ranks, const char* detail) {
  std::string s;
  for (const auto& w : ranks) {
    s += fmt::format("{}rank {} (world rank {}", s.empty() ? "" : ", ", w["group_rank"].get<int>(),
                     w["world_rank"].get<int>());
    if (detail != nullptr && w.contains(detail)) s += "; " + w[detail].get<std::string>();
    s += ")";
  }
  return s;
}

std::string report_text(const Job& job, const json& report) {
  std::string out;
  auto out_it = std::back_inserter(out);
  fmt::format_to(out_it, "mcr doctor: {} flight record(s)\n", job.records.size());
  for (const auto& r : job.records) {
    fmt::format_to(out_it, "  world rank {} on {} (pid {}): {}\n", r.world_rank, r.host, r.pid,
                   r.reason);
  }
  for (const auto& g : report["groups"]) {
    fmt::format_to(out_it, "\ngroup {} ({} ranks, world ranks {}):\n",
                   g["group_id"].get<std::uint64_t>(), g["group_size"].get<int>(),
                   fmt::join(g["world_ranks"].get<std::vector<int>>(), ","));
    if (!g["missing_ranks"].empty()) {
      fmt::format_to(out_it, "  no record from: {}\n", rank_list(g["missing_ranks"], nullptr));
    }
    const json& s = g["stuck"];
    if (s.is_null()) {
      fmt::format_to(out_it, "  every recorded rank completed every collective it issued\n");
    } else {
      fmt::format_to(out_it, "  first unfinished operation: {}{}\n", s["name"].get<std::string>(),
                     s["op"].is_null() ? "" : ": " + s["op"].get<std::string>());
      if (!s["never_reached"].empty()) {
        fmt::format_to(out_it, "    never reached by: {}\n",
                       rank_list(s["never_reached"], "last_issued"));
      }
      if (!s["never_completed"].empty()) {
        fmt::format_to(out_it, "    never completed by: {}\n",
                       rank_list(s["never_completed"], "state"));
      }
      if (!s["completed"].empty()) {
        fmt::format_to(out_it, "    completed by: {}\n", rank_list(s["completed"], nullptr));
      }
    }
    for (const auto& p : g["unfinished_p2p"]) {
      fmt::format_to(
          out_it, "  unfinished send/recv: rank {} (world rank {}): sequence #{} {} ({})\n",
          p["group_rank"].get<int>(), p["world_rank"].get<int>(), p["seq"].get<std::uint64_t>(),
          p["op"].get<std::string>(), p["state"].get<std::string>());
    }
    const json& d = g["divergence"];
    if (d.is_null()) {
      fmt::format_to(
          out_it,
          "  no divergence: at every recorded collective index the ranks issued the same "
          "collective\n");
    } else {
      fmt::format_to(out_it, "  ranks diverge at {}:\n", d["name"].get<std::string>());
      for (const auto& r : d["ranks"]) {
        fmt::format_to(out_it, "    rank {} (world rank {}): {}\n", r["group_rank"].get<int>(),
                       r["world_rank"].get<int>(), r["op"].get<std::string>());
      }
    }
  }
  const auto& laggards = report["laggards"];
  if (!laggards.empty()) {
    fmt::format_to(
        out_it, "\nlaggards (never reached an operation their peers wait in): world rank(s) {}\n",
        fmt::join(laggards.get<std::vector<int>>(), ", "));
  }
  return out;
}

}  // namespace

FlightDiagnosis diagnose_flight_records(const std::string& dir) {
  const Job job = load(dir);
  json report{{"records", json::array()}, {"groups", json::array()}, {"laggards", json::array()}};
  for (const auto& r : job.records) {
    report["records"].push_back({{"file", r.file},
                                 {"world_rank", r.world_rank},
                                 {"host", r.host},
                                 {"pid", r.pid},
                                 {"reason", r.reason}});
  }
  std::vector<int> laggards;
  for (const auto& [id, g] : job.groups) {
    json a = analyse(g);
    if (!a["stuck"].is_null() && !a["stuck"]["never_completed"].empty()) {
      for (const auto& w : a["stuck"]["never_reached"])
        laggards.push_back(w["world_rank"].get<int>());
    }
    report["groups"].push_back(std::move(a));
  }
  std::sort(laggards.begin(), laggards.end());
  laggards.erase(std::unique(laggards.begin(), laggards.end()), laggards.end());
  report["laggards"] = laggards;
  FlightDiagnosis out;
  out.json = report.dump(2);
  out.text = report_text(job, report);
  out.laggards = std::move(laggards);
  return out;
}

}  // namespace mcr
