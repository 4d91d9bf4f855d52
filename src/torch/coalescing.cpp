// Coalescing: startCoalescing()/endCoalescing() around operations torch issues as one batch
// (_coalescing_manager, batch_isend_irecv), and the *_tensor_coalesced collectives that functional
// collectives and DTensor use even for one tensor. Each operation of a batch is posted as it comes
// (so that a receive never waits for the batch's end); the Work of the batch completes when all of
// them have, with the first error.
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "process_group.hpp"
#include "tensors.hpp"

namespace mcr::torch_ext {
namespace {

// What a combined Work waits for: how many parts are left and the first error among them.
struct Parts {
  std::atomic<std::size_t> left{0};
  std::mutex mu;
  std::exception_ptr first_error;
};

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::combine(
    c10d::OpType type, std::vector<c10::intrusive_ptr<c10d::Work>> works, bool keep_outputs) {
  std::vector<at::Tensor> outputs;
  for (const auto& w : works) {
    if (!keep_outputs) break;
    for (auto& t : w->result())
      outputs.push_back(t);
  }
  auto all = c10::make_intrusive<WorkMCR>(rank_, type, std::move(outputs), spin_wait_);
  if (works.empty()) {
    all->complete(nullptr);
    return all;
  }
  auto parts = std::make_shared<Parts>();
  parts->left.store(works.size());
  for (const auto& w : works) {
    // Runs at once when the part already completed, else on the thread that completes it.
    w->getFuture()->addCallback([parts, all](c10::ivalue::Future& f) {
      if (f.hasError()) {
        std::lock_guard lock(parts->mu);
        if (!parts->first_error) parts->first_error = f.exception_ptr();
      }
      if (parts->left.fetch_sub(1) == 1) {
        std::exception_ptr error;
        {
          std::lock_guard lock(parts->mu);
          error = parts->first_error;
        }
        all->complete(error);
      }
    });
  }
  return all;
}

// A batch still open here was abandoned: torch's _coalescing_manager ends a batch only when its
// block finishes without an exception (no `finally`), so one raised inside it (a bad peer in
// batch_isend_irecv, say) leaves the batch open on this group. Its operations were posted as they
// came and complete on their own; only the Work that would have covered them is never made. So a
// new batch replaces it, as NCCL's process group carries on, instead of refusing every later batch
// on this group.
void ProcessGroupMCR::startCoalescing() {
  std::lock_guard lock(coalescing_mu_);
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::endCoalescing() {
  std::vector<c10::intrusive_ptr<c10d::Work>> batch;
  {
    std::lock_guard lock(coalescing_mu_);
    TORCH_CHECK(coalescing_,
                "mcr endCoalescing: no coalescing batch is open on this group (batches on one "
                "group do not nest: a second startCoalescing replaces the first)");
    coalescing_ = false;
    batch.swap(coalesced_);
  }
  return combine(c10d::OpType::COALESCED, std::move(batch));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "mcr allgather_into_tensor_coalesced: ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  if (outputs.size() == 1) return _allgather_base(outputs[0], inputs[0], opts);
  // Every pair checked before the first is posted: a bad later pair must not leave earlier ones
  // in flight with no Work to show for them.
  for (std::size_t i = 0; i < inputs.size(); ++i)
    check_allgather_pair(outputs[i], inputs[i], "allgather_into_tensor_coalesced");
  std::vector<c10::intrusive_ptr<c10d::Work>> parts;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    parts.push_back(_allgather_base(outputs[i], inputs[i], opts));
  return combine(c10d::OpType::COALESCED, std::move(parts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "mcr reduce_scatter_tensor_coalesced: ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  if (outputs.size() == 1) return _reduce_scatter_base(outputs[0], inputs[0], opts);
  for (std::size_t i = 0; i < inputs.size(); ++i)
    check_reduce_scatter_pair(outputs[i], inputs[i], opts.reduceOp,
                              "reduce_scatter_tensor_coalesced");
  std::vector<c10::intrusive_ptr<c10d::Work>> parts;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    parts.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
  return combine(c10d::OpType::COALESCED, std::move(parts));
}

}  // namespace mcr::torch_ext
