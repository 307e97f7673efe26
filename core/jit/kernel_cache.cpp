#include "ninfer/jit/kernel_cache.hpp"
#include "ninfer/support/paths.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "ninfer/support/error.hpp"

namespace ninfer::jit {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'N', 'I', 'N', 'F', 'K', 'C', '\0', '\1'};

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_str(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

// Bounds-checked little-endian reader over a byte string.
struct Reader {
  std::string_view in;
  size_t pos = 0;
  bool ok = true;
  uint64_t get(int bytes) {
    if (!ok || in.size() - pos < static_cast<size_t>(bytes)) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(in[pos + i])) << (8 * i);
    pos += bytes;
    return v;
  }
  std::string str() {
    const uint64_t n = get(8);
    if (!ok || in.size() - pos < n) {
      ok = false;
      return {};
    }
    std::string s(in.substr(pos, n));
    pos += n;
    return s;
  }
};

std::string read_all(const fs::path& p, bool* exists) {
  std::ifstream f(p, std::ios::binary);
  *exists = static_cast<bool>(f);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

} // namespace

KeyHasher& KeyHasher::add(std::string_view field) {
  add(static_cast<uint64_t>(field.size()));
  h_ = fnv1a64(field, h_);
  return *this;
}

KeyHasher& KeyHasher::add(uint64_t value) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  h_ = fnv1a64(std::string_view(b, 8), h_);
  return *this;
}

fs::path default_kernel_cache_dir() { return cache_root() / "kernels"; }

KernelCache::KernelCache(fs::path dir) : dir_(std::move(dir)) {}

fs::path KernelCache::file_for(uint64_t key) const { return dir_ / fmt::format("{:016x}.nkc", key); }

std::string KernelCache::encode(uint64_t key, const CacheEntry& e) {
  std::string payload;
  put_u64(payload, e.lowered.size());
  for (const auto& [expr, name] : e.lowered) {
    put_str(payload, expr);
    put_str(payload, name);
  }
  put_str(payload, e.image);
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, kFormatVersion);
  put_u32(out, static_cast<uint32_t>(e.kind));
  put_u64(out, key);
  put_u64(out, payload.size());
  put_u64(out, fnv1a64(payload));
  out += payload;
  return out;
}

std::optional<CacheEntry> KernelCache::decode(uint64_t key, std::string_view bytes, std::string* why) {
  auto fail = [&](std::string msg) -> std::optional<CacheEntry> {
    if (why) *why = std::move(msg);
    return std::nullopt;
  };
  if (bytes.size() < kHeaderBytes) return fail(fmt::format("truncated header ({} bytes)", bytes.size()));
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return fail("bad magic");
  Reader r{bytes, sizeof kMagic};
  const auto version = static_cast<uint32_t>(r.get(4));
  const auto kind = static_cast<uint32_t>(r.get(4));
  const uint64_t file_key = r.get(8);
  const uint64_t length = r.get(8);
  const uint64_t checksum = r.get(8);
  if (version != kFormatVersion) return fail(fmt::format("format version {} (expected {})", version, kFormatVersion));
  if (kind != static_cast<uint32_t>(PayloadKind::Cubin) && kind != static_cast<uint32_t>(PayloadKind::Ptx))
    return fail(fmt::format("unknown payload kind {}", kind));
  if (file_key != key) return fail(fmt::format("key {:016x} in a file named for {:016x}", file_key, key));
  if (bytes.size() - kHeaderBytes != length)
    return fail(fmt::format("payload is {} bytes, header says {}", bytes.size() - kHeaderBytes, length));
  const std::string_view payload = bytes.substr(kHeaderBytes);
  if (fnv1a64(payload) != checksum) return fail("payload checksum mismatch");
  Reader p{payload};
  CacheEntry e;
  e.kind = static_cast<PayloadKind>(kind);
  const uint64_t n = p.get(8);
  for (uint64_t i = 0; p.ok && i < n; ++i) {
    std::string expr = p.str();
    std::string name = p.str();
    e.lowered.emplace_back(std::move(expr), std::move(name));
  }
  e.image = p.str();
  if (!p.ok || p.pos != payload.size()) return fail("malformed payload");
  return e;
}

std::optional<CacheEntry> KernelCache::load(uint64_t key) const {
  const fs::path file = file_for(key);
  bool exists = false;
  const std::string bytes = read_all(file, &exists);
  if (!exists) return std::nullopt;
  std::string why;
  std::optional<CacheEntry> e = decode(key, bytes, &why);
  if (!e) {
    spdlog::debug("kernel cache: {} is corrupt ({}); deleting it, the kernel is rebuilt", file.string(), why);
    std::error_code ec;
    fs::remove(file, ec); // a concurrent process may have replaced or removed it already
  }
  return e;
}

void KernelCache::store(uint64_t key, const CacheEntry& entry) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error(fmt::format("kernel cache: cannot create {}: {}", dir_.string(), ec.message()));
  const std::string bytes = encode(key, entry);
  // Unique per process and per call: concurrent writers never share a temporary file.
  static std::atomic<uint64_t> counter{0};
  const fs::path final_path = file_for(key);
  const fs::path tmp = dir_ / fmt::format(".{:016x}.{}.{}.tmp", key, ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("kernel cache: cannot create {}: {}", tmp.string(), std::strerror(errno)));
  size_t done = 0;
  bool ok = true;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    done += static_cast<size_t>(w);
  }
  const int err = errno;
  if (ok && ::fsync(fd) != 0) ok = false;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int e = ok ? errno : err;
    fs::remove(tmp, ec);
    throw Error(fmt::format("kernel cache: cannot write {}: {}", final_path.string(), std::strerror(e)));
  }
}

} // namespace ninfer::jit
