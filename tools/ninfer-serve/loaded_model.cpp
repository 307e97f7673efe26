#include "loaded_model.hpp"

#include "ninfer/models/model_setup.hpp"

namespace ninfer::tools {

LoadedModel load_model(const ServeOptions& o) {
  ModelFiles files = open_model_files({o.manifest, o.checkpoint, o.dtype, o.max_context, "ninfer-serve", o.no_cuda_graph,
                                        o.kv_dtype, o.memory_limit, o.kv_capacity, o.spec});
  ModelOnDevice on_device = load_on_device(files, {o.device, o.plugin_dir, o.plugin}, o.max_concurrency, o.prefill_chunk,
                                           o.mixed_chunk, !o.no_prefix_cache,
                                           o.no_prefix_cache ? 0 : o.prefix_states.value_or(2 * o.max_concurrency));
  LoadedModel m;
  m.name = o.served_model_name.empty() ? files.manifest.name : o.served_model_name;
  m.manifest = std::move(files.manifest);
  m.tokenizer = std::move(files.tokenizer);
  m.plugins = std::move(on_device.plugins);
  m.backend = std::move(on_device.backend);
  m.lm = std::move(on_device.lm);
  return m;
}

} // namespace ninfer::tools
