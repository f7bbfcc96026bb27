// The rank test `kiln gate` and `kiln bench` use to tell a slowdown from noise: the Mann-Whitney U test over
// two samples of timings (what Google Benchmark's compare.py runs over repetitions). Exact p-values for small
// samples without ties; the normal approximation with a tie correction otherwise.
#pragma once
#include <vector>

namespace kiln::gate {

struct RankTest {
  double u = 0;        // U statistic of `a` (the number of pairs (x in a, y in b) with x > y, ties counting 1/2)
  double p_value = 1;  // two-sided
  bool exact = false;  // p from the exact distribution (no ties, both samples of at most 30)
};

// Two-sided Mann-Whitney U test of `a` against `b`. Either sample empty: p = 1 (nothing can be said).
RankTest mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

double median(std::vector<double> xs);  // NaN for an empty sample

// CPU time of this process (all its threads) in milliseconds: timings that other processes' load on the
// machine barely moves (kiln gate's children compute on one thread, so theirs is their work).
double process_cpu_ms();

}  // namespace kiln::gate
