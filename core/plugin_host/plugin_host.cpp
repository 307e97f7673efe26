#include "ninfer/plugin_host/plugin_host.hpp"

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "ninfer/support/error.hpp"
#include "ninfer/jit/plugin_compiler.hpp"

namespace ninfer {
namespace {

// Libraries stay loaded until the process exits (see the header for why).
std::vector<boost::dll::shared_library>& keep_loaded() {
  static auto* libs = new std::vector<boost::dll::shared_library>();
  return *libs;
}

// Boost.DLL reports a failed load as a bare errno ("Bad file descriptor"); the dynamic
// loader's own text names the missing library or symbol, which is what a user needs.
std::string loader_message(const std::filesystem::path& file, const std::string& fallback) {
  dlerror();
  if (void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    return fallback;
  }
  const char* msg = dlerror();
  return msg ? msg : fallback;
}

struct RegistrationContext {
  LoadedPlugin* plugin;
  std::vector<std::string> problems;
};

// Refuses variants whose description the planner could not use honestly.
int32_t add_variant(void* ctx, const ninfer_variant* v) {
  auto* rc = static_cast<RegistrationContext*>(ctx);
  auto refuse = [&](const std::string& why) {
    rc->problems.push_back(fmt::format("variant {}/{} refused: {}", v && v->op ? v->op : "?",
                                       v && v->name ? v->name : "?", why));
    return NINFER_ERR_INVALID_ARGUMENT;
  };
  if (!v || !v->op || !v->name) return refuse("missing op or name");
  if (!v->launch) return refuse("no launch function");
  if (v->tokens_per_cta < 1 || v->split_k < 1) return refuse("tokens_per_cta and split_k must be >= 1");
  if (v->geometry < NINFER_GEOMETRY_TOKEN_TILED || v->geometry > NINFER_GEOMETRY_LIBRARY)
    return refuse(fmt::format("unknown geometry {}", v->geometry));
  if (v->geometry == NINFER_GEOMETRY_LIBRARY && v->cooperative)
    return refuse("a library variant cannot be cooperative");
  if (v->exec == NINFER_EXEC_CUDA) {
    const auto& r = v->resources;
    if (!r.symbol || r.threads_per_block < 1 || r.registers_per_thread < 1)
      return refuse("CUDA variant without kernel resources");
  }
  if (rc->plugin->find_variant(v->op, v->name)) return refuse("registered twice");
  rc->plugin->variants.push_back(v);
  return NINFER_OK;
}

// Run-time compilation for plugins without machine code for the card (cuda-generic).
int32_t compile_cuda(void*, const ninfer_cuda_program* programs, int32_t count, int32_t cc_major, int32_t cc_minor,
                     ninfer_cuda_image* images, char* err, size_t err_len) {
  return jit::compile_for_plugin(programs, count, cc_major, cc_minor, images, err, err_len);
}

// The registrar handed to make_variant: the compiler only (nothing is registered then).
int32_t refuse_registration(void*, const ninfer_variant*) { return NINFER_ERR_INVALID_ARGUMENT; }
const ninfer_registrar kServices{nullptr, refuse_registration, compile_cuda};

} // namespace

const ninfer_variant* LoadedPlugin::resolve_variant(const ninfer_device_info& device, std::string_view op,
                                                    std::string_view name, std::string* why_unknown) const {
  if (const ninfer_variant* v = find_variant(op, name)) return v;
  if (!abi->make_variant) return nullptr;
  const std::string op_s(op), name_s(name);
  const ninfer_variant* v = nullptr;
  char err[4096] = {0};
  const int32_t rc = abi->make_variant(&kServices, &device, op_s.c_str(), name_s.c_str(), &v, err, sizeof err);
  if (rc == NINFER_ERR_UNSUPPORTED) {
    if (why_unknown) *why_unknown = err;
    return nullptr;
  }
  if (rc != NINFER_OK || !v)
    throw Error(fmt::format("plugin {} cannot make {}/{} for {}: {}", abi->name, op, name, device.name,
                            err[0] ? err : "no reason given"));
  if (!v->op || !v->name || op != v->op || name != v->name || !v->launch)
    throw Error(fmt::format("plugin {} made {}/{} with another op or name, or without a launch function", abi->name,
                            op, name));
  return v;
}

std::vector<std::string> LoadedPlugin::sweep_variant_names(std::string_view op, int64_t tokens) const {
  std::vector<std::string> out;
  if (!abi->sweep_variant_names) return out;
  const std::string op_s(op);
  std::vector<char> buf(4096);
  int32_t n = abi->sweep_variant_names(op_s.c_str(), tokens, buf.data(), buf.size());
  if (n < 0) {
    buf.resize(1 << 20);
    n = abi->sweep_variant_names(op_s.c_str(), tokens, buf.data(), buf.size());
  }
  for (const char* p = buf.data(); n > 0 && *p; p += std::strlen(p) + 1, --n) out.emplace_back(p);
  return out;
}

std::vector<const ninfer_variant*> LoadedPlugin::variants_for(std::string_view op) const {
  std::vector<const ninfer_variant*> out;
  for (const auto* v : variants)
    if (op == v->op) out.push_back(v);
  return out;
}

const ninfer_variant* LoadedPlugin::find_variant(std::string_view op, std::string_view name) const {
  for (const auto* v : variants)
    if (op == v->op && name == v->name) return v;
  return nullptr;
}

std::vector<std::string> LoadedPlugin::ops() const {
  std::set<std::string> s;
  for (const auto* v : variants) s.insert(v->op);
  return {s.begin(), s.end()};
}

void PluginHost::load_directory(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir))
    throw Error(fmt::format("plugin directory {} does not exist (set --plugin-dir or NINFER_PLUGIN_DIR)",
                            dir.string()));
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".so") files.push_back(e.path());
  std::sort(files.begin(), files.end()); // deterministic order and logs
  for (const auto& f : files) load_file(f);
}

bool PluginHost::load_file(const std::filesystem::path& file) {
  auto problem = [&](const std::string& msg) {
    problems_.push_back({file, msg});
    spdlog::warn("plugin {}: {}", file.string(), msg);
    return false;
  };
  boost::dll::shared_library lib;
  boost::dll::fs::error_code ec;
  lib.load(file, ec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (ec) return problem(fmt::format("cannot be loaded: {}", loader_message(file, ec.message())));
  if (!lib.has(NINFER_PLUGIN_ENTRY_SYMBOL))
    return problem(fmt::format("not a ninfer plugin: no '{}' symbol", NINFER_PLUGIN_ENTRY_SYMBOL));
  auto entry = lib.get<const ninfer_plugin*()>(NINFER_PLUGIN_ENTRY_SYMBOL);
  const ninfer_plugin* abi = entry();
  if (!abi) return problem("entry point returned no descriptor");
  if (abi->abi_version != NINFER_PLUGIN_ABI_VERSION)
    return problem(fmt::format("ABI version {} but this core speaks {}; rebuild the plugin against this core",
                               abi->abi_version, NINFER_PLUGIN_ABI_VERSION));
  if (abi->struct_size < sizeof(ninfer_plugin) || !abi->name || !abi->target_arch || !abi->score ||
      !abi->register_variants)
    return problem("descriptor is incomplete");
  if (std::any_of(plugins_.begin(), plugins_.end(), [&](const auto& p) { return p->name() == abi->name; }))
    return problem(fmt::format("a plugin named '{}' is already loaded", abi->name));

  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->file = file;
  plugin->abi = abi;
  plugin->deferred = plugin->fallback();
  if (!plugin->deferred && !register_variants(*plugin)) return false;
  spdlog::debug("plugin {} ({}) loaded from {}: {}", abi->name, abi->target_arch, file.string(),
                plugin->deferred ? "a fallback, registered when needed"
                                 : fmt::format("{} variants", plugin->variants.size()));
  keep_loaded().push_back(std::move(lib));
  plugins_.push_back(std::move(plugin));
  return true;
}

bool PluginHost::register_variants(LoadedPlugin& p) const {
  RegistrationContext ctx{&p, {}};
  ninfer_registrar reg{&ctx, add_variant, compile_cuda};
  const int32_t rc = p.abi->register_variants(&reg);
  auto problem = [&](const std::string& msg) {
    problems_.push_back({p.file, msg});
    spdlog::warn("plugin {}: {}", p.file.string(), msg);
  };
  for (const auto& m : ctx.problems) problem(m);
  if (rc == NINFER_OK) return true;
  problem(fmt::format("registration failed (status {})", rc));
  p.variants.clear();
  p.failed = true;
  return false;
}

bool PluginHost::register_deferred(LoadedPlugin& p) const {
  if (p.deferred) {
    p.deferred = false;
    register_variants(p);
  }
  return !p.failed;
}

const LoadedPlugin* PluginHost::find(std::string_view name) const {
  std::lock_guard lock(deferred_mutex_);
  for (const auto& p : plugins_)
    if (name == p->abi->name) return register_deferred(*p) ? p.get() : nullptr;
  return nullptr;
}

PluginChoice PluginHost::choose(const ninfer_device_info& device, std::string_view forced) const {
  std::lock_guard lock(deferred_mutex_); // a fallback's state may change below
  PluginChoice choice;
  auto score = [&](const LoadedPlugin& p) {
    char why[256] = {0};
    int s = 0;
    if (p.failed) std::snprintf(why, sizeof why, "its registration failed (see the plugin problems)");
    else s = p.abi->score(&device, why, sizeof why);
    if (!forced.empty() && forced != p.abi->name && s > 0) {
      std::string reason = fmt::format("{} (not chosen: --plugin {} was requested)", why, forced);
      choice.scores.push_back({&p, 0, reason});
      return;
    }
    choice.scores.push_back({&p, std::max(s, 0), why});
  };
  const PluginScore* best = nullptr; // the best plugin that is not a fallback, if any scores
  for (const auto& p : plugins_)
    if (!p->fallback()) score(*p);
  for (const PluginScore& s : choice.scores)
    if (s.score > 0 && (!best || s.score > best->score)) best = &s;
  const std::string best_name = best ? best->plugin->name() : ""; // empty: none serves the device
  // Fallbacks last: registered (which may compile kernels) only when they may be chosen.
  for (const auto& p : plugins_) {
    if (!p->fallback()) continue;
    const bool needed = forced.empty() ? best_name.empty() : forced == p->abi->name;
    if (needed) register_deferred(*p);
    if (!p->deferred) {
      score(*p);
      continue;
    }
    choice.scores.push_back(
        {p.get(), 0,
         forced.empty() ? fmt::format("a fallback, not registered: {} serves this device", best_name)
                        : fmt::format("a fallback, not registered (not chosen: --plugin {} was requested)", forced)});
  }
  std::stable_sort(choice.scores.begin(), choice.scores.end(),
                   [](const PluginScore& a, const PluginScore& b) { return a.score > b.score; });
  if (!choice.scores.empty() && choice.scores.front().score > 0)
    choice.chosen = choice.scores.front().plugin;
  return choice;
}

} // namespace ninfer
