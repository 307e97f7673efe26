#include "serve_options.hpp"

#include <fmt/format.h>

#include "ninfer/devices/device.hpp"
#include "tool_cli.hpp"

namespace ninfer::tools {

void add_serve_options(CLI::App& app, ServeOptions& o) {
  app.add_option("manifest", o.manifest, "Model manifest (YAML, see docs/manifest.md)");
  app.add_option("--checkpoint", o.checkpoint, "Hugging Face checkpoint folder (instead of a manifest)");
  app.add_option("--host", o.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "TCP port (0: any free port, printed on stderr)")->capture_default_str();
  app.add_option("--max-concurrency", o.max_concurrency, "Sequences generated at once (model slots)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--pending-timeout-ms", o.pending_timeout_ms,
                 "A request still waiting for a slot after this many ms gets HTTP 503 (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-pending-requests", o.max_pending_requests,
                 "Requests that may wait for a slot; beyond that HTTP 429")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--prefill-chunk", o.prefill_chunk, "Prompt tokens per forward pass (default: the manifest's)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--mixed-chunk", o.mixed_chunk,
                 "Prompt tokens of a step shared with decoding streams, at most --prefill-chunk (default: the "
                 "manifest's, else a cost rule keeping such a step within 1.5x a decode step)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-context", o.max_context,
                 "Tokens one sequence may hold (overrides the manifest; default: what the model supports and the "
                 "memory allows at --max-concurrency)");
  add_memory_options(app, o.memory_limit, o.kv_capacity);
  add_spec_options(app, o.spec);
  app.add_option("--spec-max-batch", o.spec.max_batch,
                 "With --spec mtp: speculative rounds only while at most N sequences decode; past that every "
                 "sequence decodes a token per step until the batch is small again (default: the manifest's "
                 "spec.max_batch; 0: no cap). Rounds verify N x (K + 1) rows per linear: where that leaves the "
                 "decode kernels (int4 weights past 8 rows) plain steps are faster (docs/speculative.md)")
      ->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}));
  app.add_flag("--no-cuda-graph", o.no_cuda_graph, "Diagnostic: launch decode kernels one by one (no CUDA graphs)");
  app.add_flag("--no-prefix-cache", o.no_prefix_cache,
               "Read every prompt whole (default: a prompt that begins with a free slot's earlier tokens, such as "
               "the next turn of a chat, or with full KV blocks an earlier request left in the prefix cache, such "
               "as a shared system prompt, reads only the rest)");
  app.add_flag("--no-warm-up", o.no_warm_up,
               "Start without the warm-up (on a GPU, default: one prompt pass at each row-count bucket up to the "
               "prefill chunk, so no request pays a library's first pick for its token count)");
  app.add_option("--prefix-states", o.prefix_states,
                 "Models with Gated DeltaNet layers: copies of one sequence's recurrent state the prefix cache keeps "
                 "(each costs that state's memory, shown in the load's memory plan), so a prompt that begins with "
                 "another slot's tokens resumes where a copy was taken (default: 2 per --max-concurrency slot; 0: "
                 "such a model reuses only a slot's own earlier tokens)")
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--prefix-state-tokens", o.prefix_state_tokens,
                 "A state copy every N prompt positions (a multiple of the KV block, 64 by default), besides one at "
                 "each prompt's last block boundary and one at the end of a chat's first message; 0: only those")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--host-cache-gib", o.host_cache_gib,
                 "Page-locked host memory the prefix cache spills evicted KV blocks (and Gated DeltaNet state "
                 "copies) to instead of dropping them; a later prompt that begins with them copies them back "
                 "(default 0: none)")
      ->check(CLI::Range(0.0, 4096.0));
  app.add_option("--request-log", o.request_log, "Append one JSON line per finished request (server-side timings) to FILE");
  app.add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' (default: $NINFER_API_KEY, else none)")
      ->envname("NINFER_API_KEY");
  add_load_options(app, {o.device, o.plugin_dir, o.plugin, o.threads, o.dtype, o.kv_dtype});
  app.add_option("--served-model-name", o.served_model_name, "Model id clients use (default: the manifest's name)");
  // The HTTP front end's limits (docs/serving.md, "Limits").
  HttpLimits& h = o.http;
  app.add_option("--max-connections", h.max_connections, "Open connections in all; more are refused with 503")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--max-connections-per-peer", h.max_connections_per_peer,
                 "Open connections from one client address; more are refused with 503")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  const auto ms_option = [&app](const char* name, std::chrono::milliseconds& v, const char* help) {
    app.add_option_function<int64_t>(name, [&v](int64_t x) { v = std::chrono::milliseconds(x); }, help)
        ->default_str(std::to_string(v.count()))
        ->check(CLI::Range(int64_t{1}, int64_t{24} * 3600 * 1000));
  };
  ms_option("--request-head-timeout-ms", h.head_timeout,
            "A request line and headers must arrive within this many ms (408; an idle connection is closed)");
  ms_option("--request-body-timeout-ms", h.body_timeout, "A request body must arrive within this many ms after its head (408)");
  ms_option("--write-timeout-ms", h.write_timeout,
            "A client that reads nothing of its reply for this many ms is disconnected (its request cancelled)");
  app.add_option("--max-body-bytes", h.max_body_bytes, "Largest request body; larger ones get 413")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--max-header-bytes", h.max_header_bytes, "Largest request line plus headers; larger ones get 431")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{256}, uint32_t{1} << 20));
  app.add_option("--max-headers", h.max_headers, "Most header fields in a request; more get 431")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10000}));
  app.add_flag("-v,--verbose", o.verbose, "Debug logging on stderr");
}

void check_serve_options(const ServeOptions& o) {
  if (o.manifest.empty() && o.checkpoint.empty())
    throw UsageError("no model: give a MANIFEST file or --checkpoint DIR (see ninfer-serve --help)");
  if (!o.manifest.empty() && !o.checkpoint.empty()) throw UsageError("give either a MANIFEST or --checkpoint DIR, not both");
  try {
    parse_device_spec(o.device);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (o.max_context && *o.max_context < 2)
    throw UsageError(fmt::format("--max-context must be at least 2 (got {})", *o.max_context));
  check_spec_options(o.spec);
  if (o.no_prefix_cache && (o.host_cache_gib > 0 || o.prefix_states))
    throw UsageError("--host-cache-gib and --prefix-states configure the prefix cache, which --no-prefix-cache turns off");
  if (o.threads && (*o.threads < 1 || *o.threads > 256))
    throw UsageError(fmt::format("--threads {}: expected 1 to 256", *o.threads));
  if (o.device == "cpu" && o.no_cuda_graph) warn("ninfer-serve", "--no-cuda-graph has no effect with --device cpu");
  apply_threads(o.threads);
}

} // namespace ninfer::tools
