// The grouped GEMMs' 1-D tile order (kernels/moe/tile_order.cuh), compiled
// for the host: every tile in use exactly once, groups of whole short
// experts where boundaries are aligned, fixed groups as before where not.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "moe/tile_order.cuh"

namespace {

using tc::moe::gemm_group_bound;
using tc::moe::gemm_group_tile;
using tc::moe::GroupedGemmParams;

// tile_expert of a schedule: expert e holds tiles[e] row tiles (0 = empty),
// in expert order; `spare` unused tiles (-1) after them, as the mapping
// leaves its capacity.
std::vector<int> schedule(const std::vector<int>& tiles, int spare) {
  std::vector<int> s;
  for (size_t e = 0; e < tiles.size(); ++e) s.insert(s.end(), size_t(tiles[e]), int(e));
  s.insert(s.end(), size_t(spare), -1);
  return s;
}

GroupedGemmParams params(const std::vector<int>& sched, int group_m, int align, int n) {
  GroupedGemmParams p{};
  p.tile_expert = sched.data();
  p.group_m = group_m, p.group_align = align, p.N = n;
  return p;
}

// The tiles (row tile, column tile) the order hands out, in order.
std::vector<std::pair<int, int>> walk(const GroupedGemmParams& p, int tiles, int bn) {
  const long long tiles_n = (p.N + bn - 1) / bn;
  // A capacity past the tiles in use, as the kernels' launches have.
  const long long capacity = (tiles + 2LL * p.group_m + 5) * tiles_n;
  std::vector<std::pair<int, int>> out;
  for (long long idx = 0; idx < capacity; ++idx) {
    int tm = -1, tn = -1;
    if (gemm_group_tile<true>(p, idx, tiles, bn, tm, tn)) out.emplace_back(tm, tn);
  }
  return out;
}

void expect_every_tile_once(const std::vector<std::pair<int, int>>& order, int tiles, int tiles_n) {
  std::set<std::pair<int, int>> seen(order.begin(), order.end());
  EXPECT_EQ(seen.size(), order.size()) << "a tile handed out twice";
  EXPECT_EQ(order.size(), size_t(tiles) * size_t(tiles_n)) << "tiles missing";
  for (const auto& [tm, tn] : order) {
    EXPECT_TRUE(tm >= 0 && tm < tiles && tn >= 0 && tn < tiles_n) << tm << ", " << tn;
  }
}

// Random short experts (0-3 tiles, as DeepSeek-V3 prefill has), a few long
// ones, and the order's boundaries: each at most `align` below its nominal
// point, on an expert's first tile when it moved, and no expert that starts
// within `align` tiles before a nominal boundary split by it.
TEST(MoeTileOrder, AlignedGroupsHoldShortExpertsWhole) {
  std::mt19937 rng(20261202);
  for (int trial = 0; trial < 40; ++trial) {
    const int experts = 1 + int(rng() % 300);
    std::vector<int> tiles(static_cast<size_t>(experts), 0);
    for (int& t : tiles) t = rng() % 10 == 0 ? int(rng() % 40) : int(rng() % 4);
    const std::vector<int> sched = schedule(tiles, int(rng() % 7));
    int used = 0;
    for (int t : tiles) used += t;
    if (used == 0) continue;
    std::vector<int> first(sched.size(), 0);  // first tile of each tile's expert
    for (int i = 0; i < used; ++i)
      first[size_t(i)] = i > 0 && sched[size_t(i)] == sched[size_t(i - 1)] ? first[size_t(i - 1)] : i;
    for (int g : {2, 3, 8, 16})
      for (int align = 1; align < std::min(g, 4); ++align) {
        const int bn = 128, n = 128 * (1 + int(rng() % 20)) - int(rng() % 100);
        const GroupedGemmParams p = params(sched, g, align, n);
        const int tiles_n = (n + bn - 1) / bn;
        expect_every_tile_once(walk(p, used, bn), used, tiles_n);
        for (long long k = 1; k * g < used; ++k) {
          const long long b = gemm_group_bound(p, k, used), nominal = k * g;
          const long long start = first[size_t(nominal)];
          ASSERT_LE(b, nominal);
          ASSERT_GT(b, nominal - g);
          if (nominal - start <= align)
            EXPECT_EQ(b, start) << "k " << k << " g " << g << " align " << align;
          else
            EXPECT_EQ(b, nominal);
        }
        EXPECT_EQ(gemm_group_bound(p, (used + g - 1) / g, used), used);
        // Each group's tiles: its row tiles fastest, column tiles in order.
        const auto order = walk(p, used, bn);
        size_t i = 0;
        for (long long k = 0; k * g < used; ++k) {
          const long long lo = gemm_group_bound(p, k, used), hi = gemm_group_bound(p, k + 1, used);
          for (int tn = 0; tn < tiles_n; ++tn)
            for (long long tm = lo; tm < hi; ++tm, ++i) {
              ASSERT_LT(i, order.size());
              ASSERT_EQ(order[i], std::make_pair(int(tm), tn)) << "group " << k << " of " << g << ", align " << align;
            }
        }
      }
  }
}

// group_align = 0 (or no schedule): groups of exactly group_m row tiles, the
// last one short, as the order always was.
TEST(MoeTileOrder, FixedGroupsUnchanged) {
  const std::vector<int> sched = schedule({3, 1, 0, 2, 5, 1, 1, 2}, 4);
  const int used = 15, bn = 64;
  for (int g : {1, 2, 4, 8, 32})
    for (bool no_schedule : {false, true}) {
      GroupedGemmParams p = params(sched, g, no_schedule ? 3 : 0, 300);
      if (no_schedule) p.tile_expert = nullptr;
      const auto order = walk(p, used, bn);
      const int tiles_n = (300 + bn - 1) / bn;
      expect_every_tile_once(order, used, tiles_n);
      size_t i = 0;
      for (int first = 0; first < used; first += g)
        for (int tn = 0; tn < tiles_n; ++tn)
          for (int tm = first; tm < std::min(first + g, used); ++tm, ++i) ASSERT_EQ(order[i], std::make_pair(tm, tn));
    }
}

}  // namespace
