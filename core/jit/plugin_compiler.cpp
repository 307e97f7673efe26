// Compiles a plugin's CUDA programs with NVRTC for one device (see plugin_compiler.hpp).
#include "ninfer/jit/plugin_compiler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ninfer/support/error.hpp"
#include "ninfer/jit/kernel_cache.hpp"
#include "ninfer/jit/nvrtc.hpp"

namespace ninfer::jit {
namespace {

int32_t fail(int32_t status, char* err, size_t err_len, const std::string& msg) {
  std::snprintf(err, err_len, "%s", msg.c_str());
  return status;
}

CompileRequest request_for(const ninfer_cuda_program& p, const std::vector<std::string>& include_dirs, int cc_major,
                           int cc_minor) {
  CompileRequest r;
  r.name = p.name ? p.name : "program";
  r.source = p.source ? p.source : "";
  for (int32_t i = 0; i < p.header_count; ++i) r.headers.emplace_back(p.header_names[i], p.header_sources[i]);
  for (int32_t i = 0; i < p.option_count; ++i) r.options.emplace_back(p.options[i]);
  for (const auto& d : include_dirs) r.options.push_back("-I" + d);
  r.cc_major = cc_major;
  r.cc_minor = cc_minor;
  return r;
}

// Compiled images are handed out by pointer for the life of the process.
std::deque<CompiledKernel>& kept() {
  static std::deque<CompiledKernel> k;
  return k;
}
std::mutex& kept_mutex() {
  static std::mutex m;
  return m;
}

} // namespace

int32_t compile_for_plugin(const ninfer_cuda_program* programs, int32_t count, int32_t cc_major, int32_t cc_minor,
                           ninfer_cuda_image* images, char* err, size_t err_len) {
  if (count <= 0) return NINFER_OK;
  std::vector<std::string> include_dirs;
  try {
    (void)nvrtc_version(); // NVRTC present?
    include_dirs = cuda_include_dirs();
  } catch (const Error& e) {
    return fail(NINFER_ERR_UNSUPPORTED, err, err_len, e.what());
  }
  if (include_dirs.empty())
    return fail(NINFER_ERR_UNSUPPORTED, err, err_len,
                "the CUDA toolkit headers NVRTC needs (cuda_bf16.h) were not found; set NINFER_CUDA_INCLUDE to the "
                "toolkit's include directory");

  static const KernelCache cache;
  std::vector<CompileRequest> requests;
  std::vector<uint64_t> keys; // hashed once: each program carries the plugin's whole kernel tree
  int missing = 0; // programs not in the kernel cache: a first start compiles, which takes a while
  for (int32_t i = 0; i < count; ++i) {
    requests.push_back(request_for(programs[i], include_dirs, cc_major, cc_minor));
    keys.push_back(cache_key(requests.back()));
    std::error_code ec;
    missing += !std::filesystem::exists(cache.file_for(keys.back()), ec);
  }
  if (missing > 0)
    spdlog::info("compiling {} of {} CUDA programs for compute {}.{} with NVRTC (first start with these kernels; "
                 "cached in {} afterwards)",
                 missing, count, cc_major, cc_minor, cache.dir().string());
  std::vector<CompiledKernel> out(static_cast<size_t>(count));
  std::vector<std::string> errors(static_cast<size_t>(count));
  std::atomic<int32_t> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  // One NVRTC program per thread: NVRTC is thread-safe across programs, and a cold start of a
  // whole plugin is dominated by its few largest files.
  auto work = [&] {
    for (int32_t i = next++; i < count; i = next++) {
      try {
        out[i] = compile(requests[i], &cache, keys[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  const unsigned threads = std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, static_cast<unsigned>(count));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (int32_t i = 0; i < count; ++i)
    if (!errors[i].empty()) return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, errors[i]);

  int cached = 0;
  std::lock_guard lock(kept_mutex());
  for (int32_t i = 0; i < count; ++i) {
    CompiledKernel& k = kept().emplace_back(std::move(out[i]));
    cached += k.from_cache;
    images[i] = ninfer_cuda_image{k.entry.image.data(), k.entry.image.size(),
                                  k.entry.kind == PayloadKind::Ptx ? 1 : 0, k.from_cache ? 1 : 0};
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::log(missing > 0 ? spdlog::level::info : spdlog::level::debug,
              "{} CUDA programs for compute {}.{} ready in {:.1f} s ({} from the kernel cache)", count, cc_major,
              cc_minor, s, cached);
  return NINFER_OK;
}

} // namespace ninfer::jit
