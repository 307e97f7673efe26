// NVRTC compile + driver-API load. Both libraries are opened at run time (dlopen), not linked:
// libcuda.so.1 exists only where a driver is installed (CI has none, and the core must still
// load there), and libnvrtc (~100 MB) comes with the CUDA toolkit of the machine rather than
// in our bundle. A missing library is a clear ninfer::Error at first use.
#include "ninfer/jit/nvrtc.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "ninfer/support/error.hpp"

#ifdef NINFER_JIT_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>
#endif

namespace ninfer::jit {

std::string CompiledKernel::lowered_name(const std::string& expression) const {
  for (const auto& [e, n] : entry.lowered)
    if (e == expression) return n;
  return expression;
}

#ifndef NINFER_JIT_WITH_CUDA

namespace {
[[noreturn]] void no_cuda() { throw Error("run-time kernel compilation needs a CUDA build of ninfer (-DNINFER_CUDA=ON)"); }
} // namespace
int nvrtc_version() { no_cuda(); }
bool nvrtc_supports_cubin(int, int) { no_cuda(); }
uint64_t cache_key(const CompileRequest&) { no_cuda(); }
std::vector<std::string> cuda_include_dirs() { return {}; }
CompiledKernel compile(const CompileRequest&, const KernelCache*, std::optional<uint64_t>) { no_cuda(); }
struct LoadedModule::Impl {};
LoadedModule::LoadedModule(const CompiledKernel&, int) { no_cuda(); }
LoadedModule::~LoadedModule() = default;
void* LoadedModule::function(const std::string&) const { no_cuda(); }
ninfer_kernel_resources LoadedModule::resources(const std::string&, int32_t) const { no_cuda(); }
void LoadedModule::launch(const std::string&, unsigned, unsigned, unsigned, void*, void**) const { no_cuda(); }
void LoadedModule::launch_function(void*, unsigned, unsigned, unsigned, unsigned, void*, void**) { no_cuda(); }
int LoadedModule::max_active_blocks_per_sm(void*, int, size_t) { no_cuda(); }

#else

namespace {

void* open_first(std::initializer_list<const char*> names, const char* what) {
  std::string tried;
  for (const char* n : names) {
    if (void* h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    tried += fmt::format("\n  {}: {}", n, ::dlerror());
  }
  throw Error(fmt::format("cannot load {} (needed for run-time kernel compilation); tried:{}", what, tried));
}

template <class F>
F sym(void* lib, const char* name, const char* what) {
  void* p = ::dlsym(lib, name);
  if (!p) throw Error(fmt::format("{} has no symbol {}", what, name));
  return reinterpret_cast<F>(p);
}

#define NINFER_NVRTC_FUNCS(X)                                                                                      \
  X(nvrtcVersion) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs) X(nvrtcCreateProgram)                     \
  X(nvrtcDestroyProgram) X(nvrtcAddNameExpression) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)                \
  X(nvrtcGetProgramLog) X(nvrtcGetLoweredName) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize)             \
  X(nvrtcGetPTX) X(nvrtcGetErrorString)

struct Nvrtc {
#define X(f) decltype(&::f) f;
  NINFER_NVRTC_FUNCS(X)
#undef X
  std::vector<int> archs; // supported sm numbers, ascending
  int version = 0;
};

const Nvrtc& nvrtc() {
  static std::once_flag once;
  static Nvrtc n;
  static std::string error;
  std::call_once(once, [] {
    try {
      void* lib = open_first({"libnvrtc.so." NINFER_NVRTC_SOVERSION, NINFER_CUDA_LIBRARY_DIR "/libnvrtc.so." NINFER_NVRTC_SOVERSION,
                              "libnvrtc.so"},
                             "NVRTC (libnvrtc)");
#define X(f) n.f = sym<decltype(&::f)>(lib, #f, "libnvrtc");
      NINFER_NVRTC_FUNCS(X)
#undef X
      int major = 0, minor = 0, count = 0;
      n.nvrtcVersion(&major, &minor);
      n.version = major * 1000 + minor * 10;
      n.nvrtcGetNumSupportedArchs(&count);
      n.archs.resize(static_cast<size_t>(count));
      if (count > 0) n.nvrtcGetSupportedArchs(n.archs.data());
      std::sort(n.archs.begin(), n.archs.end());
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw Error(error);
  return n;
}

#define NINFER_DRIVER_FUNCS(X)                                                                                     \
  X(cuInit) X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuGetErrorString) \
  X(cuLaunchKernel) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuCtxGetCurrent)

struct Driver {
#define X(f) decltype(&::f) f;
  NINFER_DRIVER_FUNCS(X)
#undef X
};

const Driver& driver() {
  static std::once_flag once;
  static Driver d;
  static std::string error;
  std::call_once(once, [] {
    try {
      void* lib = open_first({"libcuda.so.1", "libcuda.so"}, "the CUDA driver (libcuda.so.1)");
      // None of these entry points is versioned (_v2) in cuda.h, so the plain names are right.
#define X(f) d.f = sym<decltype(&::f)>(lib, #f, "libcuda");
      NINFER_DRIVER_FUNCS(X)
#undef X
      if (CUresult rc = d.cuInit(0); rc != CUDA_SUCCESS) throw Error(fmt::format("cuInit failed ({})", int(rc)));
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw Error(error);
  return d;
}

std::string driver_error(CUresult rc) {
  const char* s = nullptr;
  if (driver().cuGetErrorString(rc, &s) != CUDA_SUCCESS || !s) return fmt::format("CUDA driver error {}", int(rc));
  return s;
}

// "-arch=sm_90" when NVRTC can emit its machine code, else "-arch=compute_XY" for the newest
// virtual architecture it knows not above the target (the driver JIT-compiles that PTX).
std::pair<std::string, PayloadKind> target_arch(const Nvrtc& n, int cc_major, int cc_minor) {
  const int want = cc_major * 10 + cc_minor;
  if (std::find(n.archs.begin(), n.archs.end(), want) != n.archs.end())
    return {fmt::format("sm_{}", want), PayloadKind::Cubin};
  int best = 0;
  for (int a : n.archs)
    if (a <= want) best = a;
  if (best == 0)
    throw Error(fmt::format("NVRTC {}.{} cannot compile for compute {}.{} (it knows sm_{} to sm_{})", n.version / 1000,
                            (n.version % 1000) / 10, cc_major, cc_minor, n.archs.empty() ? 0 : n.archs.front(),
                            n.archs.empty() ? 0 : n.archs.back()));
  return {fmt::format("compute_{}", best), PayloadKind::Ptx};
}

uint64_t key_for(const CompileRequest& r, const std::string& arch, PayloadKind kind, int version) {
  KeyHasher h;
  h.add("ninfer-nvrtc").add(uint64_t{KernelCache::kFormatVersion}).add(r.source);
  h.add(uint64_t{r.options.size()});
  for (const auto& o : r.options) h.add(o);
  h.add(uint64_t{r.name_expressions.size()});
  for (const auto& e : r.name_expressions) h.add(e);
  h.add(uint64_t{r.headers.size()});
  for (const auto& [name, text] : r.headers) h.add(name).add(text);
  return h.add(arch).add(static_cast<uint64_t>(version)).add(static_cast<uint64_t>(kind)).value();
}

} // namespace

int nvrtc_version() { return nvrtc().version; }

std::vector<std::string> cuda_include_dirs() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("NINFER_CUDA_INCLUDE"); env && *env) candidates.emplace_back(env);
  // The toolkit NVRTC came from: <toolkit>/lib64/libnvrtc.so.N -> <toolkit>/include.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(nvrtc().nvrtcVersion), &info) && info.dli_fname) {
    std::error_code ec;
    const fs::path lib = fs::canonical(info.dli_fname, ec);
    if (!ec) candidates.push_back(lib.parent_path().parent_path() / "include");
  }
  candidates.emplace_back(NINFER_CUDA_INCLUDE_DIR);
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!fs::exists(c / "cuda_bf16.h", ec)) continue;
    std::vector<std::string> dirs{c.string()};
    // CUDA 13 keeps libcu++ (<cuda/std/...>) under include/cccl.
    if (fs::exists(c / "cccl" / "cuda" / "std", ec)) dirs.push_back((c / "cccl").string());
    return dirs;
  }
  return {};
}

bool nvrtc_supports_cubin(int cc_major, int cc_minor) {
  const auto& a = nvrtc().archs;
  return std::find(a.begin(), a.end(), cc_major * 10 + cc_minor) != a.end();
}

uint64_t cache_key(const CompileRequest& r) {
  const Nvrtc& n = nvrtc();
  const auto [arch, kind] = target_arch(n, r.cc_major, r.cc_minor);
  return key_for(r, arch, kind, n.version);
}

CompiledKernel compile(const CompileRequest& r, const KernelCache* cache, std::optional<uint64_t> key) {
  const Nvrtc& n = nvrtc();
  const auto [arch, kind] = target_arch(n, r.cc_major, r.cc_minor);
  CompiledKernel out;
  out.arch = arch;
  out.key = key ? *key : key_for(r, arch, kind, n.version);
  if (cache) {
    if (std::optional<CacheEntry> e = cache->load(out.key); e && e->kind == kind) {
      out.entry = std::move(*e);
      out.from_cache = true;
      return out;
    }
  }

  nvrtcProgram prog = nullptr;
  auto check = [&](nvrtcResult rc, const char* what) {
    if (rc != NVRTC_SUCCESS)
      throw Error(fmt::format("NVRTC {} failed for kernel '{}': {}", what, r.name, n.nvrtcGetErrorString(rc)));
  };
  std::vector<const char*> header_text, header_names;
  for (const auto& [name, text] : r.headers) {
    header_names.push_back(name);
    header_text.push_back(text);
  }
  const std::string file = r.name.ends_with(".cu") ? r.name : r.name + ".cu";
  check(n.nvrtcCreateProgram(&prog, r.source.c_str(), file.c_str(), static_cast<int>(r.headers.size()),
                             header_text.data(), header_names.data()),
        "create");
  struct Guard {
    const Nvrtc& n;
    nvrtcProgram* p;
    ~Guard() { n.nvrtcDestroyProgram(p); }
  } guard{n, &prog};
  for (const auto& e : r.name_expressions) check(n.nvrtcAddNameExpression(prog, e.c_str()), "name expression");
  std::vector<std::string> opts = {"-arch=" + arch, "-std=c++17"};
  opts.insert(opts.end(), r.options.begin(), r.options.end());
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const nvrtcResult rc = n.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  n.nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) n.nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (rc != NVRTC_SUCCESS)
    throw Error(fmt::format("NVRTC could not compile kernel '{}' for {} ({}); its log:\n{}", r.name, arch,
                            n.nvrtcGetErrorString(rc), log));
  if (!log.empty()) spdlog::debug("NVRTC log for kernel '{}':\n{}", r.name, log);
  for (const auto& e : r.name_expressions) {
    const char* lowered = nullptr;
    check(n.nvrtcGetLoweredName(prog, e.c_str(), &lowered), "lowered name");
    out.entry.lowered.emplace_back(e, lowered);
  }
  out.entry.kind = kind;
  size_t size = 0;
  if (kind == PayloadKind::Cubin) {
    check(n.nvrtcGetCUBINSize(prog, &size), "cubin size");
    out.entry.image.resize(size);
    check(n.nvrtcGetCUBIN(prog, out.entry.image.data()), "cubin");
  } else {
    check(n.nvrtcGetPTXSize(prog, &size), "PTX size");
    out.entry.image.resize(size);
    check(n.nvrtcGetPTX(prog, out.entry.image.data()), "PTX");
  }
  if (cache) cache->store(out.key, out.entry);
  return out;
}

struct LoadedModule::Impl {
  CUmodule module = nullptr;
  CompiledKernel kernel;
  std::vector<std::unique_ptr<std::string>> symbols; // stable storage for resources().symbol
};

LoadedModule::LoadedModule(const CompiledKernel& k, int device_ordinal) : impl_(std::make_unique<Impl>()) {
  const Driver& d = driver();
  int previous = -1;
  if (device_ordinal >= 0) {
    if (cudaError_t rc = cudaGetDevice(&previous); rc != cudaSuccess) previous = -1;
    if (cudaError_t rc = cudaSetDevice(device_ordinal); rc != cudaSuccess)
      throw Error(fmt::format("cannot select CUDA device {} for kernel {}: {}", device_ordinal, k.arch,
                              cudaGetErrorString(rc)));
  }
  struct Restore {
    int device;
    ~Restore() {
      if (device >= 0) cudaSetDevice(device);
    }
  } restore{device_ordinal >= 0 ? previous : -1};
  // The runtime's primary context of the current device, so modules and runtime launches share it.
  if (cudaError_t rc = cudaFree(nullptr); rc != cudaSuccess)
    throw Error(fmt::format("no CUDA context for kernel {}: {}", k.arch, cudaGetErrorString(rc)));
  impl_->kernel = k;
  char log[4096] = {0};
  CUjit_option opt[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* val[] = {log, reinterpret_cast<void*>(sizeof log)};
  // PTX must be NUL-terminated: std::string's buffer is.
  if (CUresult rc = d.cuModuleLoadDataEx(&impl_->module, impl_->kernel.entry.image.c_str(), 2, opt, val);
      rc != CUDA_SUCCESS)
    throw Error(fmt::format("cannot load the {} image ({} bytes): {} {}", k.arch, k.entry.image.size(),
                            driver_error(rc), log));
}

LoadedModule::~LoadedModule() {
  if (impl_ && impl_->module) driver().cuModuleUnload(impl_->module);
}

void* LoadedModule::function(const std::string& expression) const {
  const std::string name = impl_->kernel.lowered_name(expression);
  CUfunction f = nullptr;
  if (CUresult rc = driver().cuModuleGetFunction(&f, impl_->module, name.c_str()); rc != CUDA_SUCCESS)
    throw Error(fmt::format("kernel {} ({}) is not in the module: {}", expression, name, driver_error(rc)));
  return f;
}

ninfer_kernel_resources LoadedModule::resources(const std::string& expression, int32_t threads_per_block) const {
  auto f = static_cast<CUfunction>(function(expression));
  auto attr = [&](CUfunction_attribute a) {
    int v = 0;
    if (CUresult rc = driver().cuFuncGetAttribute(&v, a, f); rc != CUDA_SUCCESS)
      throw Error(fmt::format("cuFuncGetAttribute({}) for {}: {}", int(a), expression, driver_error(rc)));
    return v;
  };
  impl_->symbols.push_back(std::make_unique<std::string>(impl_->kernel.lowered_name(expression)));
  ninfer_kernel_resources r{};
  r.symbol = impl_->symbols.back()->c_str();
  r.threads_per_block = threads_per_block;
  r.registers_per_thread = attr(CU_FUNC_ATTRIBUTE_NUM_REGS);
  r.static_smem_bytes = attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  r.local_bytes_per_thread = attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
  r.max_threads_per_block = attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  return r;
}

void LoadedModule::launch_function(void* function, unsigned grid_x, unsigned grid_y, unsigned block_x,
                                   unsigned dynamic_smem, void* stream, void** params) {
  // A driver launch needs a current context; a runtime launch would bind the primary context to a
  // thread making its first CUDA call, so do the same (never the case in a thread that captures).
  CUcontext ctx = nullptr;
  if (driver().cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && !ctx) (void)cudaFree(nullptr);
  if (CUresult rc = driver().cuLaunchKernel(static_cast<CUfunction>(function), grid_x, grid_y, 1, block_x, 1, 1,
                                            dynamic_smem, static_cast<CUstream>(stream), params, nullptr);
      rc != CUDA_SUCCESS)
    throw Error(fmt::format("grid ({}, {}), block {}: {}", grid_x, grid_y, block_x, driver_error(rc)));
}

int LoadedModule::max_active_blocks_per_sm(void* function, int block, size_t dynamic_smem) {
  int n = 0;
  if (CUresult rc = driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, static_cast<CUfunction>(function), block,
                                                                         dynamic_smem);
      rc != CUDA_SUCCESS)
    throw Error(fmt::format("cuOccupancyMaxActiveBlocksPerMultiprocessor: {}", driver_error(rc)));
  return n;
}

void LoadedModule::launch(const std::string& expression, unsigned grid_x, unsigned block_x, unsigned dynamic_smem,
                          void* stream, void** params) const {
  auto f = static_cast<CUfunction>(function(expression));
  if (CUresult rc = driver().cuLaunchKernel(f, grid_x, 1, 1, block_x, 1, 1, dynamic_smem, static_cast<CUstream>(stream),
                                            params, nullptr);
      rc != CUDA_SUCCESS)
    throw Error(fmt::format("launch of {} (grid {}, block {}): {}", expression, grid_x, block_x, driver_error(rc)));
}

#endif

} // namespace ninfer::jit
