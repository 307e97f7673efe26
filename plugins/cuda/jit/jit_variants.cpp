// The run-time compiled GEMV variants (see jit_variants.hpp). Each built variant owns its loaded
// library and hands its object to the ABI's callbacks as `ctx`; built variants and failures are
// kept for the life of the process, once per (device, name), so a failure is reported again
// rather than recompiled.
#include "jit_variants.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "gemv_family.hpp"
#include "ninfer/abi/ops/linear.h"

namespace ninfer::cuda_plugin {
namespace {

constexpr unsigned kMaxGridY = 65535;

struct JitGemv {
  jit::GemvParams p;
  std::string name;
  cudaLibrary_t library = nullptr;
  cudaKernel_t k_f32 = nullptr, k_bf16 = nullptr;
  cudaKernel_t planned = nullptr; // the kernel whose resources the variant reports
  std::string planned_symbol;
  ninfer_variant v{};
};

const JitGemv& self(const void* ctx) { return *static_cast<const JitGemv*>(ctx); }

int32_t fail(char* err, size_t err_len, int32_t code, const std::string& name, const std::string& why) {
  std::snprintf(err, err_len, "linear/%s: %s", name.c_str(), why.c_str());
  return code;
}

int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && s->dims[0] <= INT32_MAX && s->dims[1] <= INT32_MAX;
}

int32_t launch(const void* ctx, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  const JitGemv& g = self(ctx);
  const ninfer_linear_args& a = *static_cast<const ninfer_linear_args*>(args);
  if (a.w_dtype != NINFER_DTYPE_F32 && a.w_dtype != NINFER_DTYPE_BF16)
    return fail(err, err_len, NINFER_ERR_INVALID_ARGUMENT, g.name, "w_dtype must be F32 or BF16");
  if (a.in_features < 1 || a.out_features < 1)
    return fail(err, err_len, NINFER_ERR_INVALID_ARGUMENT, g.name, "in_features and out_features must be >= 1");
  // grid.x: blocks of rows (from the shape alone); grid.y: the planner's token tiles, strided
  // over by the kernel when there are more than a grid dimension holds.
  const int64_t rows_per_cta = static_cast<int64_t>(g.p.threads / 32) * g.p.rows;
  const dim3 grid(static_cast<unsigned>((a.out_features + rows_per_cta - 1) / rows_per_cta),
                  static_cast<unsigned>(std::clamp<int64_t>(l->grid_x, 1, kMaxGridY)));
  const float* x = a.x;
  long long xs = a.x_row_stride, ys = a.y_row_stride, begin = l->token_begin, end = l->token_end;
  const void* w = a.w;
  float* y = a.y;
  int K = a.in_features, N = a.out_features, accumulate = a.accumulate != 0;
  void* params[] = {&x, &xs, &w, &y, &ys, &K, &N, &begin, &end, &accumulate}; // gemv_program_source's order
  const cudaKernel_t k = a.w_dtype == NINFER_DTYPE_BF16 ? g.k_bf16 : g.k_f32;
  if (cudaError_t rc = cudaLaunchKernel(reinterpret_cast<const void*>(k), grid, dim3(g.p.threads), params, 0,
                                        static_cast<cudaStream_t>(stream));
      rc != cudaSuccess) {
    cudaGetLastError();
    return fail(err, err_len, NINFER_ERR_LAUNCH, g.name,
                "tokens [" + std::to_string(begin) + ", " + std::to_string(end) + "): " + cudaGetErrorString(rc));
  }
  return NINFER_OK;
}

cudaError_t read_resources(cudaKernel_t k, const char* symbol, int32_t threads, ninfer_kernel_resources* out) {
  cudaFuncAttributes attr{};
  if (cudaError_t rc = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k)); rc != cudaSuccess) return rc;
  *out = ninfer_kernel_resources{};
  out->symbol = symbol;
  out->threads_per_block = threads;
  out->registers_per_thread = attr.numRegs;
  out->static_smem_bytes = static_cast<int32_t>(attr.sharedSizeBytes);
  out->local_bytes_per_thread = static_cast<int32_t>(attr.localSizeBytes);
  out->max_threads_per_block = attr.maxThreadsPerBlock;
  return cudaSuccess;
}

int32_t query(const void* ctx, ninfer_kernel_resources* out, char* err, size_t err_len) {
  const JitGemv& g = self(ctx);
  if (cudaError_t rc = read_resources(g.planned, g.planned_symbol.c_str(), g.p.threads, out); rc != cudaSuccess) {
    cudaGetLastError();
    return fail(err, err_len, NINFER_ERR_LAUNCH, g.name, std::string("cudaFuncGetAttributes: ") + cudaGetErrorString(rc));
  }
  return NINFER_OK;
}

int32_t driver_blocks(const void* ctx, size_t dynamic_smem, int32_t* blocks, char* err, size_t err_len) {
  const JitGemv& g = self(ctx);
  int n = 0;
  if (cudaError_t rc = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, reinterpret_cast<const void*>(g.planned),
                                                                     g.p.threads, dynamic_smem);
      rc != cudaSuccess) {
    cudaGetLastError();
    return fail(err, err_len, NINFER_ERR_LAUNCH, g.name, std::string("occupancy query: ") + cudaGetErrorString(rc));
  }
  *blocks = n;
  return NINFER_OK;
}

// Thrown inside build() only; turned into the ABI's status and message at its edge.
struct BuildError {
  std::string why;
};

// The live device current for the scope (library loading is context-independent; the attribute
// reads are per device).
struct CurrentDevice {
  int previous = -1;
  explicit CurrentDevice(int ordinal) {
    cudaGetDevice(&previous);
    if (cudaError_t rc = cudaSetDevice(ordinal); rc != cudaSuccess) {
      cudaGetLastError();
      throw BuildError{std::string("cudaSetDevice: ") + cudaGetErrorString(rc)};
    }
  }
  ~CurrentDevice() {
    if (previous >= 0) cudaSetDevice(previous);
  }
};

std::unique_ptr<JitGemv> build(const ninfer_registrar* services, const ninfer_device_info& d, const jit::GemvParams& p,
                               const std::string& name) {
  if (!services || !services->compile_cuda) throw BuildError{"the core offers no run-time compiler"};
  const std::string program_name = "linear/" + name, source = jit::gemv_program_source(p);
  const ninfer_cuda_program program{program_name.c_str(), source.c_str(), 0, nullptr, nullptr, 0, nullptr};
  ninfer_cuda_image image{};
  char why[8192] = {0};
  if (services->compile_cuda(services->ctx, &program, 1, d.cc_major, d.cc_minor, &image, why, sizeof why) != NINFER_OK)
    throw BuildError{why};
  const CurrentDevice current(d.ordinal);
  auto g = std::make_unique<JitGemv>();
  g->p = p;
  g->name = name;
  if (cudaError_t rc = cudaLibraryLoadData(&g->library, image.data, nullptr, nullptr, 0, nullptr, nullptr, 0);
      rc != cudaSuccess) {
    cudaGetLastError();
    throw BuildError{std::string("cudaLibraryLoadData: ") + cudaGetErrorString(rc)};
  }
  auto kernel = [&](bool bf16) {
    cudaKernel_t k = nullptr;
    if (cudaError_t rc = cudaLibraryGetKernel(&k, g->library, jit::gemv_kernel_name(bf16)); rc != cudaSuccess) {
      cudaGetLastError();
      throw BuildError{std::string("cudaLibraryGetKernel(") + jit::gemv_kernel_name(bf16) + "): " + cudaGetErrorString(rc)};
    }
    return k;
  };
  g->k_bf16 = kernel(true);
  g->k_f32 = kernel(false);
  ninfer_kernel_resources r_bf16{}, r_f32{};
  for (auto [k, r, bf16] : {std::tuple{g->k_bf16, &r_bf16, true}, std::tuple{g->k_f32, &r_f32, false}})
    if (cudaError_t rc = read_resources(k, jit::gemv_kernel_name(bf16), p.threads, r); rc != cudaSuccess) {
      cudaGetLastError();
      throw BuildError{std::string("cudaFuncGetAttributes: ") + cudaGetErrorString(rc)};
    }
  // The plan must be legal for either dtype: report the kernel that needs more registers.
  const bool bf16 = r_bf16.registers_per_thread >= r_f32.registers_per_thread;
  g->planned = bf16 ? g->k_bf16 : g->k_f32;
  g->planned_symbol = jit::gemv_kernel_name(bf16);
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
  v.resources.symbol = g->planned_symbol.c_str();
  v.ctx = g.get();
  v.supports = supports;
  v.launch = launch;
  v.query_loaded_resources = query;
  v.query_driver_blocks_per_sm = driver_blocks;
  return g;
}

using Key = std::pair<int32_t, std::string>; // device ordinal, name

struct Registry {
  std::mutex mu;
  std::map<Key, std::unique_ptr<JitGemv>> built;
  std::map<Key, std::string> failed;
};

// Never destroyed: variants (and their libraries) stay valid for the life of the process, like
// registered ones, and nothing is unloaded after the runtime has shut down at exit.
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

} // namespace

int32_t make_jit_variant(const ninfer_registrar* services, const ninfer_device_info* device, const char* op,
                         const char* name, const ninfer_variant** out, char* err, size_t err_len) {
  auto refuse = [&](int32_t code, const std::string& why) {
    std::snprintf(err, err_len, "%s", why.c_str());
    return code;
  };
  if (!jit::is_gemv_name(name)) return NINFER_ERR_UNSUPPORTED;
  // Names that are not variants at all: unknown, with the reason.
  if (std::strcmp(op, NINFER_OP_LINEAR) != 0)
    return refuse(NINFER_ERR_UNSUPPORTED, std::string("op '") + op +
                                              "' has no run-time compiled variants (only linear has: " +
                                              std::string(jit::kGemvPrefix) + "t<threads>_r<rows>_v<vec>_m<tokens>)");
  std::string why;
  const std::optional<jit::GemvParams> p = jit::parse_gemv_name(name, &why);
  if (!p) return refuse(NINFER_ERR_UNSUPPORTED, why);
  // A variant that exists but cannot be made for this device. Cheap checks, not remembered.
  if (device->kind != NINFER_DEVICE_CUDA)
    return refuse(NINFER_ERR_INVALID_ARGUMENT,
                  std::string("run-time compiled variants run on CUDA devices only, and ") + device->name +
                      " is not one");
  if (device->described || device->ordinal < 0)
    return refuse(NINFER_ERR_INVALID_ARGUMENT,
                  std::string("run-time compiled variants need the live device (their resources are read from the "
                              "loaded kernel), and ") +
                      device->name + " is a described card");
  if (device->cc_major < 8)
    return refuse(NINFER_ERR_INVALID_ARGUMENT,
                  std::string("run-time compiled variants need compute capability 8.0 or newer (") + device->name +
                      " is " + std::to_string(device->cc_major) + "." + std::to_string(device->cc_minor) + ")");

  Registry& reg = registry();
  const std::lock_guard<std::mutex> lock(reg.mu);
  const Key key{device->ordinal, name};
  if (auto it = reg.built.find(key); it != reg.built.end()) {
    *out = &it->second->v;
    return NINFER_OK;
  }
  if (auto it = reg.failed.find(key); it != reg.failed.end()) return refuse(NINFER_ERR_LAUNCH, it->second);
  try {
    std::unique_ptr<JitGemv> g = build(services, *device, *p, name);
    *out = &reg.built.emplace(key, std::move(g)).first->second->v;
    return NINFER_OK;
  } catch (const BuildError& e) {
    reg.failed.emplace(key, e.why);
    return refuse(NINFER_ERR_LAUNCH, e.why);
  }
}

int32_t jit_sweep_variant_names(const char* op, int64_t tokens, char* names, size_t names_len) {
  std::string packed;
  int32_t count = 0;
  if (std::strcmp(op, NINFER_OP_LINEAR) == 0)
    for (const jit::GemvParams& p : jit::gemv_sweep(tokens)) {
      packed += jit::gemv_name(p);
      packed += '\0';
      ++count;
    }
  packed += '\0';
  if (packed.size() > names_len) return -1;
  std::memcpy(names, packed.data(), packed.size());
  return count;
}

} // namespace ninfer::cuda_plugin
