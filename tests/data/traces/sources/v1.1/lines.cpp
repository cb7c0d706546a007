// Sample: line_profiler for C++. Marks the lines of work() and prints where its time goes
// (`profreport --lines`). Built with prof::prof only: no -finstrument-functions needed.
#include <prof/prof.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

double work(std::vector<double>& v) {
    PROF_FUNCTION();
    PROF_LINE(auto s = std::accumulate(v.begin(), v.end(), 0.0));
    for (auto& x : v) { PROF_LINE(x = std::sqrt(x) * s); }
    {
        PROF_SCOPE("normalise");
        double m = *std::max_element(v.begin(), v.end());
        for (auto& x : v) x /= m;
    }
    return s;
}

int main() {
    std::vector<double> v(1'000'000);
    std::iota(v.begin(), v.end(), 1.0);
    std::printf("%.3f\n", work(v));
    return 0;
}
