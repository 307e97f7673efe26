// The byte-level BPE model: a vocabulary of byte-level strings and a ranked list of merges.
// A pre-token's bytes start as one symbol per byte; the adjacent pair whose merge has the lowest
// rank (leftmost first on ties) is merged until no ranked pair is left. Results are cached per
// pre-token, since natural text repeats the same words over and over.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ninfer::tokenizer_detail {

class BpeModel {
 public:
  // `vocab` maps byte-level strings to ids; `merges` are pairs of byte-level strings in rank
  // order. `source` names the file in error messages. Throws ninfer::Error when a merge names a
  // token that is not in the vocabulary or a byte has no single-byte token.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
           const std::string& source);

  // Appends the ids of one pre-token given as raw bytes (not byte-level symbols).
  void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::vector<int32_t> merge_word(std::string_view bytes) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_id_[256];
  bool ignore_merges_;

  // Bounded so that a long-running server does not grow without limit; cleared when full.
  static constexpr size_t kCacheLimit = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

} // namespace ninfer::tokenizer_detail
