// ninfer-serve's command line.
#pragma once

#include <CLI/CLI.hpp>

#include "http_server.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include "ninfer/models/model_setup.hpp"

namespace ninfer::tools {

struct ServeOptions {
  std::string manifest;   // positional MANIFEST
  std::string checkpoint; // --checkpoint DIR (implicit manifest)
  std::string host = "127.0.0.1";
  int port = 8000;
  int32_t max_concurrency = 4;      // model slots: sequences decoded together
  int64_t max_pending_requests = 64; // waiting for a slot; more get HTTP 429
  int64_t pending_timeout_ms = 0;    // a request waiting longer gets HTTP 503; 0: no limit
  std::optional<int32_t> prefill_chunk;
  std::optional<int32_t> mixed_chunk; // default: the manifest's, else the model's cost rule
  std::optional<int64_t> max_context;
  std::optional<double> memory_limit;     // --memory-limit GIB
  std::optional<std::string> kv_capacity; // --kv-capacity auto|TOKENS
  SpecOverrides spec; // --spec none|mtp, --draft-tokens K, --draft-vocab N
  bool no_cuda_graph = false;
  bool no_prefix_cache = false;
  bool no_warm_up = false; // --no-warm-up: no prompt passes at load (a GPU device runs them)
  // --prefix-states N: Gated DeltaNet state copies the prefix cache keeps (unset: 2 per slot);
  // --prefix-state-tokens N: one every N prompt positions besides each prompt's end.
  std::optional<int32_t> prefix_states;
  int64_t prefix_state_tokens = 2048;
  double host_cache_gib = 0; // --host-cache-gib: the prefix cache's host tier
  std::string api_key;              // empty: no authentication
  std::string request_log;          // --request-log FILE: one JSON line per request
  std::string device = "auto";
  std::string plugin_dir;
  std::string plugin;
  std::optional<std::string> dtype;
  std::optional<std::string> kv_dtype;
  std::optional<int> threads;       // the CPU plugin's
  std::string served_model_name;    // default: the manifest's name
  HttpLimits http;                  // connection budget, deadlines and size limits
  bool verbose = false;
};

void add_serve_options(CLI::App& app, ServeOptions& o);
// Checks the flags before anything loads (UsageError) and applies --threads.
void check_serve_options(const ServeOptions& o);

} // namespace ninfer::tools
