// Mann-Whitney U (see rank_test.h). The exact null distribution of U is counted with the recurrence
// N(n, m, u) = N(n-1, m, u-m) + N(n, m-1, u) (the largest value belongs to either sample).
#include "gate/rank_test.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <time.h>

namespace kiln::gate {

namespace {

constexpr size_t kExactMaxSample = 30;

// Number of orderings of n + m distinct values giving each U in [0, n*m], as doubles (they exceed 2^64).
std::vector<double> u_counts(size_t n, size_t m) {
  // counts[i][j] for the current n; built up over n with a rolling table over m.
  std::vector<std::vector<std::vector<double>>> table(n + 1, std::vector<std::vector<double>>(m + 1));
  for (size_t i = 0; i <= n; ++i)
    for (size_t j = 0; j <= m; ++j) {
      std::vector<double>& c = table[i][j];
      c.assign(i * j + 1, 0.0);
      if (i == 0 || j == 0) {
        c[0] = 1;
        continue;
      }
      const std::vector<double>& without_a = table[i - 1][j];  // the largest value is in a: it beats all j of b
      for (size_t u = 0; u < without_a.size(); ++u) c[u + j] += without_a[u];
      const std::vector<double>& without_b = table[i][j - 1];
      for (size_t u = 0; u < without_b.size(); ++u) c[u] += without_b[u];
    }
  return table[n][m];
}

}  // namespace

double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double median(std::vector<double> xs) {
  if (xs.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(xs.begin(), xs.end());
  size_t k = xs.size() / 2;
  return xs.size() % 2 ? xs[k] : (xs[k - 1] + xs[k]) / 2;
}

RankTest mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  RankTest r;
  if (a.empty() || b.empty()) return r;
  bool ties = false;
  for (double x : a)
    for (double y : b) {
      if (x > y) r.u += 1;
      else if (x == y) r.u += 0.5, ties = true;
    }
  const double n = double(a.size()), m = double(b.size());
  if (!ties) {  // ties inside one sample do not change U's distribution under the null only if absent overall
    std::vector<double> all(a);
    all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    ties = std::adjacent_find(all.begin(), all.end()) != all.end();
  }
  if (!ties && a.size() <= kExactMaxSample && b.size() <= kExactMaxSample) {
    std::vector<double> counts = u_counts(a.size(), b.size());
    double total = 0, tail_low = 0, tail_high = 0;
    for (size_t u = 0; u < counts.size(); ++u) {
      total += counts[u];
      if (double(u) <= r.u) tail_low += counts[u];
      if (double(u) >= r.u) tail_high += counts[u];
    }
    r.p_value = std::min(1.0, 2 * std::min(tail_low, tail_high) / total);
    r.exact = true;
    return r;
  }
  // Normal approximation with the tie correction of the variance and a continuity correction of 1/2.
  std::vector<double> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  double tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    double t = double(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double total = n + m;
  const double variance = n * m / 12.0 * ((total + 1) - tie_term / (total * (total - 1)));
  if (variance <= 0) return r;  // every value equal: no evidence either way
  const double z = (std::fabs(r.u - n * m / 2) - 0.5) / std::sqrt(variance);
  r.p_value = std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
  return r;
}

}  // namespace kiln::gate
