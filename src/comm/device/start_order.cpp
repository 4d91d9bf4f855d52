#include "device/start_order.hpp"

#include <algorithm>
#include <exception>
#include <string>

#include "mcr/errors.hpp"

namespace mcr::detail::device {

namespace {

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown error";
  }
}

}  // namespace

std::shared_ptr<StartOrder::Ticket> StartOrder::enqueue(Ready ready, Start start) {
  auto ticket = std::make_shared<Ticket>(std::move(ready), std::move(start));
  std::lock_guard lock(mutex_);
  if (!broken_.empty()) {
    ticket->error_ = std::make_exception_ptr(BackendError(broken_));
    ticket->left_queue_ = true;
    ticket->ready_ = nullptr;
    ticket->start_ = nullptr;
    return ticket;
  }
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
      // This rank will not run it, and its owner learns why from collect(); the peers may have
      // started it, so none behind it may start in its place.
      t.error_ = std::current_exception();
    }
    t.left_queue_ = true;
    t.ready_ = nullptr;  // they may hold what only the queue should keep alive
    t.start_ = nullptr;
    const std::exception_ptr failed = t.error_;
    waiting_.pop_front();
    if (failed)
      break_order_from(0, "an operation called before it did not start: " + what_of(failed));
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
  const auto it =
      std::find_if(waiting_.begin(), waiting_.end(),
                   [&](const std::shared_ptr<Ticket>& t) { return t.get() == &ticket; });
  ticket.ready_ = nullptr;
  ticket.start_ = nullptr;
  if (it == waiting_.end()) return;  // started, failed or cancelled before
  const auto position = static_cast<std::size_t>(it - waiting_.begin());
  waiting_.erase(it);
  break_order_from(position,
                   "an operation called before it was given up before it started (it timed out, "
                   "or its owner went away)");
}

void StartOrder::break_order_from(std::size_t from, const std::string& why) noexcept {
  try {
    if (broken_.empty()) {
      broken_ = "not started: " + why +
                "; the peers may have started that one, and this one would have been matched "
                "with it";
    }
    const auto error = std::make_exception_ptr(BackendError(broken_));
    for (std::size_t i = from; i < waiting_.size(); ++i) {
      Ticket& t = *waiting_[i];
      t.error_ = error;
      t.left_queue_ = true;
      t.ready_ = nullptr;
      t.start_ = nullptr;
    }
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(from), waiting_.end());
  } catch (...) {  // out of memory: the tickets stay waiting, and time out at their owners
  }
}

void StartOrder::throw_if_broken_locked() const {
  if (!broken_.empty()) throw BackendError(broken_);
}

void StartOrder::throw_if_broken() {
  std::lock_guard lock(mutex_);
  throw_if_broken_locked();
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
