// Putting a model together from a tool's command line, shared by ninfer-run and ninfer-serve:
// the manifest (a file, or an implicit one for --checkpoint, with --dtype / --max-context
// overrides), its tokenizer and checkpoint checked against each other, then the model loaded
// on the first device of --device whose plugin runs it whole.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/manifest/manifest.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer {

// What the command line says of the manifest's spec: (unset: the manifest's).
struct SpecOverrides {
  std::optional<std::string> method;  // --spec none|mtp
  std::optional<int64_t> draft_tokens; // --draft-tokens K
  std::optional<int64_t> draft_vocab;  // --draft-vocab N
  std::optional<std::string> draft_head; // --draft-head lm_head|int4
  std::optional<int64_t> max_batch;    // --spec-max-batch N (ninfer-serve)
};

// A speculation setting given without a method would be dropped without a word: refused, naming
// the flag, unless `method` (the command line's or the manifest's) is mtp.
void require_spec_method(const SpecOverrides& spec, SpecKind method);

struct ModelSource {
  std::string manifest;   // a manifest file, or
  std::string checkpoint; // a checkpoint folder (implicit manifest)
  std::optional<std::string> dtype;   // --dtype: auto, float32, bfloat16
  std::optional<int64_t> max_context; // --max-context
  std::string tool;       // names the tool in messages ("ninfer-run")
  bool no_cuda_graph = false;         // --no-cuda-graph: the manifest's runtime.cuda_graphs off
  std::optional<std::string> kv_dtype; // --kv-dtype: auto, float32, float16, bfloat16
  std::optional<double> memory_limit_gib;  // --memory-limit GIB
  std::optional<std::string> kv_capacity;  // --kv-capacity auto|TOKENS
  SpecOverrides spec;                      // --spec, --draft-tokens, --draft-vocab
};

// Throws ninfer::Error for no source, both sources, or a bad override.
Manifest resolve_manifest(const ModelSource& source);
// The speculation flags over the manifest's `spec` (resolve_manifest applies them too); throws
// ninfer::Error naming a bad flag, or a setting given without a method.
void apply_spec_overrides(Manifest& m, const SpecOverrides& spec);
// A --kv-dtype value (auto, float32, float16, bfloat16); throws ninfer::Error naming the flag.
KvDType parse_kv_dtype_option(const std::string& text);
// A --kv-capacity value: "auto" (nullopt) or a number of tokens >= 1; throws naming the flag.
std::optional<int64_t> parse_kv_capacity_option(const std::string& text);
// A --spec value (none, mtp); throws ninfer::Error naming the flag.
SpecKind parse_spec_option(const std::string& text);
// A --draft-head value (lm_head, int4); throws ninfer::Error naming the flag.
DraftHeadKind parse_draft_head_option(const std::string& text);
// A --memory-limit value in GiB (> 0) as bytes; throws naming the flag.
size_t memory_limit_bytes(double gib);

struct ModelFiles {
  Manifest manifest;
  std::optional<Tokenizer> tokenizer;
  Checkpoint checkpoint;
  const Tokenizer* tok() const { return tokenizer ? &*tokenizer : nullptr; }
};

// Resolves the manifest, loads the tokenizer and opens the checkpoint (mapped, not read);
// refuses a tokenizer larger than the model's vocabulary and a max_context past its positions,
// and warns about random weights.
ModelFiles open_model_files(const ModelSource& source);

// A max_context past the model's positions (config.json's max_position_embeddings) is refused,
// naming `origin` (the flag, or the manifest's line); 0 (what the model and memory allow) passes.
void require_context_within_positions(int64_t max_context, const ModelConfig& cfg, const std::string& origin);
// A draft vocabulary (the drafter's LM head over the first N rows) past the model's vocabulary is
// refused, naming `origin`.
void require_draft_vocab_within(int64_t draft_vocab, const ModelConfig& cfg, const std::string& origin);

// The largest memory limit taken, in GiB (1 PiB): beyond it a value is a typing mistake.
inline constexpr double kMaxMemoryLimitGib = 1 << 20;

// The manifest's kv_dtype as ModelOptions takes it.
KvCachePrecision kv_cache_precision(KvDType d);

// The options a load of `m` takes with `max_sequences` slots (prefill_chunk, mixed_chunk: the
// manifest's unless given): an unset runtime.max_context, kv_capacity or mixed_chunk is 0, for the
// memory plan to decide.
ModelOptions model_options(const Manifest& m, int32_t max_sequences, std::optional<int32_t> prefill_chunk = std::nullopt,
                           std::optional<int32_t> mixed_chunk = std::nullopt);

struct DeviceChoice {
  std::string device = "auto"; // --device
  std::string plugin_dir;      // empty: default_plugin_dir()
  std::string plugin;          // --plugin; empty: the best-scoring one
};

struct ModelOnDevice {
  std::unique_ptr<PluginHost> plugins; // outlives the backend
  std::unique_ptr<Backend> backend;
  std::unique_ptr<CausalLM> lm;
  // What the load took of the device's free memory (cudaMemGetInfo before and after), to hold
  // against the plan's estimates (docs/memory.md); 0 on the CPU.
  size_t device_taken = 0;
};

// Loads the model with `max_sequences` slots (prefill_chunk, mixed_chunk: the manifest's unless
// given; mixed_chunk unset in both: the model's cost rule) on the first device of `choice` that
// runs it, within the manifest's runtime.memory_limit; with --device auto, devices that cannot
// are skipped and listed in the error if none can. Logs the memory plan, the chunk sizes and
// what the load took. `state_snapshots`: ModelOptions::state_snapshots (the server's prompt reuse).
ModelOnDevice load_on_device(const ModelFiles& files, const DeviceChoice& choice, int32_t max_sequences,
                             std::optional<int32_t> prefill_chunk = std::nullopt,
                             std::optional<int32_t> mixed_chunk = std::nullopt, bool state_snapshots = false,
                             int32_t prefix_states = 0);

} // namespace ninfer
