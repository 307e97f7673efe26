#include "ninfer/serving/request_handle.hpp"

namespace ninfer::serving {

void RequestHandle::push(StreamPiece piece) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mutex_);
    pieces_.push_back(std::move(piece));
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

void RequestHandle::finish(ServeResult result) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mutex_);
    result_ = std::move(result);
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

void RequestHandle::set_notify(std::function<void()> notify) {
  {
    std::lock_guard lock(mutex_);
    notify_ = notify;
  }
  if (notify) notify();
}

std::optional<StreamPiece> RequestHandle::try_next_piece() {
  std::lock_guard lock(mutex_);
  if (pieces_.empty()) return std::nullopt;
  StreamPiece p = std::move(pieces_.front());
  pieces_.pop_front();
  return p;
}

bool RequestHandle::finished() {
  std::lock_guard lock(mutex_);
  return result_.has_value();
}

std::optional<ServeResult> RequestHandle::try_result() {
  std::lock_guard lock(mutex_);
  if (!pieces_.empty() || !result_) return std::nullopt;
  return *result_;
}

std::optional<StreamPiece> RequestHandle::next_piece() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !pieces_.empty() || result_.has_value(); });
  if (pieces_.empty()) return std::nullopt;
  StreamPiece p = std::move(pieces_.front());
  pieces_.pop_front();
  return p;
}

ServeResult RequestHandle::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return result_.has_value(); });
  return *result_;
}

std::optional<ServeResult> RequestHandle::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return result_.has_value(); })) return std::nullopt;
  return *result_;
}

} // namespace ninfer::serving
