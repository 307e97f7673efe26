// Run-time compiled variants (see the header). The plugin ABI's launch function has no context
// argument, so each built variant takes one of kSlots fixed trampolines (a template instance per
// slot) that forward to its object; slots are never reused, like the variants themselves.
#include "ninfer/jit/jit_variants.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/support/error.hpp"
#include "ninfer/jit/linear_gemv.hpp"
#include "ninfer/jit/nvrtc.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"

namespace ninfer::jit {
namespace {

constexpr int kSlots = 128; // built variants per process: ninfer-tune's sweep needs 12 per bucket
constexpr unsigned kMaxGridY = 65535;

// One built jit_gemv variant: its module, both dtype kernels and the ABI struct handed out.
struct JitGemv {
  GemvParams p;
  std::string name;
  std::unique_ptr<LoadedModule> module;
  void* fn_f32 = nullptr;
  void* fn_bf16 = nullptr;
  std::string planned_expression; // the kernel whose resources the variant reports
  void* planned_fn = nullptr;
  ninfer_variant v{};

  int32_t launch(const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) const {
    const ninfer_linear_args& a = *static_cast<const ninfer_linear_args*>(args);
    auto fail = [&](int32_t code, const std::string& why) {
      std::snprintf(err, err_len, "linear/%s: %s", name.c_str(), why.c_str());
      return code;
    };
    if (a.w_dtype != NINFER_DTYPE_F32 && a.w_dtype != NINFER_DTYPE_BF16)
      return fail(NINFER_ERR_INVALID_ARGUMENT, "w_dtype must be F32 or BF16");
    if (a.in_features < 1 || a.out_features < 1)
      return fail(NINFER_ERR_INVALID_ARGUMENT, "in_features and out_features must be >= 1");
    // grid.x: blocks of rows (from the shape alone); grid.y: the planner's token tiles, strided
    // over by the kernel when there are more than a grid dimension holds.
    const int64_t rows_per_cta = static_cast<int64_t>(p.threads / 32) * p.rows;
    const auto gx = static_cast<unsigned>((a.out_features + rows_per_cta - 1) / rows_per_cta);
    const auto gy = static_cast<unsigned>(std::clamp<int64_t>(l->grid_x, 1, kMaxGridY));
    const float* x = a.x;
    long long xs = a.x_row_stride, ys = a.y_row_stride, begin = l->token_begin, end = l->token_end;
    const void* w = a.w;
    float* y = a.y;
    int K = a.in_features, N = a.out_features, accumulate = a.accumulate != 0;
    void* params[] = {&x, &xs, &w, &y, &ys, &K, &N, &begin, &end, &accumulate}; // gemv_bf16 / gemv_f32's order
    try {
      LoadedModule::launch_function(a.w_dtype == NINFER_DTYPE_BF16 ? fn_bf16 : fn_f32, gx, gy,
                                    static_cast<unsigned>(p.threads), 0, stream, params);
    } catch (const Error& e) {
      return fail(NINFER_ERR_LAUNCH, fmt::format("tokens [{}, {}): {}", begin, end, e.what()));
    }
    return NINFER_OK;
  }

  int32_t query(ninfer_kernel_resources* out, char* err, size_t err_len) const {
    try {
      *out = module->resources(planned_expression, p.threads);
      return NINFER_OK;
    } catch (const Error& e) {
      std::snprintf(err, err_len, "linear/%s: %s", name.c_str(), e.what());
      return NINFER_ERR_LAUNCH;
    }
  }

  int32_t driver_blocks(size_t dynamic_smem, int32_t* blocks, char* err, size_t err_len) const {
    try {
      *blocks = LoadedModule::max_active_blocks_per_sm(planned_fn, p.threads, dynamic_smem);
      return NINFER_OK;
    } catch (const Error& e) {
      std::snprintf(err, err_len, "linear/%s: %s", name.c_str(), e.what());
      return NINFER_ERR_LAUNCH;
    }
  }
};

std::array<const JitGemv*, kSlots> g_slots{};

template <int I>
int32_t launch_slot(const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  return g_slots[I]->launch(args, l, stream, err, err_len);
}
template <int I>
int32_t query_slot(ninfer_kernel_resources* out, char* err, size_t err_len) {
  return g_slots[I]->query(out, err, err_len);
}
template <int I>
int32_t blocks_slot(size_t dynamic_smem, int32_t* blocks, char* err, size_t err_len) {
  return g_slots[I]->driver_blocks(dynamic_smem, blocks, err, err_len);
}

struct SlotFunctions {
  decltype(ninfer_variant::launch) launch;
  decltype(ninfer_variant::query_loaded_resources) query;
  decltype(ninfer_variant::query_driver_blocks_per_sm) blocks;
};

template <size_t... I>
constexpr std::array<SlotFunctions, kSlots> slot_functions(std::index_sequence<I...>) {
  return {SlotFunctions{&launch_slot<I>, &query_slot<I>, &blocks_slot<I>}...};
}
constexpr std::array<SlotFunctions, kSlots> kSlotFunctions = slot_functions(std::make_index_sequence<kSlots>());

int32_t gemv_supports(const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && s->dims[0] <= INT32_MAX && s->dims[1] <= INT32_MAX;
}

using Key = std::tuple<int32_t, std::string, std::string>; // device ordinal, op, name

struct Registry {
  std::mutex mu;
  std::map<Key, std::unique_ptr<JitGemv>> built;
  std::map<Key, std::string> failed; // compile or load errors, reported again rather than retried
  int next_slot = 0;
};

// Never destroyed: variants (and their modules) stay valid for the life of the process, as a
// plugin's do, and no module is unloaded after the driver has shut down at exit.
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

std::unique_ptr<JitGemv> build_gemv(const GemvParams& p, std::string_view name, const ninfer_device_info& device) {
  auto g = std::make_unique<JitGemv>();
  g->p = p;
  g->name = std::string(name);
  static const KernelCache cache;
  const CompiledKernel k = compile(gemv_request(p, device.cc_major, device.cc_minor), &cache);
  g->module = std::make_unique<LoadedModule>(k, device.ordinal);
  const std::string e_bf16 = gemv_expression(p, NINFER_DTYPE_BF16), e_f32 = gemv_expression(p, NINFER_DTYPE_F32);
  g->fn_bf16 = g->module->function(e_bf16);
  g->fn_f32 = g->module->function(e_f32);
  const ninfer_kernel_resources r_bf16 = g->module->resources(e_bf16, p.threads);
  const ninfer_kernel_resources r_f32 = g->module->resources(e_f32, p.threads);
  // The plan must be legal for either dtype: report the kernel that needs more registers.
  const bool bf16 = r_bf16.registers_per_thread >= r_f32.registers_per_thread;
  g->planned_expression = bf16 ? e_bf16 : e_f32;
  g->planned_fn = bf16 ? g->fn_bf16 : g->fn_f32;
  ninfer_variant& v = g->v;
  v.op = NINFER_OP_LINEAR;
  v.name = g->name.c_str();
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED;
  v.cooperative = 0;
  v.split_k = 1;
  v.tokens_per_cta = p.tokens;
  v.dtype_mask = (1u << NINFER_DTYPE_F32) | (1u << NINFER_DTYPE_BF16);
  v.resources = bf16 ? r_bf16 : r_f32;
  v.dynamic_smem_bytes = nullptr;
  v.workspace_bytes = nullptr;
  v.supports = gemv_supports;
  spdlog::debug("{}: run-time compiled variant linear/{} for {} from {}: {} registers, {} B local per thread", device.name,
                name, k.arch, k.from_cache ? "the kernel cache" : "NVRTC", v.resources.registers_per_thread,
                v.resources.local_bytes_per_thread);
  return g;
}

} // namespace

bool is_jit_variant_name(std::string_view name) { return name.substr(0, kJitVariantPrefix.size()) == kJitVariantPrefix; }

const ninfer_variant& jit_variant(const LoadedPlugin& plugin, const ninfer_device_info& device, std::string_view op,
                                  std::string_view name) {
  // Checks that need no compiler come first, and are not remembered (they are cheap).
  if (op != NINFER_OP_LINEAR)
    throw Error(fmt::format("'{}': op '{}' has no run-time compiled variants (only linear has: {}t<threads>_r<rows>_v<vec>_m<tokens>)",
                            name, op, kGemvPrefix));
  std::string why;
  const std::optional<GemvParams> p = parse_gemv_name(name, &why);
  if (!p) throw Error(why);
  if (!(plugin.abi->capabilities & NINFER_CAP_CUDA) || device.kind != NINFER_DEVICE_CUDA)
    throw Error(fmt::format("'{}': run-time compiled variants run on CUDA devices only (plugin {} on {})", name,
                            plugin.name(), device.name));
  if (device.described || device.ordinal < 0)
    throw Error(fmt::format("'{}': run-time compiled variants need the live device (their resources are read from the "
                            "loaded kernel), and {} is a described card",
                            name, device.name));
  if (device.cc_major < 8)
    throw Error(fmt::format("'{}': run-time compiled variants need compute capability 8.0 or newer ({} is {}.{})", name,
                            device.name, device.cc_major, device.cc_minor));

  Registry& reg = registry();
  const std::lock_guard<std::mutex> lock(reg.mu);
  const Key key{device.ordinal, std::string(op), std::string(name)};
  if (auto it = reg.built.find(key); it != reg.built.end()) return it->second->v;
  if (auto it = reg.failed.find(key); it != reg.failed.end()) throw Error(it->second);
  try {
    if (reg.next_slot >= kSlots)
      throw Error(fmt::format("'{}': this process has already built {} run-time compiled variants, the most it can hold",
                              name, kSlots));
    std::unique_ptr<JitGemv> g = build_gemv(*p, name, device);
    const int slot = reg.next_slot++;
    g_slots[static_cast<size_t>(slot)] = g.get();
    g->v.launch = kSlotFunctions[static_cast<size_t>(slot)].launch;
    g->v.query_loaded_resources = kSlotFunctions[static_cast<size_t>(slot)].query;
    g->v.query_driver_blocks_per_sm = kSlotFunctions[static_cast<size_t>(slot)].blocks;
    return reg.built.emplace(key, std::move(g)).first->second->v;
  } catch (const Error& e) {
    const std::string msg = fmt::format("run-time compiled variant linear/{} cannot be built on {}: {}", name, device.name,
                                        e.what());
    reg.failed.emplace(key, msg);
    throw Error(msg);
  }
}

const ninfer_variant* resolve_variant(const LoadedPlugin& plugin, const ninfer_device_info& device,
                                      std::string_view op, std::string_view name) {
  if (const ninfer_variant* v = plugin.find_variant(op, name)) return v;
  if (is_jit_variant_name(name)) return &jit_variant(plugin, device, op, name);
  return nullptr;
}

std::vector<std::string> jit_sweep_names(std::string_view op, int64_t tokens) {
  std::vector<std::string> out;
  if (op == NINFER_OP_LINEAR)
    for (const GemvParams& p : gemv_sweep(tokens)) out.push_back(gemv_name(p));
  return out;
}

} // namespace ninfer::jit
