// Reading files named by users (manifests, config.json, tokenizer.json, shard indexes) without
// trusting them: a file must be a regular file (a FIFO, device or folder is refused before it
// is opened, so nothing blocks) and no larger than a limit chosen for its kind (checked before
// anything is allocated).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ninfer {

// Throws ninfer::Error naming `file` when it does not exist or is not a regular file (symbolic
// links are followed: a Hugging Face cache links shards to blobs).
void require_regular_file(const std::filesystem::path& file);

// The whole of `file`, at most `max_bytes` long. `kind` names the sort of file in the message
// of the size error ("a YAML file", "config.json"). Throws ninfer::Error naming the file.
std::string read_bounded_file(const std::filesystem::path& file, uint64_t max_bytes, const std::string& kind);

// "16 MiB", "100 MB"-style rendering of a byte limit for messages.
std::string byte_limit_string(uint64_t bytes);

} // namespace ninfer
