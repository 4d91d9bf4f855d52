#include "hier_compose.hpp"

#include <algorithm>
#include <cstring>

#include "mcr/comm/info.hpp"
#include "mcr/comm/tensor.hpp"

namespace mcr::detail {

std::vector<StepOp> composed_steps(OpType op) {
  std::vector<StepOp> out;
  for (const HierStep& s : hier_steps(op, DType::f32, 0, 1))
    out.push_back({s.within_host, s.op});
  return out;
}

namespace {

// Pieces of about kPieceBytes or more, at most kMaxPieces: the intra reduce_scatter of piece
// k + 1 and the all_gather of piece k - 1 run while the inter all_reduce of piece k crosses the
// hosts. Decided from the count and dtype alone, so equal on every rank.
constexpr std::size_t kPieceBytes = std::size_t{4} << 20;
constexpr std::size_t kMaxPieces = 4;

struct AllReducePieces {
  std::size_t pieces;  // K
  std::size_t share;   // each local rank's share of a piece, in elements (c)
  std::size_t piece;   // elements per piece, padded to a multiple of L (c * L)
};
AllReducePieces all_reduce_pieces(std::size_t count, std::size_t es, std::size_t L) {
  const std::size_t K =
      std::clamp<std::size_t>(count * es / kPieceBytes, std::size_t{1}, kMaxPieces);
  const std::size_t c = (count + L * K - 1) / (L * K);
  return {K, c, c * L};
}

// Builds the steps of one operation; holds what every step needs.
class Composer {
 public:
  Composer(const HierLayout& l, const OpArgs& a)
      : l_(l), a_(a), es_(dtype_size(a.dtype)), op_(std::make_unique<ComposedOp>()) {
    intra_opts_.backend = l.intra_backend;
    intra_opts_.timeout = a.timeout;
    inter_opts_.backend = l.inter_backend;
    inter_opts_.timeout = a.timeout;
  }

  std::unique_ptr<ComposedOp> build() {
    if (a_.count == 0) return std::move(op_);  // nothing moves: complete at once on every rank
    switch (a_.op) {
      case OpType::all_reduce:
        all_reduce();
        break;
      case OpType::reduce_scatter:
        reduce_scatter();
        break;
      case OpType::all_gather:
        all_gather();
        break;
      case OpType::broadcast:
        broadcast();
        break;
      case OpType::reduce:
        reduce();
        break;
      default:
        break;  // supports() never lets another op reach here
    }
    return std::move(op_);
  }

 private:
  std::byte* scratch(std::size_t elements) {
    op_->scratch.push_back(std::make_unique_for_overwrite<std::byte[]>(elements * es_));
    return op_->scratch.back().get();
  }
  Tensor t(const void* p, std::size_t n) const {
    return Tensor(const_cast<void*>(p), n, a_.dtype);  // NOLINT: inputs are only read
  }
  void copy(void* dst, const void* src, std::size_t n) {
    const std::size_t bytes = n * es_;  // by value: the steps outlive this composer
    op_->steps.push_back({[=] { std::memcpy(dst, src, bytes); }, {}});
  }
  Communicator* intra() const { return const_cast<Communicator*>(&l_.intra); }
  Communicator* inter() const { return const_cast<Communicator*>(&l_.inter); }

  void all_reduce() {
    const auto L = static_cast<std::size_t>(l_.per_host);
    const AllReducePieces p = all_reduce_pieces(a_.count, es_, L);
    const std::size_t K = p.pieces, c = p.share, piece = p.piece;
    const std::size_t padded = piece * K;
    const void* src = a_.in;
    void* gathered = a_.out;
    std::vector<std::size_t> first;  // what the reduce_scatters wait for
    if (padded != a_.count) {
      std::byte* in = scratch(padded);
      copy(in, a_.in, a_.count);
      const std::size_t tail = (padded - a_.count) * es_, used = a_.count * es_;
      op_->steps.back().local = [copy_in = op_->steps.back().local, in, used, tail] {
        copy_in();
        std::memset(in + used, 0, tail);  // the padding is reduced too: keep it defined
      };
      first.push_back(op_->steps.size() - 1);
      src = in;
      gathered = scratch(padded);
    }
    std::byte* shares = scratch(c * K);
    const ReduceOp r = a_.reduce;
    auto* A = intra();
    auto* B = inter();
    const auto oa = intra_opts_, ob = inter_opts_;
    std::vector<std::size_t> rs(K);
    for (std::size_t k = 0; k < K; ++k) {
      const Tensor in = t(static_cast<const std::byte*>(src) + k * piece * es_, piece);
      const Tensor part = t(shares + k * c * es_, c);
      rs[k] = op_->steps.size();
      op_->steps.push_back({{}, [=] { return A->ireduce_scatter(in, part, r, oa); }, first, true});
    }
    std::vector<std::size_t> ag;
    for (std::size_t k = 0; k < K; ++k) {
      const Tensor part = t(shares + k * c * es_, c);
      const Tensor all = t(static_cast<std::byte*>(gathered) + k * piece * es_, piece);
      op_->steps.push_back({{}, [=] { return B->iall_reduce(part, r, ob); }, {rs[k]}, true});
      ag.push_back(op_->steps.size());
      op_->steps.push_back({{}, [=] { return A->iall_gather(part, all, oa); }, {}, false});
    }
    if (gathered != a_.out) {
      copy(a_.out, gathered, a_.count);
      op_->steps.back().after = ag;
      op_->steps.back().explicit_after = true;
    }
  }

  // Input block of parent rank (h, l) goes to position l * hosts + h: the intra reduce_scatter
  // then hands local rank l the blocks of every (h, l), which the inter step splits by host.
  void reduce_scatter() {
    const auto H = static_cast<std::size_t>(l_.hosts), L = static_cast<std::size_t>(l_.per_host);
    const std::size_t n = a_.count;
    std::byte* arranged = scratch(H * L * n);
    std::byte* mine = scratch(H * n);
    const auto* in = static_cast<const std::byte*>(a_.in);
    const std::vector<int> rank_at = l_.rank_at;
    const std::size_t bytes = n * es_;
    op_->steps.push_back(
        {[=] {
           for (std::size_t h = 0; h < H; ++h)
             for (std::size_t l = 0; l < L; ++l)
               std::memcpy(arranged + (l * H + h) * bytes,
                           in + static_cast<std::size_t>(rank_at[h * L + l]) * bytes, bytes);
         },
         {}});
    const ReduceOp r = a_.reduce;
    auto* A = intra();
    auto* B = inter();
    const auto oa = intra_opts_, ob = inter_opts_;
    const Tensor all = t(arranged, H * L * n), part = t(mine, H * n), out = t(a_.out, n);
    op_->steps.push_back({{}, [=] { return A->ireduce_scatter(all, part, r, oa); }});
    op_->steps.push_back({{}, [=] { return B->ireduce_scatter(part, out, r, ob); }});
  }

  void all_gather() {
    const auto H = static_cast<std::size_t>(l_.hosts), L = static_cast<std::size_t>(l_.per_host);
    const std::size_t n = a_.count;
    std::byte* by_host = scratch(H * n);
    std::byte* arranged = scratch(H * L * n);
    auto* A = intra();
    auto* B = inter();
    const auto oa = intra_opts_, ob = inter_opts_;
    const Tensor in = t(a_.in, n), part = t(by_host, H * n), all = t(arranged, H * L * n);
    op_->steps.push_back({{}, [=] { return B->iall_gather(in, part, ob); }});
    op_->steps.push_back({{}, [=] { return A->iall_gather(part, all, oa); }});
    auto* out = static_cast<std::byte*>(a_.out);
    const std::vector<int> rank_at = l_.rank_at;
    const std::size_t bytes = n * es_;
    op_->steps.push_back({[=] {
                            for (std::size_t h = 0; h < H; ++h)
                              for (std::size_t l = 0; l < L; ++l)
                                std::memcpy(
                                    out + static_cast<std::size_t>(rank_at[h * L + l]) * bytes,
                                    arranged + (l * H + h) * bytes, bytes);
                          },
                          {}});
  }

  std::pair<int, int> where(int rank) const {
    for (std::size_t i = 0; i < l_.rank_at.size(); ++i) {
      if (l_.rank_at[i] == rank) {
        return {static_cast<int>(i) / l_.per_host, static_cast<int>(i) % l_.per_host};
      }
    }
    return {0, 0};  // validation keeps roots in range
  }

  // Steps a rank does not take are skipped by every member of that step's sub-communicator alike
  // (they share the local index or the host that decides it).
  void broadcast() {
    const auto [root_host, root_local] = where(a_.root);
    const Tensor buf = t(a_.out, a_.count);
    auto* A = intra();
    auto* B = inter();
    const auto oa = intra_opts_, ob = inter_opts_;
    const int rl = root_local, rh = root_host;
    if (l_.local == root_local) {
      op_->steps.push_back({{}, [=] { return B->ibroadcast(buf, rh, ob); }});
    }
    op_->steps.push_back({{}, [=] { return A->ibroadcast(buf, rl, oa); }});
  }

  void reduce() {
    const auto [root_host, root_local] = where(a_.root);
    const std::size_t n = a_.count;
    std::byte* host_sum = scratch(n);
    const bool root =
        l_.rank_at[static_cast<std::size_t>(l_.host * l_.per_host + l_.local)] == a_.root;
    void* result = root ? a_.out : scratch(n);
    const ReduceOp r = a_.reduce;
    auto* A = intra();
    auto* B = inter();
    const auto oa = intra_opts_, ob = inter_opts_;
    const int rl = root_local, rh = root_host;
    const Tensor in = t(a_.in, n), mid = t(host_sum, n), out = t(result, n);
    op_->steps.push_back({{}, [=] { return A->ireduce(in, mid, r, rl, oa); }});
    if (l_.local == root_local) {
      op_->steps.push_back({{}, [=] { return B->ireduce(mid, out, r, rh, ob); }});
    }
  }

  const HierLayout& l_;
  const OpArgs& a_;
  std::size_t es_;
  std::unique_ptr<ComposedOp> op_;
  CallOptions intra_opts_, inter_opts_;
};

}  // namespace

std::unique_ptr<ComposedOp> compose(const HierLayout& layout, const OpArgs& args) {
  return Composer(layout, args).build();
}

}  // namespace mcr::detail

namespace mcr {

// The single description of what hier composes (composed_steps() and supports() read it too).
// The sizes follow the Composer above: all_reduce per piece (share c of L on each local rank),
// reduce_scatter and all_gather with one host's part (1/L of the total) between hosts.
std::vector<HierStep> hier_steps(OpType op, DType dtype, std::size_t bytes, int ranks_per_host) {
  const std::size_t es = dtype_size(dtype);
  const auto L = static_cast<std::size_t>(std::max(ranks_per_host, 1));
  std::vector<HierStep> out;
  auto step = [&](bool within, OpType o, std::size_t b, std::size_t times = 1) {
    HierStep s;
    s.within_host = within;
    s.op = o;
    s.bytes = b;
    s.times = static_cast<int>(times);
    out.push_back(std::move(s));
  };
  const std::size_t count = bytes / es;
  switch (op) {
    case OpType::all_reduce: {  // each host reduces a share, hosts combine shares, hosts share back
      const auto p = detail::all_reduce_pieces(count, es, L);
      step(true, OpType::reduce_scatter, p.piece * es, p.pieces);
      step(false, OpType::all_reduce, p.share * es, p.pieces);
      step(true, OpType::all_gather, p.piece * es, p.pieces);
      break;
    }
    case OpType::reduce_scatter:
      step(true, OpType::reduce_scatter, bytes);
      step(false, OpType::reduce_scatter, bytes / L);
      break;
    case OpType::all_gather:
      step(false, OpType::all_gather, bytes / L);
      step(true, OpType::all_gather, bytes);
      break;
    case OpType::broadcast:  // the root's host sends once per link, then each host fans out
      step(false, OpType::broadcast, bytes);
      step(true, OpType::broadcast, bytes);
      break;
    case OpType::reduce:
      step(true, OpType::reduce, bytes);
      step(false, OpType::reduce, bytes);
      break;
    default:
      break;
  }
  return out;
}

}  // namespace mcr
