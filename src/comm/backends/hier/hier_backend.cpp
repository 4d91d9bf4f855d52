#include "hier_backend.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/kept.hpp"
#include "core/state.hpp"
#include "hier_compose.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"
#include "select/selector.hpp"

namespace mcr::detail {

GroupTopology hier_view(const GroupTopology& real, int size, const HierConfig& config) {
  const int n = config.simulate_ranks_per_host;
  if (n <= 0) return real;
  GroupTopology t;
  t.hosts = (size + n - 1) / n;
  t.ranks_per_host = size % n == 0 ? n : 0;
  for (int r = 0; r < size; ++r) {
    t.host_of_member.push_back(r / n);
    t.local_index.push_back(r % n);
  }
  return t;
}

std::string hier_unusable_reason(const GroupTopology& view) {
  if (view.hosts <= 1) return "the communicator spans one host: nothing to compose";
  if (!view.uniform()) {
    std::map<int, int> per_host;
    for (const int h : view.host_of_member)
      ++per_host[h];
    std::string counts;
    for (const auto& [h, n] : per_host)
      counts += fmt::format("{}{}", counts.empty() ? "" : " + ", n);
    return fmt::format(
        "its hosts hold different numbers of its ranks ({}): hier needs the same number on every "
        "host",
        counts);
  }
  if (view.ranks_per_host == 1) return "one rank per host: nothing to compose within a host";
  return {};
}

namespace {

// Between hosts, where no rule or tuning entry decides, large steps go to Gloo: over TCP its
// ring beats Open MPI's choice for the 2-rank all_reduce that dominates a composed all_reduce
// (docs/performance/bench-and-tuning.md#hier-steps-between-hosts). Smaller steps keep the default
// priority (MPI's latency is the lower one).
constexpr std::size_t kInterGlooFrom = std::size_t{1} << 20;
constexpr const char* kInterGlooWhy =
    "hier's default between hosts where no rule or tuning entry decides: Gloo's ring over TCP "
    "from 1 MiB";

// Composed operations given up with steps in flight (a timeout, a failed step). A peer that
// arrives later still matches those steps, and the libraries write into the operation's scratch
// (and read what was copied there) whenever that happens; the steps' Work handles also keep their
// sub-communicators from being destroyed, which would wait for steps that may never complete. So
// they are kept until the process exits: at most the queue of one communicator, which composes
// nothing more afterwards.
void keep_queue_until_exit(std::deque<std::shared_ptr<ComposedOp>>& queue) noexcept {
  for (auto& op : queue)
    keep_until_exit(std::move(op));
  queue.clear();
}

class HierBackend;

class HierPending final : public PendingOp {
 public:
  HierPending(HierBackend& b, std::shared_ptr<ComposedOp> op) : b_(b), op_(std::move(op)) {}
  bool test() override;
  void abandon() noexcept override;

 private:
  HierBackend& b_;
  std::shared_ptr<ComposedOp> op_;
};

class HierBackend final : public Backend {
 public:
  HierBackend(CommState& parent, std::vector<Backend*> flat, HierConfig config, GroupTopology view)
      : parent_(parent),
        flat_(std::move(flat)),
        config_(std::move(config)),
        view_(std::move(view)) {}
  ~HierBackend() override = default;
  HierBackend(const HierBackend&) = delete;
  HierBackend& operator=(const HierBackend&) = delete;

  bool composes() const noexcept override { return true; }
  bool busy_composing() const noexcept override { return !queue_.empty(); }

  std::string_view name() const noexcept override { return kHierBackend; }
  int rank() const noexcept override { return parent_.rank; }
  int size() const noexcept override { return parent_.size; }

  Support supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const override {
    if (device != Device::Kind::cpu) return Support::no("hier composes host buffers only");
    const auto steps = composed_steps(op);
    if (steps.empty()) {
      return Support::no(
          "hier composes all_reduce, all_gather, reduce_scatter, broadcast and reduce only; "
          "send, recv and the other operations fall through to a flat backend");
    }
    for (const StepOp& s : steps) {
      const std::string& fixed = s.intra ? config_.intra : config_.inter;
      const char* where = s.intra ? "intra" : "inter";
      const ReduceOp r = is_reduction(s.op) ? reduce : ReduceOp::sum;
      if (!fixed.empty()) {
        const Backend* b = find(fixed);
        if (b == nullptr) {
          return no(fmt::format("MCR_HIER {}={}: that backend is not usable on this communicator",
                                where, fixed));
        }
        if (Support ok = b->supports(s.op, dtype, r, device); !ok.ok) {
          return no(fmt::format("MCR_HIER {}={} cannot run its {} step: {}", where, fixed,
                                to_string(s.op), ok.why));
        }
        continue;
      }
      bool any = false;
      for (const Backend* b : flat_)
        any = any || b->supports(s.op, dtype, r, device).ok;
      if (!any) {
        return no(fmt::format("no backend can run its {} step {}", to_string(s.op),
                              s.intra ? "within a host" : "between hosts"));
      }
    }
    return Support::yes("composed");
  }

  std::unique_ptr<PendingOp> start(const OpArgs& args) override {
    if (!broken_.empty()) throw Error(broken_);
    std::shared_ptr<ComposedOp> op = compose(*layout_, args);
    if (op->steps.empty()) return nullptr;
    // Synchronous or not, the steps run asynchronously behind the operations queued before, and
    // the caller's wait (or a later one) advances them through progress().
    queue_.push_back(op);
    advance();
    return std::make_unique<HierPending>(*this, std::move(op));
  }

  std::vector<HierStep> explain_steps(OpType op, DType dtype, std::size_t bytes,
                                      ReduceOp reduce) const override {
    if (!layout_) return {};
    std::vector<HierStep> steps = hier_steps(op, dtype, bytes, layout_->per_host);
    for (HierStep& s : steps) {
      const std::string& fixed = s.within_host ? config_.intra : config_.inter;
      if (!fixed.empty()) {
        s.backend = fixed;
        s.source = "MCR_HIER";
        s.reason = fmt::format("MCR_HIER {}={}", s.within_host ? "intra" : "inter", fixed);
        continue;
      }
      // As the step is issued: on its sub-communicator, in the asynchronous form.
      const Communicator& c = s.within_host ? layout_->intra : layout_->inter;
      const ReduceOp r = is_reduction(s.op) ? reduce : ReduceOp::sum;
      const Selection sel = c.explain(s.op, dtype, s.bytes, r, Device::cpu(), CallForm::async);
      s.backend = sel.backend;
      s.source = sel.source;
      for (const auto& st : sel.steps) {
        if (st.chosen) s.reason = st.reason;
      }
    }
    return steps;
  }

  bool needs_host_progress() const noexcept override { return true; }
  void progress() override { advance(); }

  std::unique_ptr<Backend> split(const std::vector<int>& members, std::uint64_t) override {
    (void)members;  // a sub-communicator gets a hier of its own when its hosts allow one
    return nullptr;
  }

  /// Advances the queued operations without blocking. Steps are issued in one global order, the
  /// same on every rank: every step of composed operation k before any of k + 1, each operation's
  /// steps in list order (a step once the steps it depends on have completed). So consecutive
  /// operations overlap (k + 1 starts while k's last steps are in flight, as MPI's nonblocking
  /// collectives progress side by side), and every sub-communicator still sees its operations
  /// in the same order on every member. Completions may come in any order.
  void advance() {
    if (advancing_) return;  // a sub-operation's poll progresses every backend, this one too
    advancing_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{advancing_};
    bool earlier_issued = true;  // every step of the operations before this one is issued
    for (std::size_t q = 0; q < queue_.size(); ++q) {
      ComposedOp& op = *queue_[q];
      try {
        if (drive(op, earlier_issued)) op.done = true;
      } catch (...) {
        fail_all(q, std::current_exception());
        return;
      }
      earlier_issued = earlier_issued && op.next == op.steps.size();
    }
    std::erase_if(queue_, [](const std::shared_ptr<ComposedOp>& op) { return op->done; });
  }

  // Collective over the parent: splits off the "my host" and "same local index"
  // sub-communicators and keeps them.
  void finish_creation() override;

  void abandon() noexcept {
    if (broken_.empty()) {
      broken_ =
          "hier: an earlier composed operation timed out; its sub-operations may still be "
          "matched by peers, so this communicator composes nothing more";
    }
    for (auto& op : queue_) {
      if (!op->error) op->error = std::make_exception_ptr(Error(broken_));
    }
    keep_queue_until_exit(queue_);
  }

 private:
  Support no(std::string why) const {
    return Support::no(*reasons_.insert(std::move(why)).first);  // stable storage for the view
  }
  const Backend* find(std::string_view name) const {
    for (const Backend* b : flat_) {
      if (b->name() == name) return b;
    }
    return nullptr;
  }

  /// Completes what finished and, when `may_issue`, issues what is ready. True when every step
  /// of `op` has completed.
  static bool drive(ComposedOp& op, bool may_issue) {
    const std::size_t n = op.steps.size();
    if (op.finished.size() != n) {
      op.finished.assign(n, 0);
      op.works.resize(n);
    }
    auto ready = [&](std::size_t i) {
      const ComposedStep& s = op.steps[i];
      if (!s.explicit_after) return i == 0 || op.finished[i - 1] != 0;
      return std::all_of(s.after.begin(), s.after.end(),
                         [&](std::size_t d) { return op.finished[d] != 0; });
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t i = 0; i < op.next; ++i) {
        if (op.finished[i] == 0 && op.works[i].test()) {
          op.finished[i] = 1;
          op.works[i] = Work();
          changed = true;
        }
      }
      while (may_issue && op.next < n && ready(op.next)) {
        ComposedStep& s = op.steps[op.next];
        if (s.local) {
          s.local();
          op.finished[op.next] = 1;
        } else {
          op.works[op.next] = s.issue();
        }
        ++op.next;
        changed = true;
      }
    }
    return op.next == n &&
           std::all_of(op.finished.begin(), op.finished.end(), [](char f) { return f != 0; });
  }

  // Operation `failed` raised: it gets that error, every other queued one the broken state (their
  // sub-operations may be out of step with the peers'), except one that completed in this same
  // advance: its result is whole, and its Work reports success.
  void fail_all(std::size_t failed, const std::exception_ptr& e) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {  // NOLINT(bugprone-empty-catch): keep the default text
    }
    broken_ = fmt::format("hier: an earlier composed operation failed: {}", what);
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      if (i != failed && queue_[i]->done) continue;
      queue_[i]->error = i == failed ? e : std::make_exception_ptr(Error(broken_));
    }
    keep_queue_until_exit(queue_);
  }

  CommState& parent_;
  std::vector<Backend*> flat_;
  HierConfig config_;
  GroupTopology view_;
  std::unique_ptr<HierLayout> layout_;
  std::deque<std::shared_ptr<ComposedOp>> queue_;
  bool advancing_ = false;
  std::string broken_;
  mutable std::set<std::string> reasons_;
};

void HierBackend::finish_creation() {
  auto layout = std::make_unique<HierLayout>();
  layout->hosts = view_.hosts;
  layout->per_host = view_.ranks_per_host;
  const auto me = static_cast<std::size_t>(parent_.rank);
  layout->host = view_.host_of_member[me];
  layout->local = view_.local_index[me];
  layout->rank_at.assign(static_cast<std::size_t>(view_.hosts * view_.ranks_per_host), -1);
  for (std::size_t r = 0; r < view_.host_of_member.size(); ++r) {
    layout->rank_at[static_cast<std::size_t>(view_.host_of_member[r] * view_.ranks_per_host +
                                             view_.local_index[r])] = static_cast<int>(r);
  }
  layout->intra_backend = config_.intra;
  layout->inter_backend = config_.inter;
  Communicator parent(parent_.shared_from_this());
  layout->intra = parent.split(layout->host, layout->local);
  layout->inter = parent.split(layout->local, layout->host);
  for (Communicator* c : {&layout->intra, &layout->inter}) {
    // The parent verifies and observes the composed operation itself; its sub-operations follow
    // from it on every rank alike.
    if (c->verifying()) c->set_verify(false);
    c->set_observer(nullptr);
  }
  if (config_.inter.empty() && find("gloo") != nullptr) {
    state_of(layout->inter)
        .selector->set_presets(
            RuleSet{{Rule{std::nullopt, std::nullopt, kInterGlooFrom, kMaxBytes, "gloo"}}},
            kInterGlooWhy);
  }
  layout_ = std::move(layout);
}

bool HierPending::test() {
  b_.advance();
  if (op_->error) std::rethrow_exception(op_->error);
  return op_->done;
}

void HierPending::abandon() noexcept {
  b_.abandon();
}

}  // namespace

ComposedBackendFactory hier_composed_factory() {
  return {
      .name = kHierBackend,
      .config_source = "MCR_HIER",
      .read_config = [] { return read_hier_config().canonical(); },
      .create = [](CommState& comm, std::vector<Backend*> flat, const std::string& config,
                   std::string& why) -> std::unique_ptr<Backend> {
        HierConfig c = parse_hier_config(config, "MCR_HIER");
        GroupTopology view = hier_view(comm.topology, comm.size, c);
        why = hier_unusable_reason(view);
        if (!why.empty()) return nullptr;
        return std::make_unique<HierBackend>(comm, std::move(flat), std::move(c), std::move(view));
      },
  };
}

}  // namespace mcr::detail
