// The run-time kernel cache: file format, atomic stores, corruption handling, key sensitivity,
// and NVRTC compiles through it. Compiling needs NVRTC but no GPU, so this runs in CI; loading
// the result is tested on the GPU (jit_gpu_test.cpp).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "ninfer/support/error.hpp"
#include "ninfer/jit/kernel_cache.hpp"
#include "ninfer/jit/nvrtc.hpp"
#include "nvrtc_test_env.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::jit;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ninfer-jit-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// A random entry: binary image bytes (NULs included) and a few lowered names.
CacheEntry random_entry(std::mt19937_64& rng, size_t image_bytes) {
  CacheEntry e;
  e.kind = rng() % 2 ? PayloadKind::Cubin : PayloadKind::Ptx;
  e.image.resize(image_bytes);
  for (char& c : e.image) c = static_cast<char>(rng());
  for (int i = 0, n = int(rng() % 4); i < n; ++i)
    e.lowered.emplace_back("k<" + std::to_string(rng() % 100) + ">", "_Z1kILi" + std::to_string(rng()) + "EEvv");
  return e;
}

// A templated kernel: the template parameter by name expression, a tile size by -D.
const char* kScaleSource = R"(
#ifndef TILE
#error TILE must be defined
#endif
template <int Scale>
__global__ void __launch_bounds__(TILE) scale(const float* x, float* y, int n) {
  int i = blockIdx.x * TILE + threadIdx.x;
  if (i < n) y[i] = x[i] * Scale;
}
)";

CompileRequest scale_request(int scale, int tile, int major = 9, int minor = 0) {
  CompileRequest r;
  r.name = "test/scale" + std::to_string(scale) + "x" + std::to_string(tile);
  r.source = kScaleSource;
  r.options = {"-DTILE=" + std::to_string(tile)};
  r.name_expressions = {"scale<" + std::to_string(scale) + ">"};
  r.cc_major = major;
  r.cc_minor = minor;
  return r;
}

} // namespace

TEST(JitHash, Fnv1aMatchesPublishedVectors) {
  // Reference values of the 64-bit FNV-1a definition (Fowler/Noll/Vo test vectors).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  // Chaining equals hashing the concatenation.
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
  // Length-prefixed fields: the split point matters.
  EXPECT_NE(KeyHasher().add("ab").add("c").value(), KeyHasher().add("a").add("bc").value());
}

TEST(JitCacheFile, RoundTripsRandomEntries) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 20; ++i) {
    const CacheEntry e = random_entry(rng, rng() % 5000);
    const uint64_t key = rng();
    std::string why;
    const auto back = KernelCache::decode(key, KernelCache::encode(key, e), &why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(*back, e);
  }
}

TEST(JitCacheFile, EveryTruncationAndEveryFlippedByteIsDetected) {
  std::mt19937_64 rng(std::random_device{}());
  const CacheEntry e = random_entry(rng, 300);
  const uint64_t key = rng();
  const std::string good = KernelCache::encode(key, e);
  for (size_t n = 0; n < good.size(); ++n) {
    std::string why;
    EXPECT_FALSE(KernelCache::decode(key, std::string_view(good).substr(0, n), &why)) << "truncated to " << n;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ (1 + rng() % 255));
    std::string why;
    EXPECT_FALSE(KernelCache::decode(key, bad, &why)) << "byte " << i << " flipped";
  }
  std::string why;
  EXPECT_FALSE(KernelCache::decode(key + 1, good, &why)); // a file renamed to another key
  EXPECT_NE(why.find("key"), std::string::npos) << why;
}

TEST(JitCacheDir, EnvironmentOrder) {
  const auto saved = [](const char* n) { const char* v = std::getenv(n); return v ? std::optional<std::string>(v) : std::nullopt; };
  const auto c = saved("NINFER_CACHE_DIR"), x = saved("XDG_CACHE_HOME"), h = saved("HOME");
  ::setenv("NINFER_CACHE_DIR", "/a/b", 1);
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_kernel_cache_dir(), fs::path("/a/b/kernels")); // beside schedules/ (ninfer::cache_root)
  ::setenv("NINFER_CACHE_DIR", "", 1);
  EXPECT_EQ(default_kernel_cache_dir(), fs::path("/x/ninfer/kernels"));
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_kernel_cache_dir(), fs::path("/home/u/.cache/ninfer/kernels"));
  auto restore = [](const char* n, const std::optional<std::string>& v) { v ? (void)::setenv(n, v->c_str(), 1) : (void)::unsetenv(n); };
  restore("NINFER_CACHE_DIR", c);
  restore("XDG_CACHE_HOME", x);
  restore("HOME", h);
}

TEST(JitCacheStore, CorruptOrTruncatedFilesAreDeletedAndReportedAsMisses) {
  std::mt19937_64 rng(std::random_device{}());
  const KernelCache cache(fresh_dir("corrupt"));
  const uint64_t key = rng();
  const CacheEntry e = random_entry(rng, 1000);
  EXPECT_FALSE(cache.load(key)); // miss: nothing there
  cache.store(key, e);
  ASSERT_TRUE(cache.load(key));
  EXPECT_EQ(*cache.load(key), e);
  const std::string good = read_file(cache.file_for(key));
  write_file(cache.file_for(key), good.substr(0, good.size() / 2)); // truncated
  EXPECT_FALSE(cache.load(key));
  EXPECT_FALSE(fs::exists(cache.file_for(key))) << "a truncated file must be deleted";
  std::string flipped = good;
  flipped[KernelCache::kHeaderBytes + 17] ^= 0x40; // payload damage: the checksum catches it
  write_file(cache.file_for(key), flipped);
  EXPECT_FALSE(cache.load(key));
  EXPECT_FALSE(fs::exists(cache.file_for(key)));
  fs::remove_all(cache.dir());
}

TEST(JitCacheStore, RacingWritersNeverLeaveABadFile) {
  // Two processes, each with two threads, store different valid entries under one key while a
  // reader loads it: every load sees a complete entry (one of the written ones) or none.
  std::mt19937_64 rng(std::random_device{}());
  const KernelCache cache(fresh_dir("race"));
  const uint64_t key = rng();
  std::vector<CacheEntry> entries;
  for (int i = 0; i < 4; ++i) entries.push_back(random_entry(rng, 200000 + 1000 * i));
  constexpr int kRounds = 40;
  auto writer = [&](int which) {
    for (int r = 0; r < kRounds; ++r) cache.store(key, entries[size_t(which)]);
  };
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::thread a(writer, 2), b(writer, 3);
    a.join();
    b.join();
    std::_Exit(0);
  }
  std::atomic<bool> done{false};
  int seen = 0, bad = 0;
  std::thread reader([&] {
    // load() deletes a file it finds corrupt, so a torn read would show up here as a wrong entry.
    while (!done) {
      if (auto got = cache.load(key)) {
        ++seen;
        if (std::find(entries.begin(), entries.end(), *got) == entries.end()) ++bad;
      }
    }
  });
  std::thread a(writer, 0), b(writer, 1);
  a.join();
  b.join();
  done = true;
  reader.join();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(bad, 0);
  RecordProperty("complete_reads", seen);
  const auto final_entry = cache.load(key);
  ASSERT_TRUE(final_entry) << "the last complete write must be there";
  EXPECT_NE(std::find(entries.begin(), entries.end(), *final_entry), entries.end());
  for (const auto& f : fs::directory_iterator(cache.dir()))
    EXPECT_EQ(f.path().extension(), ".nkc") << "left behind: " << f.path();
  fs::remove_all(cache.dir());
}

TEST(JitCompile, MissThenHitWithTheSameBytes) {
  NINFER_REQUIRE_NVRTC();
  const KernelCache cache(fresh_dir("hit"));
  const CompileRequest r = scale_request(3, 128);
  const CompiledKernel first = compile(r, &cache);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.arch, "sm_90");
  EXPECT_EQ(first.entry.kind, PayloadKind::Cubin);
  ASSERT_GT(first.entry.image.size(), 4u);
  EXPECT_EQ(first.entry.image.substr(0, 4), std::string("\x7f" "ELF")); // a cubin is an ELF file
  // The name expression was lowered to a mangled name of the instantiation.
  EXPECT_EQ(first.lowered_name("scale<3>"), "_Z5scaleILi3EEvPKfPfi");
  EXPECT_TRUE(fs::exists(cache.file_for(first.key)));
  const CompiledKernel second = compile(r, &cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.entry, first.entry);
  fs::remove_all(cache.dir());
}

TEST(JitCompile, CorruptCacheFileIsRebuilt) {
  NINFER_REQUIRE_NVRTC();
  const KernelCache cache(fresh_dir("rebuild"));
  const CompileRequest r = scale_request(5, 64);
  const CompiledKernel first = compile(r, &cache);
  std::string bytes = read_file(cache.file_for(first.key));
  bytes[bytes.size() - 3] ^= 0x5a;
  write_file(cache.file_for(first.key), bytes);
  const CompiledKernel again = compile(r, &cache);
  EXPECT_FALSE(again.from_cache) << "a damaged file must not be used";
  EXPECT_EQ(again.entry, first.entry);
  EXPECT_TRUE(compile(r, &cache).from_cache) << "the rebuilt file must be valid";
  write_file(cache.file_for(first.key), bytes.substr(0, 10)); // truncated inside the header
  EXPECT_FALSE(compile(r, &cache).from_cache);
  EXPECT_TRUE(compile(r, &cache).from_cache);
  fs::remove_all(cache.dir());
}

TEST(JitCompile, KeyFollowsSourceOptionsNamesAndArchitecture) {
  NINFER_REQUIRE_NVRTC();
  const CompileRequest base = scale_request(2, 128);
  const uint64_t k = cache_key(base);
  EXPECT_EQ(cache_key(scale_request(2, 128)), k) << "the key must be stable";
  CompileRequest src = base;
  src.source += "\n// one more line\n";
  EXPECT_NE(cache_key(src), k);
  EXPECT_NE(cache_key(scale_request(2, 256)), k);    // option
  EXPECT_NE(cache_key(scale_request(4, 128)), k);    // name expression
  EXPECT_NE(cache_key(scale_request(2, 128, 8, 0)), k); // architecture
  CompileRequest renamed = base;
  renamed.name = "another/name"; // the display name does not change the compiled bytes
  EXPECT_EQ(cache_key(renamed), k);
}

TEST(JitCompile, ArchitecturesNvrtcCannotTargetGetPtxForTheNewestItKnows) {
  NINFER_REQUIRE_NVRTC();
  // A compute capability newer than any NVRTC knows (99.0): PTX for a virtual architecture, which
  // the driver of such a card would JIT-compile.
  ASSERT_FALSE(nvrtc_supports_cubin(99, 0));
  const CompiledKernel k = compile(scale_request(2, 128, 99, 0), nullptr);
  EXPECT_EQ(k.entry.kind, PayloadKind::Ptx);
  EXPECT_EQ(k.arch.rfind("compute_", 0), 0u) << k.arch;
  EXPECT_NE(k.entry.image.find(".entry _Z5scaleILi2EEvPKfPfi"), std::string::npos);
  EXPECT_NE(k.entry.image.find(".target " + k.arch.substr(std::string("compute_").size()).insert(0, "sm_")),
            std::string::npos);
  EXPECT_TRUE(nvrtc_supports_cubin(9, 0));
}

TEST(JitCompile, CompileErrorNamesTheVariantAndShowsTheLog) {
  NINFER_REQUIRE_NVRTC();
  const KernelCache cache(fresh_dir("error"));
  CompileRequest r = scale_request(2, 128);
  r.name = "linear/tile_bad";
  r.options.clear(); // TILE undefined: the source's #error fires
  try {
    compile(r, &cache);
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("linear/tile_bad"), std::string::npos) << m;
    EXPECT_NE(m.find("TILE must be defined"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(cache.dir()) && !fs::is_empty(cache.dir())) << "nothing cached for a failed compile";
  fs::remove_all(cache.dir());
}
