// ninfer-serve: an OpenAI-compatible HTTP server (docs/serving.md) on one model, with
// continuous batching across --max-concurrency sequences. SIGINT / SIGTERM stop accepting,
// let the requests in flight finish (a second signal cancels them), and exit 0.
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <thread>
#include <vector>

#include "http_routes.hpp"
#include "http_server.hpp"
#include "metrics.hpp"
#include "request_log.hpp"
#include "loaded_model.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/serving/engine.hpp"
#include "ninfer/serving/warm_up.hpp"
#include "serve_options.hpp"
#include "tool_cli.hpp"

namespace {

using namespace ninfer;

// Signals are taken by one thread with sigwait, so stopping the server runs in ordinary code
// rather than in a signal handler. They must be blocked before any other thread starts.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1); // sent by main itself when the server ends on its own
  return set;
}

int serve(const tools::ServeOptions& o) {
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  tools::LoadedModel model = tools::load_model(o);
  if (!o.no_warm_up && model.backend->device().kind != NINFER_DEVICE_CPU) {
    const CausalLM& lm = *model.lm;
    const int64_t most = std::min<int64_t>({lm.options().prefill_chunk, lm.options().max_context - 1,
                                            lm.kv_blocks_total() * lm.kv_block_tokens()});
    const std::vector<int64_t> counts = serving::warm_up_counts(most);
    spdlog::info("warm-up: {} prompt passes of 1 to {} tokens, one per row bucket (--no-warm-up skips them)",
                 counts.size(), counts.empty() ? 0 : counts.back());
    const serving::WarmUp w = serving::warm_up(*model.lm, 0, most);
    spdlog::info("warm-up: {} tokens in {:.2f} s", w.tokens, w.seconds);
  }
  std::optional<tools::RequestLog> request_log;
  if (!o.request_log.empty()) request_log.emplace(o.request_log);
  serving::EngineOptions eo;
  eo.max_pending = o.max_pending_requests;
  eo.pending_timeout = std::chrono::milliseconds(o.pending_timeout_ms);
  eo.prefix_cache = !o.no_prefix_cache;
  eo.prefix_state_interval = o.prefix_state_tokens;
  eo.host_cache_bytes = static_cast<size_t>(o.host_cache_gib * double(size_t{1} << 30));
  tools::ServerMetrics metrics;
  eo.on_finish = [&request_log, &metrics](const serving::ServeResult& r) {
    metrics.record(r);
    if (request_log) request_log->write(r);
  };
  serving::Engine engine(*model.lm, model.tok(), eo);
  if (const serving::EngineLoad l = engine.load(); l.host.bytes)
    spdlog::info("prefix cache host tier: {} of host memory for {} KV blocks and {} state copies; restores at {:.1f} "
                 "GB/s (measured)",
                 format_bytes(l.host.bytes), l.host.block_room, l.host.state_room, l.host_restore_bytes_per_s / 1e9);

  // Replies are moved along on a few workers (the engine notifies from its scheduler thread).
  boost::asio::thread_pool workers(2);
  const auto defer = [&workers](std::function<void()> task) { boost::asio::post(workers, std::move(task)); };
  tools::Drain drain;
  tools::Routes routes(model, engine, drain, metrics, o.api_key, defer);
  auto server = std::make_unique<tools::HttpServer>(
      o.http, [&routes](const tools::HttpRequest& req, std::shared_ptr<tools::Exchange> ex) { routes.handle(req, ex); });
  const int port = server->listen(o.host, o.port);
  fmt::print(stderr, "ninfer-serve: serving '{}' on http://{}:{} ({} slots, context {})\n", model.name, o.host, port,
             o.max_concurrency, engine.max_context());

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGUSR1) {
      spdlog::info("signal {}: finishing the requests in flight (signal again to cancel them)", sig);
      drain.start();
      const timespec tick{0, 50'000'000};
      while (!drain.wait_idle(std::chrono::milliseconds(50)))
        if (sigtimedwait(&signals, nullptr, &tick) > 0) {
          spdlog::info("second signal: cancelling the requests in flight");
          engine.shutdown(true);
        }
    }
    // Every reply in flight has been written whole (a request leaves the drain after its
    // last byte): closing the connections now loses nothing.
    server->stop();
  });
  server->run(); // returns after stop()
  pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
  engine.shutdown(false);
  workers.join();
  server.reset();
  fmt::print(stderr, "ninfer-serve: stopped\n");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  tools::ServeOptions o;
  CLI::App app{"ninfer-serve: OpenAI-compatible HTTP server for a Qwen3 / Qwen3.5 model"};
  app.footer("Examples:\n  ninfer-serve models/qwen3-8b.yaml --port 8000 --max-concurrency 8\n"
             "  curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\\n"
             "    -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}'");
  tools::add_serve_options(app, o);
  tools::add_version_flag(app, "ninfer-serve");
  if (auto rc = tools::parse_command_line(app, argc, argv, "ninfer-serve")) return *rc;
  init_logging(o.verbose);
  return tools::run_tool("ninfer-serve", [&] {
    tools::check_serve_options(o);
    return serve(o);
  });
}
