#include "ninfer/serving/request_handle.hpp"

namespace ninfer::serving {

void RequestHandle::push(StreamPiece piece) {
  {
    std::lock_guard lock(mutex_);
    pieces_.push_back(std::move(piece));
  }
  cv_.notify_all();
}

void RequestHandle::finish(ServeResult result) {
  {
    std::lock_guard lock(mutex_);
    result_ = std::move(result);
  }
  cv_.notify_all();
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
