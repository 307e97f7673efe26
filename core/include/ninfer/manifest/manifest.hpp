// The model manifest: which checkpoint to run and how. A YAML file validated by
// schemas/manifest.schema.json; only `checkpoint:` is required and every other key has the
// default documented here and in docs/manifest.md. Paths in a manifest are relative to the
// manifest file's folder; the loaded Manifest holds them resolved.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "ninfer/sampling/sampling_params.hpp"

namespace ninfer {

// Weight dtype in memory; auto keeps the checkpoint's own.
enum class WeightDType { Auto, Float32, BFloat16, Float16 };
// KV cache element type; auto lets the engine choose (float16 on CUDA, float32 on the CPU
// plugin: ModelOptions::kv_cache).
enum class KvDType { Auto, Float32, Float16, BFloat16, Int8, Fp8, Int4r };
// How --chat prompts and server messages are formatted.
enum class ChatTemplate { Qwen, None };
// Speculative decoding (docs/speculative.md): none, or the checkpoint's MTP head as drafter.
enum class SpecKind { None, Mtp };
enum class DraftHeadKind { LmHead, Int4 };

const char* to_string(WeightDType d);
const char* to_string(KvDType d);
const char* to_string(DraftHeadKind d);
const char* to_string(ChatTemplate t);
const char* to_string(SpecKind k); // "none", "mtp"

struct RuntimeOptions {
  // Unset: what the model supports (max_position_embeddings) and the memory allows at
  // max_concurrency, decided by the memory plan at load (docs/memory.md).
  std::optional<int64_t> max_context;
  int64_t max_concurrency = 4;
  int64_t prefill_chunk = 2048;
  // Prompt tokens of a step shared with decoding streams; unset: the model's cost rule
  // (ninfer/models/mixed_chunk.hpp).
  std::optional<int64_t> mixed_chunk;
  KvDType kv_dtype = KvDType::Auto;
  bool cuda_graphs = true;
  // GiB of device memory the model may take, the CUDA runtime's own included; unset: the
  // device's free memory (the CPU plugin: a share of the host's available memory).
  std::optional<double> memory_limit_gib;
  // KV tokens of the cache, all sequences together; unset: auto (what the memory leaves).
  std::optional<int64_t> kv_capacity;
  // Positions per KV block (a power of two, 32..1024); unset: the built-in 64.
  std::optional<int64_t> kv_block_tokens;
};

// `spec:`: speculative decoding of the requests picked on the device (docs/speculative.md).
struct SpecSettings {
  SpecKind method = SpecKind::None;
  // Drafts per round, 1..5. Three: what the field's Qwen3.5 MTP setups run, where the fourth
  // draft's acceptance no longer pays for its verification row.
  int64_t draft_tokens = 3;
  // The drafter's vocabulary: token ids [0, draft_vocab); 0: all (ModelOptions' Speculation).
  int64_t draft_vocab = 0;
  // The drafter's LM head rows as the model holds them, or quantized to int4 at load.
  DraftHeadKind draft_head = DraftHeadKind::LmHead;
  // Rounds only while at most this many sequences decode; 0: always (ModelOptions' Speculation).
  int64_t max_batch = 0;
};

struct Manifest {
  std::filesystem::path source;     // the manifest file; empty for an implicit manifest
  std::filesystem::path checkpoint; // absolute, normalised; an existing folder
  std::string name;                 // default: the checkpoint folder's name
  WeightDType dtype = WeightDType::Auto;
  // Given: must exist. Not given: <checkpoint>/tokenizer.json if it exists, else unset
  // (then only token-id prompts work).
  std::optional<std::filesystem::path> tokenizer;
  ChatTemplate chat_template = ChatTemplate::Qwen;
  RuntimeOptions runtime;
  SpecSettings spec;
  // Per-request defaults; command-line flags and server requests override them.
  SamplingParams sampling;
  int64_t max_new_tokens = 512;

  // "FILE:LINE" of each key the file sets, by dotted path ("runtime.max_context"), so that
  // checks made later (e.g. max_context against the model's limit) can point at the line.
  std::map<std::string, std::string> locations;
  // "FILE:LINE: KEY" for a key the file sets; "FILE: KEY (default)" for one it does not;
  // "--checkpoint DIR: KEY (default)" for an implicit manifest. For error messages.
  std::string where(const std::string& key) const;
};

// Loads and validates FILE against <data_dir>/schemas/manifest.schema.json. Every problem is
// an ninfer::Error starting "FILE:LINE: KEY:" that says what was expected.
Manifest load_manifest(const std::filesystem::path& file);
// Same, with an explicit schema file (tests, tools run from a source tree).
Manifest load_manifest(const std::filesystem::path& file, const std::filesystem::path& schema_file);
// Same, for the text of a manifest said to be at `file` (paths in it are relative to its folder).
Manifest parse_manifest(const std::string& text, const std::filesystem::path& file,
                        const std::filesystem::path& schema_file);

// The manifest `ninfer-run --checkpoint DIR` uses: DIR (relative to the working directory)
// with every default. Throws ninfer::Error if DIR is not a folder.
Manifest implicit_manifest(const std::filesystem::path& checkpoint_dir);

} // namespace ninfer
