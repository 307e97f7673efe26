#include <gtest/gtest.h>

#include <filesystem>

#include "described_cards.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ninfer-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

bool mentions(const std::vector<PluginProblem>& problems, const std::string& file, const std::string& text) {
  for (const auto& p : problems)
    if (p.file.filename() == file && p.message.find(text) != std::string::npos) return true;
  return false;
}

} // namespace

TEST(PluginHost, LoadsEveryBuiltPluginWithItsVariants) {
  const PluginHost& host = build_plugins();
  EXPECT_TRUE(host.problems().empty());
  const LoadedPlugin* cpu = host.find("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->arch(), "cpu");
  EXPECT_NE(cpu->find_variant("gdn_gating", "reference"), nullptr);
#ifdef NINFER_TEST_HAVE_CUDA
  for (auto [name, arch] : {std::pair{"cuda-sm89", "sm_89"}, {"cuda-sm90", "sm_90"}, {"cuda-sm120a", "sm_120a"}}) {
    const LoadedPlugin* p = host.find(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->arch(), arch);
    for (const char* v : {"unsplit", "split2", "split4", "split8", "per_head", "mma"})
      EXPECT_NE(p->find_variant("gdn_gating", v), nullptr) << name << " " << v;
  }
#endif
}

TEST(PluginHost, SplitVariantsReallyDifferInResources) {
  for (const LoadedPlugin* p : cuda_plugins()) {
    const ninfer_variant* unsplit = p->find_variant("gdn_gating", "unsplit");
    ASSERT_NE(unsplit, nullptr);
    for (const char* name : {"split2", "split4", "split8"}) {
      const ninfer_variant* v = p->find_variant("gdn_gating", name);
      ASSERT_NE(v, nullptr);
      EXPECT_TRUE(v->cooperative) << p->name() << " " << name;
      EXPECT_FALSE(unsplit->cooperative);
      const bool differs = v->resources.registers_per_thread != unsplit->resources.registers_per_thread ||
                           v->resources.threads_per_block != unsplit->resources.threads_per_block;
      EXPECT_TRUE(differs) << p->name() << " " << name << " has the unsplit kernel's resources";
      EXPECT_GT(v->resources.registers_per_thread, 0);
    }
  }
}

TEST(PluginHost, RefusesBrokenPluginsByNameAndKeepsTheRest) {
  const fs::path dir = temp_dir("bad-plugins");
  fs::copy_file(plugin_dir() / "libcpu.so", dir / "libcpu.so");
  for (const auto& e : fs::directory_iterator(NINFER_BAD_PLUGIN_DIR)) fs::copy_file(e.path(), dir / e.path().filename());
  PluginHost host;
  host.load_directory(dir);
  ASSERT_EQ(host.plugins().size(), 1u);
  EXPECT_EQ(host.plugins().front()->name(), "cpu");
  const auto& pr = host.problems();
  EXPECT_TRUE(mentions(pr, "libbad_wrong_abi.so", "ABI version 999")) ;
  EXPECT_TRUE(mentions(pr, "libbad_no_entry.so", "no 'ninfer_plugin_entry' symbol"));
  EXPECT_TRUE(mentions(pr, "libnot_elf.so", "cannot be loaded"));
  EXPECT_TRUE(mentions(pr, "libbad_bad_variant.so", "variant gdn_gating/liar refused: CUDA variant without kernel resources"));
  EXPECT_TRUE(mentions(pr, "libbad_cooperative_library.so",
                       "variant gdn_gating/cooperative_library refused: a library variant cannot be cooperative"));
  // The CPU plugin still works after its neighbours failed.
  EXPECT_NE(host.choose(host_device()).chosen, nullptr);
  fs::remove_all(dir);
}

namespace {
// A host over the CPU plugin and the fallback test plugin `fallback` (libtest_fallback_ok.so or
// libtest_fallback_broken.so), in a folder of their own.
struct FallbackHost {
  fs::path dir;
  PluginHost host;
  explicit FallbackHost(const std::string& fallback) : dir(temp_dir("fallback-" + fallback)) {
    fs::copy_file(plugin_dir() / "libcpu.so", dir / "libcpu.so");
    fs::copy_file(fs::path(NINFER_FALLBACK_PLUGIN_DIR) / fallback, dir / fallback);
    host.load_directory(dir);
  }
  ~FallbackHost() { fs::remove_all(dir); }
  const LoadedPlugin* loaded(const std::string& name) const {
    for (const auto& p : host.plugins())
      if (p->name() == name) return p.get();
    return nullptr;
  }
};
const PluginScore* score_of(const PluginChoice& c, const LoadedPlugin* p) {
  for (const auto& s : c.scores)
    if (s.plugin == p) return &s;
  return nullptr;
}
} // namespace

// A fallback plugin (cuda-generic compiles its kernels while it registers) is loaded but
// registered only when it may be chosen: forced, found by name, or for a device no other plugin
// serves. Elsewhere its score is 0 and says which plugin serves the device.
TEST(PluginHost, FallbackPluginsRegisterOnlyWhenTheyMayBeChosen) {
  const ninfer_device_info h200 = catalog().describe(catalog().require_device("H200"));
  {
    FallbackHost f("libtest_fallback_ok.so");
    const LoadedPlugin* fb = f.loaded("test-fallback");
    ASSERT_NE(fb, nullptr);
    EXPECT_TRUE(fb->deferred);
    const PluginChoice cpu = f.host.choose(host_device());
    ASSERT_NE(cpu.chosen, nullptr);
    EXPECT_EQ(cpu.chosen->name(), "cpu");
    EXPECT_TRUE(fb->deferred) << "registered although the CPU plugin serves the host";
    const PluginScore* s = score_of(cpu, fb);
    ASSERT_NE(s, nullptr) << "every loaded plugin is in the scores";
    EXPECT_EQ(s->score, 0);
    EXPECT_NE(s->reason.find("not registered: cpu serves this device"), std::string::npos) << s->reason;
    // Another plugin requested by name: the fallback stays unregistered.
    EXPECT_EQ(f.host.choose(host_device(), "cpu").chosen->name(), "cpu");
    EXPECT_TRUE(fb->deferred);
    // A card no plugin of this folder serves: the fallback is registered, scored and chosen.
    const PluginChoice gpu = f.host.choose(h200);
    EXPECT_FALSE(fb->deferred);
    EXPECT_EQ(gpu.chosen, fb);
  }
  {
    FallbackHost f("libtest_fallback_ok.so"); // forced by name
    const LoadedPlugin* fb = f.loaded("test-fallback");
    ASSERT_NE(fb, nullptr);
    EXPECT_EQ(f.host.choose(host_device(), "test-fallback").chosen, fb);
    EXPECT_FALSE(fb->deferred);
  }
  {
    FallbackHost f("libtest_fallback_ok.so"); // found by name
    const LoadedPlugin* fb = f.host.find("test-fallback");
    ASSERT_NE(fb, nullptr);
    EXPECT_FALSE(fb->deferred);
    EXPECT_TRUE(f.host.problems().empty());
  }
  {
    FallbackHost f("libtest_fallback_broken.so"); // its registration fails when it is needed
    const LoadedPlugin* fb = f.loaded("test-fallback-broken");
    ASSERT_NE(fb, nullptr);
    EXPECT_TRUE(f.host.problems().empty()) << "nothing registered yet, nothing failed yet";
    const PluginChoice gpu = f.host.choose(h200);
    EXPECT_EQ(gpu.chosen, nullptr) << "a plugin whose registration failed is never chosen";
    EXPECT_TRUE(fb->failed);
    EXPECT_TRUE(mentions(f.host.problems(), "libtest_fallback_broken.so", "registration failed"));
    EXPECT_EQ(f.host.find("test-fallback-broken"), nullptr);
    EXPECT_NE(f.host.choose(host_device()).chosen, nullptr) << "the CPU plugin still serves the host";
  }
}

TEST(PluginHost, MissingDirectoryIsAClearError) {
  PluginHost host;
  try {
    host.load_directory("/nonexistent/ninfer-plugins");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ninfer-plugins does not exist"), std::string::npos) << e.what();
  }
}

TEST(PluginScore, ExactArchitectureOnlyOnEveryKnownCard) {
  const PluginHost& host = build_plugins();
  for (const auto& card : catalog().devices()) {
    const ninfer_device_info dev = catalog().describe(card);
    const PluginChoice choice = host.choose(dev);
    for (const auto& s : choice.scores) {
      const std::string arch = s.plugin->arch();
      if (arch == "cpu") {
        EXPECT_EQ(s.score, 0) << card.name << ": the CPU plugin claimed a GPU";
        continue;
      }
      if (is_generic_plugin(*s.plugin)) {
        // It reads its resources on the GPU it runs on, so it never plans for a described card
        // (until a choice needs it, it is not even registered: a fallback).
        EXPECT_EQ(s.score, 0) << card.name << ": " << s.reason;
        const char* why = s.plugin->deferred ? "not registered" : "described card";
        EXPECT_NE(s.reason.find(why), std::string::npos) << card.name << ": " << s.reason;
        continue;
      }
      const ArchLimits* a = catalog().find_arch(arch);
      ASSERT_NE(a, nullptr) << arch;
      const bool exact = a->cc_major == dev.cc_major && a->cc_minor == dev.cc_minor;
      EXPECT_EQ(s.score > 0, exact) << s.plugin->name() << " on " << card.name << ": " << s.reason;
      EXPECT_FALSE(s.reason.empty());
    }
    if (plugin_for_arch(card.arch)) {
      ASSERT_NE(choice.chosen, nullptr) << card.name;
      EXPECT_EQ(choice.chosen->arch(), card.arch);
    }
  }
}

TEST(PluginScore, NoFamilyFallbackForAnUnbuiltArchitecture) {
  // An sm_86 card (RTX 3090): same major as sm_89, nothing built for it.
  ninfer_device_info dev = catalog().describe(catalog().require_device("RTX 4090"));
  dev.cc_major = 8;
  dev.cc_minor = 6;
  std::snprintf(dev.name, sizeof dev.name, "hypothetical sm_86 card");
  const PluginChoice choice = build_plugins().choose(dev);
  EXPECT_EQ(choice.chosen, nullptr);
  for (const auto& s : choice.scores) EXPECT_EQ(s.score, 0) << s.plugin->name();
}

TEST(PluginScore, ForcedPluginMustStillMatch) {
  if (cuda_plugins().empty()) GTEST_SKIP() << "build has no CUDA plugins";
  const ninfer_device_info h200 = catalog().describe(catalog().require_device("H200"));
  EXPECT_EQ(build_plugins().choose(h200, "cuda-sm120a").chosen, nullptr);
  const LoadedPlugin* chosen = build_plugins().choose(h200, "cuda-sm90").chosen;
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->name(), "cuda-sm90");
}

TEST(PluginScore, HostIsServedByTheCpuPlugin) {
  const PluginChoice c = build_plugins().choose(host_device());
  ASSERT_NE(c.chosen, nullptr);
  EXPECT_EQ(c.chosen->name(), "cpu");
}

// cuda-generic: below every exact plugin, above zero only on the live GPU it registered for
// (compute 8.0 or newer); never on the CPU or a described card. With no GPU it loads cleanly,
// registers nothing and says why.
TEST(PluginScore, GenericPluginOnlyForTheLiveGpuItLoadedOn) {
  const LoadedPlugin* g = build_plugins().find("cuda-generic");
  if (!g) GTEST_SKIP() << "this build has no cuda-generic plugin";
  EXPECT_TRUE(is_generic_plugin(*g));
  char why[256] = {0};
  const ninfer_device_info host = host_device();
  EXPECT_EQ(g->abi->score(&host, why, sizeof why), 0);
  EXPECT_NE(std::string(why).find("CUDA devices only"), std::string::npos) << why;
  // A described H200 (the card cuda-sm90 was built for): refused, with the reason.
  const ninfer_device_info h200 = catalog().describe(catalog().require_device("H200"));
  EXPECT_EQ(g->abi->score(&h200, why, sizeof why), 0);
  EXPECT_NE(std::string(why).find("described card"), std::string::npos) << why;
  // The same card as if it were live but not the one the plugin loaded on (or with no GPU here).
  ninfer_device_info live = h200;
  live.described = 0;
  live.ordinal = 7;
  EXPECT_EQ(g->abi->score(&live, why, sizeof why), 0);
  EXPECT_FALSE(std::string(why).empty());
  // Pre-Ampere: refused whatever else holds.
  live.cc_major = 7;
  live.cc_minor = 5;
  EXPECT_EQ(g->abi->score(&live, why, sizeof why), 0);
  EXPECT_NE(std::string(why).find("8.0 or newer"), std::string::npos) << why;
  const Discovery d = discover_devices();
  if (d.cuda.empty()) {
    EXPECT_TRUE(g->variants.empty()) << "without a GPU the generic plugin has no resources to register";
    EXPECT_EQ(g->abi->score(&h200, why, sizeof why), 0);
  }
}
