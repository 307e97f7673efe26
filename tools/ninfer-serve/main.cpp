// ninfer-serve: an OpenAI-compatible HTTP server (docs/serving.md) on one model, with
// continuous batching across --max-concurrency sequences. SIGINT / SIGTERM stop accepting,
// let the requests in flight finish (a second signal cancels them), and exit 0.
#include <fmt/format.h>
#include <httplib.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

#include "http_routes.hpp"
#include "metrics.hpp"
#include "request_log.hpp"
#include "loaded_model.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/serving/engine.hpp"
#include "serve_options.hpp"

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
  std::optional<tools::RequestLog> request_log;
  if (!o.request_log.empty()) request_log.emplace(o.request_log);
  serving::EngineOptions eo;
  eo.max_pending = o.max_pending_requests;
  eo.pending_timeout = std::chrono::milliseconds(o.pending_timeout_ms);
  tools::ServerMetrics metrics;
  eo.on_finish = [&request_log, &metrics](const serving::ServeResult& r) {
    metrics.record(r);
    if (request_log) request_log->write(r);
  };
  serving::Engine engine(*model.lm, model.tok(), eo);

  httplib::Server server;
  // Every waiting or running request holds an HTTP thread (streams block on their handle).
  const size_t threads = static_cast<size_t>(o.max_concurrency + o.max_pending_requests) + 4;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  tools::Drain drain;
  tools::add_routes(server, model, engine, drain, o.api_key);
  server.Get("/metrics", [&metrics, &engine, &model](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(engine, *model.backend), "text/plain; version=0.0.4");
  });

  int port = o.port;
  if (port == 0) port = server.bind_to_any_port(o.host);
  else if (!server.bind_to_port(o.host, port)) port = -1;
  if (port < 0) throw Error(fmt::format("cannot listen on {}:{}: is the port in use? (try --port)", o.host, o.port));
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
      // A non-streamed reply is written just after its handler returns (and leaves the drain).
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    server.stop();
  });
  server.listen_after_bind(); // returns after stop(), once the in-flight requests are answered
  pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
  engine.shutdown(false);
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
  CLI11_PARSE(app, argc, argv);
  init_logging(o.verbose);
  try {
    return serve(o);
  } catch (const Error& e) {
    fmt::print(stderr, "ninfer-serve: error: {}\n", e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "ninfer-serve: internal error: {}\n", e.what());
  }
  return 1;
}
