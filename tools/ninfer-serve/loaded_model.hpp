// The model ninfer-serve serves: manifest, tokenizer, backend and CausalLM with one slot per
// concurrent request. Kept together because they must outlive the engine in this order.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ninfer/manifest/manifest.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "serve_options.hpp"

namespace ninfer::tools {

struct LoadedModel {
  Manifest manifest;
  std::string name; // the id clients send as "model"
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<PluginHost> plugins;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<CausalLM> lm;

  const Tokenizer* tok() const { return tokenizer ? &*tokenizer : nullptr; }
};

// Throws ninfer::Error naming the flag or file at fault.
LoadedModel load_model(const ServeOptions& o);

} // namespace ninfer::tools
