#include "bpe.hpp"

#include <fmt/format.h>

#include <queue>

#include "byte_level.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::tokenizer_detail {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
                   const std::string& source)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges) {
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(alphabet.symbol(static_cast<unsigned char>(b)));
    if (it == vocab_.end())
      throw Error(fmt::format("{}: model.vocab has no token for byte 0x{:02X} ('{}'); a byte-level BPE "
                              "vocabulary must cover all 256 bytes",
                              source, b, alphabet.symbol(static_cast<unsigned char>(b))));
    byte_id_[b] = it->second;
  }
  merges_.reserve(merges.size());
  auto require = [&](const std::string& token, size_t rank) {
    auto it = vocab_.find(token);
    if (it == vocab_.end())
      throw Error(fmt::format("{}: model.merges[{}] uses '{}', which is not in model.vocab", source, rank, token));
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t l = require(left, rank), r = require(right, rank);
    const int32_t merged = require(left + right, rank);
    // A later duplicate of a pair must not override its first (lower) rank.
    merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), merged});
  }
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(std::string(bytes));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = merge_word(bytes);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kCacheLimit) cache_.clear();
  cache_.emplace(std::string(bytes), std::move(ids));
}

std::vector<int32_t> BpeModel::merge_word(std::string_view bytes) const {
  const size_t n = bytes.size();
  if (ignore_merges_) {
    // Tokenizers with ignore_merges take a pre-token that is itself a vocabulary entry whole.
    std::string symbols;
    for (unsigned char b : bytes) symbols += byte_level_alphabet().symbol(b);
    if (auto it = vocab_.find(symbols); it != vocab_.end()) return {it->second};
  }

  // Symbols form a doubly linked list over the byte positions; a merge keeps the left symbol
  // and unlinks the right one. Candidate merges wait in a min-heap ordered by (rank, position),
  // which is the "lowest rank first, leftmost on ties" order; stale entries are skipped when
  // popped by re-checking that both symbols still hold the ids the entry was made for.
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
  };
  std::vector<Symbol> sym(n);
  for (size_t i = 0; i < n; ++i)
    sym[i] = {byte_id_[static_cast<unsigned char>(bytes[i])], static_cast<int32_t>(i) - 1,
              i + 1 < n ? static_cast<int32_t>(i + 1) : -1};

  struct Candidate {
    int32_t rank, pos, left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    const int32_t l = sym[pos].id, r = sym[sym[pos].next].id;
    auto it = merges_.find(pair_key(l, r));
    if (it != merges_.end()) heap.push({it->second.rank, pos, l, r});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));

  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (!alive[c.pos] || sym[c.pos].id != c.left_id) continue;
    const int32_t right = sym[c.pos].next;
    if (right < 0 || sym[right].id != c.right_id) continue;
    sym[c.pos].id = merges_.at(pair_key(c.left_id, c.right_id)).merged_id;
    alive[right] = false;
    sym[c.pos].next = sym[right].next;
    if (sym[right].next >= 0) sym[sym[right].next].prev = c.pos;
    consider(sym[c.pos].prev);
    consider(c.pos);
  }

  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
  return ids;
}

} // namespace ninfer::tokenizer_detail
