// Writing a checkpoint folder so that it appears whole or not at all: every file goes into a
// hidden sibling of the target (".NAME.partial-PID"), each is fsync'ed, and commit() renames
// the sibling into place (moving an existing target aside first with --force). An error
// removes the sibling; a killed process leaves only the hidden sibling, never a half checkpoint
// at the target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace ninfer {

class StagingFolder {
 public:
  // Refuses an existing `target` unless `force`; `force` replaces only a folder holding a
  // config.json (a checkpoint) or nothing, never a file or another kind of folder.
  StagingFolder(std::filesystem::path target, bool force);
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;
  ~StagingFolder(); // removes the staging folder unless committed

  const std::filesystem::path& path() const { return staging_; }
  const std::filesystem::path& target() const { return target_; }
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path staging_;
  bool force_;
  bool committed_ = false;
};

// fsync of a file's or a folder's contents; throws ninfer::Error naming it.
void fsync_path(const std::filesystem::path& p);
// Writes `bytes` to `file` and fsyncs it.
void write_file_synced(const std::filesystem::path& file, const std::string& bytes);
// Copies a file byte for byte and fsyncs the copy.
void copy_file_synced(const std::filesystem::path& from, const std::filesystem::path& to);

// One tensor of an output file: its safetensors dtype ("I32", "BF16", ...), shape and size.
struct OutputTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  size_t bytes = 0;
  size_t unit = 0; // tensors of one unit (a module's packed weight, scales, ...) share a shard
};

// Splits tensors, in order, into shards of at most `max_bytes` of data each (a unit larger than
// that gets a shard of its own). Returns the index ranges [begin, end) of each shard.
std::vector<std::pair<size_t, size_t>> plan_shards(const std::vector<OutputTensor>& tensors, uint64_t max_bytes);

// "model.safetensors" for one shard, else "model-00001-of-00003.safetensors".
std::string shard_file_name(size_t index, size_t count);

// fill(i, dst) writes tensors[first + i]'s little-endian bytes (dst.size() == its bytes).
using OutputFiller = std::function<void(size_t index, std::span<std::byte> dst)>;

// One safetensors file: header (padded to 8 bytes), then the tensors' data in order, written
// tensor by tensor and fsync'ed. Throws ninfer::Error naming the file on I/O failure.
void write_safetensors_shard(const std::filesystem::path& file, std::span<const OutputTensor> tensors,
                             const OutputFiller& fill);

} // namespace ninfer
