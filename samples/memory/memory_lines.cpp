// Sample: memory_profiler's classic demonstration in C++. Run with PROF_LINE_RSS=1 and read
// `profreport --lines --memory`: the line that allocates and touches 100 M doubles adds about
// 763 MiB of resident memory, the line that frees them gives it back.
#include <prof/prof.hpp>

#include <cstdio>
#include <numeric>
#include <vector>

double demo() {
    PROF_FUNCTION();
    PROF_LINE(std::vector<double> a(100'000'000, 1.0)); // 800 MB, every page written
    PROF_LINE(std::vector<double> b(1'000'000, 2.0));
    PROF_LINE(double sum = std::accumulate(a.begin(), a.end(), 0.0));
    PROF_LINE(std::vector<double>().swap(a)); // freed: back to the system
    PROF_LINE(sum += b[0]);
    return sum;
}

int main() {
    std::printf("%.1f\n", demo());
    return 0;
}
