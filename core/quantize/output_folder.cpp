#include "ninfer/quantize/output_folder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

#include "ninfer/support/error.hpp"

namespace ninfer {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void io_error(const std::string& what, const fs::path& p, int err) {
  throw Error(fmt::format("{} {}: {}", what, p.string(), std::strerror(err)));
}

class Fd {
 public:
  Fd(const fs::path& p, int flags, mode_t mode = 0644) : fd_(::open(p.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) io_error("cannot open", p, errno);
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void close_checked(const fs::path& p) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) io_error("closing", p, errno);
  }

 private:
  int fd_;
};

void write_all(int fd, const void* data, size_t size, const fs::path& p) {
  const char* c = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, c, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error("writing", p, errno);
    }
    c += n;
    size -= static_cast<size_t>(n);
  }
}

void sync_fd(int fd, const fs::path& p) {
  if (::fsync(fd) != 0) io_error("fsync of", p, errno);
}

bool holds_checkpoint_or_nothing(const fs::path& dir) {
  if (fs::exists(dir / "config.json")) return true;
  return fs::is_empty(dir);
}

} // namespace

void fsync_path(const fs::path& p) {
  Fd fd(p, fs::is_directory(p) ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  sync_fd(fd.get(), p);
}

void write_file_synced(const fs::path& file, const std::string& bytes) {
  Fd fd(file, O_WRONLY | O_CREAT | O_TRUNC);
  write_all(fd.get(), bytes.data(), bytes.size(), file);
  sync_fd(fd.get(), file);
  fd.close_checked(file);
}

void copy_file_synced(const fs::path& from, const fs::path& to) {
  Fd in(from, O_RDONLY);
  Fd out(to, O_WRONLY | O_CREAT | O_TRUNC);
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error("reading", from, errno);
    }
    if (n == 0) break;
    write_all(out.get(), buf.data(), static_cast<size_t>(n), to);
  }
  sync_fd(out.get(), to);
  out.close_checked(to);
}

StagingFolder::StagingFolder(fs::path target, bool force) : target_(std::move(target)), force_(force) {
  target_ = target_.lexically_normal();
  if (!target_.has_filename() && target_.has_parent_path()) target_ = target_.parent_path();
  const fs::path parent = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    throw Error(fmt::format("--out {}: its parent folder {} does not exist; create it first", target_.string(),
                            parent.string()));
  const fs::file_status st = fs::symlink_status(target_, ec);
  if (fs::exists(st)) {
    if (!force_)
      throw Error(fmt::format("--out {} already exists; pass --force to replace it, or choose another folder",
                              target_.string()));
    if (!fs::is_directory(st))
      throw Error(fmt::format("--out {} exists and is not a folder; --force replaces only a checkpoint folder",
                              target_.string()));
    if (!holds_checkpoint_or_nothing(target_))
      throw Error(fmt::format("--out {} is a folder with no config.json; --force replaces only a checkpoint folder "
                              "(or an empty one), so nothing else is deleted by mistake",
                              target_.string()));
  }
  staging_ = parent / fmt::format(".{}.partial-{}", target_.filename().string(), ::getpid());
  fs::remove_all(staging_, ec);
  if (!fs::create_directory(staging_, ec) || ec)
    throw Error(fmt::format("cannot create {}: {}", staging_.string(), ec ? ec.message() : "it exists"));
}

StagingFolder::~StagingFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

void StagingFolder::commit() {
  fsync_path(staging_);
  const fs::path parent = staging_.parent_path();
  std::error_code ec;
  fs::path old;
  if (fs::exists(fs::symlink_status(target_, ec))) {
    // The target is replaced by two renames; between them neither name holds a half checkpoint.
    old = parent / fmt::format(".{}.replaced-{}", target_.filename().string(), ::getpid());
    fs::rename(target_, old, ec);
    if (ec) throw Error(fmt::format("cannot move the existing {} aside: {}", target_.string(), ec.message()));
  }
  fs::rename(staging_, target_, ec);
  if (ec) throw Error(fmt::format("cannot rename {} to {}: {}", staging_.string(), target_.string(), ec.message()));
  committed_ = true;
  fsync_path(parent);
  if (!old.empty()) fs::remove_all(old, ec);
}

std::vector<std::pair<size_t, size_t>> plan_shards(const std::vector<OutputTensor>& tensors, uint64_t max_bytes) {
  std::vector<std::pair<size_t, size_t>> shards;
  size_t begin = 0, i = 0;
  uint64_t bytes = 0;
  while (i < tensors.size()) {
    size_t end = i; // one whole unit
    uint64_t unit_bytes = 0;
    while (end < tensors.size() && tensors[end].unit == tensors[i].unit) unit_bytes += tensors[end++].bytes;
    if (i > begin && bytes + unit_bytes > max_bytes) {
      shards.emplace_back(begin, i);
      begin = i;
      bytes = 0;
    }
    bytes += unit_bytes;
    i = end;
  }
  if (begin < tensors.size() || shards.empty()) shards.emplace_back(begin, tensors.size());
  return shards;
}

std::string shard_file_name(size_t index, size_t count) {
  if (count == 1) return "model.safetensors";
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

void write_safetensors_shard(const fs::path& file, std::span<const OutputTensor> tensors, const OutputFiller& fill) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  size_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  Fd fd(file, O_WRONLY | O_CREAT | O_TRUNC);
  const uint64_t len = text.size();
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
  write_all(fd.get(), len_bytes, 8, file);
  write_all(fd.get(), text.data(), text.size(), file);
  std::vector<std::byte> buf; // grows to the largest tensor; the filler writes every byte
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (buf.size() < tensors[i].bytes) buf.resize(tensors[i].bytes);
    const std::span<std::byte> dst(buf.data(), tensors[i].bytes);
    fill(i, dst);
    write_all(fd.get(), dst.data(), dst.size(), file);
  }
  sync_fd(fd.get(), file);
  fd.close_checked(file);
}

} // namespace ninfer
