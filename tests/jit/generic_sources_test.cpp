// cuda-generic's run-time compilation, without a GPU: every kernel program it embeds compiles
// with NVRTC through the core's plugin compiler (the registrar's compile_cuda), the images hold
// exactly the kernels nvcc built for an exact plugin (its build-time resource table, an
// independent list), a second start takes them all from the kernel cache, a broken program is
// reported by name with NVRTC's log, and no kernel source bypasses device_entry().
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ninfer/jit/plugin_compiler.hpp"
#include "nvrtc_programs.hpp"
#include "nvrtc_sources.hpp"
#include "nvrtc_test_env.hpp"
#include <unistd.h>

#ifdef NINFER_TEST_EXACT_PLUGIN
#include "build_resources.hpp"
#endif

namespace ninfer {
namespace {

namespace src = cuda_plugin::nvrtc_sources;

// The plugin's own program list, as it hands it to the core.
struct Programs {
  cuda_plugin::nvrtc_sources::ProgramList source;
  std::vector<ninfer_cuda_program>& list = source.programs;
  std::vector<std::string>& names = source.names;
};

// Kernel names in a cubin: its ELF section names ".text.<kernel>".
std::set<std::string> cubin_kernels(const ninfer_cuda_image& im) {
  const std::string bytes(static_cast<const char*>(im.data), im.size);
  std::set<std::string> out;
  for (size_t at = bytes.find(".text."); at != std::string::npos; at = bytes.find(".text.", at + 1)) {
    const size_t begin = at + 6, end = bytes.find('\0', begin);
    if (end != std::string::npos && end > begin) out.insert(bytes.substr(begin, end - begin));
  }
  return out;
}

// A fresh kernel cache for this process (the plugin compiler's cache is created on first use),
// removed afterwards.
class GenericNvrtc : public ::testing::Test {
 protected:
  static std::filesystem::path cache_dir() {
    return std::filesystem::temp_directory_path() / ("ninfer-generic-nvrtc-" + std::to_string(::getpid()));
  }
  static void SetUpTestSuite() {
    std::filesystem::remove_all(cache_dir());
    ::setenv("NINFER_CACHE_DIR", cache_dir().c_str(), 1);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(cache_dir(), ec);
  }
};

TEST_F(GenericNvrtc, EveryProgramCompilesToTheExactPluginsKernelsThenComesFromTheCache) {
  NINFER_REQUIRE_NVRTC();
  Programs p;
  ASSERT_GE(p.list.size(), 15u) << "the embedded program list lost files";
  for (auto [major, minor] : {std::pair{8, 0}, std::pair{9, 0}}) {
    SCOPED_TRACE("compute " + std::to_string(major) + "." + std::to_string(minor));
    std::vector<ninfer_cuda_image> images(p.list.size());
    char err[8192] = {0};
    ASSERT_EQ(jit::compile_for_plugin(p.list.data(), static_cast<int32_t>(p.list.size()), major, minor,
                                      images.data(), err, sizeof err),
              NINFER_OK)
        << err;
    std::set<std::string> kernels;
    for (size_t i = 0; i < images.size(); ++i) {
      EXPECT_EQ(images[i].is_ptx, 0) << p.names[i] << ": NVRTC knows sm_" << major << minor << ", expected a cubin";
      EXPECT_EQ(images[i].from_cache, 0) << p.names[i] << ": the cache was fresh";
      for (const auto& k : cubin_kernels(images[i])) EXPECT_TRUE(kernels.insert(k).second) << k << " defined twice";
    }
#ifdef NINFER_TEST_EXACT_PLUGIN
    std::set<std::string> expected;
    for (size_t i = 0; i < cuda_plugin::kBuildResourceCount; ++i) expected.insert(cuda_plugin::kBuildResources[i].symbol);
    std::string only_nvrtc, only_nvcc;
    for (const auto& k : kernels)
      if (!expected.count(k)) only_nvrtc += " " + k;
    for (const auto& k : expected)
      if (!kernels.count(k)) only_nvcc += " " + k;
    EXPECT_TRUE(only_nvrtc.empty() && only_nvcc.empty())
        << "NVRTC's kernels differ from " NINFER_TEST_EXACT_PLUGIN "'s (nvcc): only NVRTC's:" << only_nvrtc
        << "; only nvcc's:" << only_nvcc;
#else
    EXPECT_GE(kernels.size(), 50u);
#endif
    // A second start: every program from the kernel cache, byte for byte the same image.
    std::vector<ninfer_cuda_image> again(p.list.size());
    ASSERT_EQ(jit::compile_for_plugin(p.list.data(), static_cast<int32_t>(p.list.size()), major, minor, again.data(),
                                      err, sizeof err),
              NINFER_OK)
        << err;
    for (size_t i = 0; i < again.size(); ++i) {
      EXPECT_EQ(again[i].from_cache, 1) << p.names[i];
      EXPECT_EQ(std::string(static_cast<const char*>(again[i].data), again[i].size),
                std::string(static_cast<const char*>(images[i].data), images[i].size))
          << p.names[i];
    }
  }
}

TEST_F(GenericNvrtc, ABrokenProgramIsNamedWithNvrtcsLog) {
  NINFER_REQUIRE_NVRTC();
  Programs p;
  const std::string broken = std::string(src::kPrograms[0].text) + "\n__global__ void ninfer_broken() { undeclared_x = 1; }\n";
  ninfer_cuda_program bad = p.list[0];
  bad.name = "cuda-generic/broken.cu";
  bad.source = broken.c_str();
  ninfer_cuda_image image{};
  char err[8192] = {0};
  EXPECT_EQ(jit::compile_for_plugin(&bad, 1, 9, 0, &image, err, sizeof err), NINFER_ERR_INVALID_ARGUMENT);
  const std::string msg = err;
  EXPECT_NE(msg.find("cuda-generic/broken.cu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("undeclared_x"), std::string::npos) << msg;
}

// Every runtime call on a kernel must go through device_entry() (common/grid_dependency.cu), or
// cuda-generic would hand the runtime the compute_80 PTX stub instead of its NVRTC kernel.
TEST(GenericNvrtcSources, NoKernelSourceCallsTheRuntimeOnAKernelDirectly) {
  const std::regex direct(R"(\b(cudaFuncSetAttribute|cudaFuncGetAttributes|cudaOccupancyMaxActiveBlocksPerMultiprocessor|cudaLaunchKernel\w*|cudaLaunchCooperativeKernel)\s*\()");
  const std::filesystem::path root = NINFER_SOURCE_ROOT;
  int scanned = 0;
  // The kernel families' folders under plugins/cuda/kernels, then the plugins' own sources.
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root / "plugins/cuda/kernels"))
    files.push_back(e.path());
  for (const auto& dir : {root / "plugins/cuda", root / "plugins/cuda-generic"})
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  for (const auto& path : files) {
    const auto ext = path.extension();
    if (ext != ".cu" && ext != ".cuh" && ext != ".hpp" && ext != ".cpp") continue;
    if (path.filename() == "grid_dependency.cu") continue; // the one place that maps kernels
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    // Comments and string literals (messages naming these functions) are not calls.
    static const std::regex comment_or_string(R"(//[^\n]*|"(\\.|[^"\\])*")");
    const std::string s = std::regex_replace(text.str(), comment_or_string, "\"\"");
    // A call is fine when its arguments pass the kernel through device_entry().
    for (std::sregex_iterator m(s.begin(), s.end(), direct), end; m != end; ++m) {
      const std::string call = s.substr(m->position(), s.find(';', m->position()) - m->position());
      EXPECT_NE(call.find("device_entry("), std::string::npos) << path << " calls the runtime directly: " << call;
    }
    ++scanned;
  }
  EXPECT_GT(scanned, 20);
}

} // namespace
} // namespace ninfer
