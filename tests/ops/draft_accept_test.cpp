// draft_accept against its contract: per sequence, the longest prefix of its drafts that the
// model's picks repeat, and the row it keeps.
#include <gtest/gtest.h>

#include "ninfer/abi/ops/draft_accept.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Round {
  int32_t seqs, drafts;
  std::vector<int32_t> ids, picks; // [seqs * (drafts + 1)]
};

// The contract's definition, written out.
std::pair<std::vector<int32_t>, std::vector<int32_t>> oracle(const Round& r) {
  std::vector<int32_t> accepted, keep;
  const int32_t D = r.drafts + 1;
  for (int32_t i = 0; i < r.seqs; ++i) {
    int32_t n = 0;
    for (int32_t j = 0; j < r.drafts; ++j) {
      if (r.ids[i * D + 1 + j] != r.picks[i * D + j]) break;
      n = j + 1;
    }
    accepted.push_back(n);
    keep.push_back(i * D + n);
  }
  return {accepted, keep};
}

} // namespace

// Random rounds over a 4-token vocabulary (so drafts often agree, at every depth), K = 1..5, and
// a row holding NaN (pick -1) that must stop acceptance even against a draft of -1.
TEST(DraftAcceptOp, KeepsTheLongestAgreeingPrefix) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("draft_accept");
  std::uniform_int_distribution<int32_t> tok(0, 3);
  std::vector<int64_t> seen(6, 0);
  for (int32_t K = 1; K <= 5; ++K)
    for (int rep = 0; rep < 50; ++rep) {
      Round r{1 + rep % 4, K, {}, {}};
      const size_t n = size_t(r.seqs) * (K + 1);
      for (size_t i = 0; i < n; ++i) {
        r.ids.push_back(tok(rng));
        // Picks agree with the next draft more often than not, so long prefixes occur.
        r.picks.push_back(tok(rng) == 0 ? tok(rng) : -2);
      }
      for (int32_t i = 0; i < r.seqs; ++i)
        for (int32_t j = 0; j < K; ++j)
          if (r.picks[i * (K + 1) + j] == -2) r.picks[i * (K + 1) + j] = r.ids[i * (K + 1) + 1 + j];
      for (auto& p : r.picks) p = p == -2 ? tok(rng) : p;
      if (rep == 7) {
        r.ids[1] = -1;
        r.picks[0] = -1;
      }
      std::vector<int32_t> accepted(size_t(r.seqs), -7), keep(size_t(r.seqs), -7);
      const ninfer_draft_accept_args a{r.ids.data(), r.picks.data(), accepted.data(), keep.data(), r.seqs, K};
      be.run(NINFER_OP_DRAFT_ACCEPT, {r.seqs, {K, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
      auto [want_accepted, want_keep] = oracle(r);
      if (rep == 7) {
        want_accepted[0] = 0;
        want_keep[0] = 0;
      }
      EXPECT_EQ(accepted, want_accepted) << "K " << K << " round " << rep;
      EXPECT_EQ(keep, want_keep) << "K " << K << " round " << rep;
      for (int32_t x : accepted) ++seen[static_cast<size_t>(std::clamp(x, 0, 5))];
    }
  for (size_t n = 0; n <= 5; ++n) EXPECT_GT(seen[n], 0) << "no sequence accepted " << n << " drafts";
}
