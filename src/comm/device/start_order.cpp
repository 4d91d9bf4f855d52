#include "device/start_order.hpp"

#include <algorithm>

#include "mcr/errors.hpp"

namespace mcr::detail::device {

std::shared_ptr<StartOrder::Ticket> StartOrder::enqueue(Ready ready, Start start) {
  auto ticket = std::make_shared<Ticket>(std::move(ready), std::move(start));
  std::lock_guard lock(mutex_);
  waiting_.push_back(ticket);
  return ticket;
}

void StartOrder::advance() {
  std::lock_guard lock(mutex_);
  while (!waiting_.empty()) {
    Ticket& t = *waiting_.front();
    try {
      if (t.ready_ && !t.ready_()) return;
      t.op_ = t.start_();
    } catch (...) {
      // This rank will not run it; the ones behind it still start in their order, and its owner
      // learns why from collect().
      t.error_ = std::current_exception();
    }
    t.left_queue_ = true;
    t.ready_ = nullptr;  // they may hold what only the queue should keep alive
    t.start_ = nullptr;
    waiting_.pop_front();
  }
}

bool StartOrder::collect(Ticket& ticket, std::unique_ptr<PendingOp>& op) {
  std::lock_guard lock(mutex_);
  if (!ticket.left_queue_) return false;
  if (ticket.error_) std::rethrow_exception(ticket.error_);
  if (!ticket.collected_) {
    op = std::move(ticket.op_);
    ticket.collected_ = true;
  }
  return true;
}

void StartOrder::cancel(Ticket& ticket) noexcept {
  std::lock_guard lock(mutex_);
  std::erase_if(waiting_, [&](const std::shared_ptr<Ticket>& t) { return t.get() == &ticket; });
  ticket.ready_ = nullptr;
  ticket.start_ = nullptr;
}

void StartOrder::close(const char* why) noexcept {
  std::lock_guard lock(mutex_);
  for (auto& t : waiting_) {
    t->error_ = std::make_exception_ptr(BackendError(why));
    t->left_queue_ = true;
    t->ready_ = nullptr;
    t->start_ = nullptr;
  }
  waiting_.clear();
}

bool StartOrder::idle() {
  std::lock_guard lock(mutex_);
  return waiting_.empty();
}

}  // namespace mcr::detail::device
