// init()'s inputs: MCR_TIMEOUT, MCR_BACKENDS, MCR_RULES, MCR_TUNING read and checked with errors
// naming the variable, the value and the rule; the cross-rank comparison's wording.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/backend.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"
#include "runtime/init_inputs.hpp"

using namespace mcr;
using namespace mcr::detail;
using namespace std::chrono_literals;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no InvalidArgument";
}

std::string timeout_error(const char* text) {
  return error_of([&] { (void)parse_timeout_seconds(text); });
}

// Sets environment variables for one test and removes them afterwards.
class Env {
 public:
  Env& set(const char* name, const std::string& value) {
    setenv(name, value.c_str(), 1);
    names_.push_back(name);
    return *this;
  }
  ~Env() {
    for (const char* n : names_)
      unsetenv(n);
  }

 private:
  std::vector<const char*> names_;
};

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

}  // namespace

TEST(Timeout, AcceptsSecondsAndRoundsToMilliseconds) {
  EXPECT_EQ(parse_timeout_seconds("600"), 600000ms);
  EXPECT_EQ(parse_timeout_seconds("0.5"), 500ms);
  EXPECT_EQ(parse_timeout_seconds("0.001"), 1ms);
  EXPECT_EQ(parse_timeout_seconds("1e3"), 1000000ms);
  EXPECT_EQ(parse_timeout_seconds("0.0016"), 2ms);
  EXPECT_EQ(parse_timeout_seconds("604800"), kMaxTimeout);
}

TEST(Timeout, RejectsWhatCannotBeATimeoutNamingVariableValueAndRule) {
  const std::string rule = "[0.001, 604800]";
  for (const char* text : {"inf", "-inf", "nan", "infinity"}) {
    const auto m = timeout_error(text);
    EXPECT_NE(m.find(fmt::format("MCR_TIMEOUT='{}' is not finite", text)), std::string::npos) << m;
    EXPECT_NE(m.find(rule), std::string::npos) << m;
  }
  EXPECT_NE(timeout_error("1e10").find("MCR_TIMEOUT='1e10' exceeds 1 week"), std::string::npos);
  EXPECT_NE(timeout_error("604800.5").find("exceeds 1 week"), std::string::npos);
  EXPECT_NE(timeout_error("1e999").find("MCR_TIMEOUT='1e999' is out of range"), std::string::npos);
  EXPECT_NE(timeout_error("0.0001").find("MCR_TIMEOUT='0.0001' is below 1 ms"), std::string::npos);
  EXPECT_NE(timeout_error("0").find("MCR_TIMEOUT='0' is not positive"), std::string::npos);
  EXPECT_NE(timeout_error("-3").find("MCR_TIMEOUT='-3' is not positive"), std::string::npos);
  for (const char* text : {"", "abc", "10s", " 5", "5 ", "0x10", "+5"}) {
    const auto m = timeout_error(text);
    EXPECT_NE(m.find(fmt::format("MCR_TIMEOUT='{}' is not a number", text)), std::string::npos)
        << text << ": " << m;
  }
}

TEST(Timeout, EnvAndInitOptions) {
  {
    Env env;
    env.set("MCR_TIMEOUT", "2.5");
    EXPECT_EQ(read_init_inputs({}).timeout, 2500ms);
    InitOptions o;
    o.timeout = 7s;  // the option wins over the variable
    EXPECT_EQ(read_init_inputs(o).timeout, 7000ms);
  }
  EXPECT_EQ(read_init_inputs({}).timeout, kDefaultTimeout);
  {
    Env env;
    env.set("MCR_TIMEOUT", "inf");
    EXPECT_NE(error_of([] { (void)read_init_inputs({}); }).find("MCR_TIMEOUT='inf'"),
              std::string::npos);
  }
  InitOptions negative;
  negative.timeout = -5ms;
  EXPECT_NE(
      error_of([&] { (void)read_init_inputs(negative); }).find("InitOptions::timeout = -5 ms"),
      std::string::npos);
  InitOptions huge;
  huge.timeout = kMaxTimeout + 1ms;
  EXPECT_NE(error_of([&] { (void)read_init_inputs(huge); }).find("1 week"), std::string::npos);
}

TEST(BackendList, SplitTrimsAndKeepsEmptyItems) {
  EXPECT_EQ(split_backend_list(" gloo , mpi"), (std::vector<std::string>{"gloo", "mpi"}));
  EXPECT_EQ(split_backend_list("mpi,,gloo"), (std::vector<std::string>{"mpi", "", "gloo"}));
}

TEST(BackendList, RejectsEmptyUnknownUncompiledAndRepeatedNames) {
  ASSERT_FALSE(compiled_backends().empty());
  const std::string built(compiled_backends().front().name);
  EXPECT_NO_THROW(check_backend_list({built}, "MCR_BACKENDS"));
  auto m = error_of([&] { check_backend_list({built, ""}, "MCR_BACKENDS='x,'"); });
  EXPECT_NE(m.find("MCR_BACKENDS='x,': item 2 is empty"), std::string::npos) << m;
  m = error_of([] { check_backend_list({"glo"}, "MCR_BACKENDS"); });
  EXPECT_NE(m.find("unknown backend 'glo' (known backends: nccl, mpi, gloo, hier)"),
            std::string::npos)
      << m;
  m = error_of([&] { check_backend_list({built, built}, "MCR_BACKENDS"); });
  EXPECT_NE(m.find(fmt::format("backend '{}' is listed twice", built)), std::string::npos) << m;
  for (const auto& name : backend_names()) {
    bool compiled = false;
    for (const auto& f : compiled_backends())
      compiled = compiled || f.name == name;
    if (compiled || name == "hier") continue;  // hier, composed of the others, is always built
    m = error_of([&] { check_backend_list({name}, "MCR_BACKENDS"); });
    EXPECT_NE(m.find(fmt::format("backend '{}' is not compiled into this build", name)),
              std::string::npos)
        << m;
  }
  Env env;
  env.set("MCR_BACKENDS", "glo");
  m = error_of([] { (void)read_init_inputs({}); });
  EXPECT_NE(m.find("MCR_BACKENDS='glo': unknown backend 'glo'"), std::string::npos) << m;
}

TEST(InitInputs, RulesErrorsNameTheVariableAndTheRule) {
  {
    Env env;
    env.set("MCR_RULES", "all_reduce:0-64K=mpi;all_reduce:*=glo");
    const auto m = error_of([] { (void)read_init_inputs({}); });
    EXPECT_NE(m.find("MCR_RULES: rule #2 'all_reduce:*=glo': unknown backend 'glo'"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("known backends: nccl, mpi, gloo"), std::string::npos) << m;
    EXPECT_NE(m.find("compiled into this build"), std::string::npos) << m;
  }
  {
    InitOptions o;
    o.rules = "all_reduce:-=mpi;*:64Q=gloo";
    const auto m = error_of([&] { (void)read_init_inputs(o); });
    EXPECT_NE(m.find("InitOptions::rules: rule #2 '*:64Q=gloo'"), std::string::npos) << m;
  }
  {
    const auto path = write_temp("rules_bad.json", R"({"rules": [{"op": "all_reduce",
        "min_bytes": -5, "backend": "mpi"}]})");
    Env env;
    env.set("MCR_RULES_FILE", path);
    const auto m = error_of([] { (void)read_init_inputs({}); });
    EXPECT_NE(m.find(fmt::format("MCR_RULES_FILE='{}': rules[0]", path)), std::string::npos) << m;
    EXPECT_NE(m.find("min_bytes -5 is negative"), std::string::npos) << m;
  }
  {
    Env env;
    env.set("MCR_RULES_FILE", "/nonexistent/rules.json");
    const auto m = error_of([] { (void)read_init_inputs({}); });
    EXPECT_NE(m.find("MCR_RULES_FILE='/nonexistent/rules.json': the rules file cannot be opened"),
              std::string::npos)
        << m;
  }
  // A backend mcr knows but this build or process may lack is a valid rule.
  Env env;
  env.set("MCR_RULES", "all_reduce:*=nccl;broadcast:0-1M=gloo");
  const auto in = read_init_inputs({});
  EXPECT_EQ(in.rules->canonical(), "all_reduce:*=nccl;broadcast:0-1M=gloo");
}

TEST(InitInputs, TuningTableIsValidatedAtLoad) {
  const auto path = write_temp("table_gap.json", R"({"format": "mcr-tuning", "version": 1,
      "entries": [{"op": "all_reduce", "ranges": [{"min_bytes": 0, "max_bytes": 99, "backend": "mpi"},
                                                  {"min_bytes": 200, "max_bytes": null, "backend": "gloo"}]}]})");
  Env env;
  env.set("MCR_TUNING", path);
  const auto m = error_of([] { (void)read_init_inputs({}); });
  EXPECT_NE(m.find(fmt::format("MCR_TUNING: tuning table '{}' is invalid (1 problem", path)),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("entries[0] (all_reduce, dtype_class any, group_size 0): gap: bytes [100, 199]"),
            std::string::npos)
      << m;
  InitOptions o;
  o.tuning_file = "/nonexistent/table.json";
  EXPECT_NE(error_of([&] { (void)read_init_inputs(o); })
                .find("InitOptions::tuning_file: tuning table '/nonexistent/table.json' cannot be "
                      "opened"),
            std::string::npos);
}

TEST(ConfigDigest, RanksAndDifferencesAreNamed) {
  EXPECT_EQ(format_ranks({0}), "0");
  EXPECT_EQ(format_ranks({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  InitInputs a;
  a.rules = std::make_shared<RuleSet>(RuleSet::parse("all_reduce:*=mpi"));
  a.backends = {"mpi", "gloo"};
  InitInputs b = a;
  b.backends = {"gloo"};
  const auto da = make_config_digest(a, {"mpi", "gloo"});
  const auto db = make_config_digest(b, {"gloo"});
  EXPECT_EQ(describe_differences({da, da, da}), "");
  const auto m = describe_differences({da, db, da, da});
  EXPECT_NE(m.find("MCR_BACKENDS / InitOptions::backends differs: ranks 0,2-3 have 'mpi,gloo', "
                   "rank 1 has 'gloo'"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("backends usable here differs"), std::string::npos) << m;
  EXPECT_EQ(m.find("selection rules"), std::string::npos) << m;
  // A table differs by content hash; where it does, its file is shown.
  auto table = std::make_shared<TuningTable>();
  table->entries.push_back({OpType::all_reduce, "any", 0, {{0, kMaxBytes, "mpi"}}});
  InitInputs t = a;
  t.table = table;
  t.table_source = "/tmp/t.json";
  const auto dt = make_config_digest(t, {"mpi", "gloo"});
  const auto mt = describe_differences({da, dt});
  EXPECT_NE(mt.find("tuning table (MCR_TUNING) differs: rank 0 has '(none)', rank 1 has 'hash "),
            std::string::npos)
      << mt;
  EXPECT_NE(mt.find("from /tmp/t.json'"), std::string::npos) << mt;
}
