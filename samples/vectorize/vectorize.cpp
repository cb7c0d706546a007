// Sample: a call per element vs one vectorized kernel per array, C++'s "Python loop vs NumPy".
//
// For each size n the scalar path calls scale_one once per element, the way an interpreted
// loop pays a dispatch per element; the vector path calls scale_all once per array and the
// compiler vectorizes its loop. Every size does about the same number of element updates
// (reps = kBudget / n, at least 1), so the per-element columns are comparable. Most of the time
// goes to the scalar path's calls, in scale_one and in the loop in main that makes them;
// the arrays' first writes (page faults) are the next largest part, in make_arrays. Optional
// argv[1]: log2 of the largest size (4..24, default 24), to shorten an instrumented run.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kMinLog2 = 4;
constexpr int kMaxLog2 = 24;
constexpr int kStepLog2 = 2;
// Element updates per size and path. Kept below 2^24 so that the whole run stays well under
// 2 s uninstrumented and an instrumented run records a manageable number of scale_one calls.
constexpr std::size_t kBudget = std::size_t{1} << 22;

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

// One element per call: the cost of the call itself dominates the two flops.
__attribute__((noinline)) double scale_one(double x, double a, double b) {
    return a * x + b;
}

// The whole array per call: a plain loop the compiler turns into SIMD code (GCC at -O2 needs
// the cost-model option that samples/CMakeLists.txt sets for this target).
__attribute__((noinline)) void scale_all(const double* x, double* y, std::size_t n, double a,
                                         double b) {
    for (std::size_t i = 0; i < n; ++i) y[i] = a * x[i] + b;
}

struct Arrays {
    std::vector<double> x, y_scalar, y_vector;
};

// The arrays of the largest size, allocated and written once before anything is timed. Those
// first writes fault in every page: 3 x 8 MiB at n = 2^20 (the demo's size), 12% of an
// uninstrumented run's CPU time under perf; 3 x 32 MiB at 2^22, 31%. In a function of their
// own, the profile shows that cost on its own row instead of adding it to main's loop.
__attribute__((noinline)) Arrays make_arrays(std::size_t n) {
    Arrays arrays{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
    for (std::size_t i = 0; i < n; ++i) arrays.x[i] = static_cast<double>(i % 1000) * 0.001;
    return arrays;
}

int main(int argc, char** argv) {
    int max_log2 = kMaxLog2;
    if (argc > 1) {
        char* end = nullptr;
        long value = std::strtol(argv[1], &end, 10);
        if (*argv[1] == '\0' || *end != '\0' || value < kMinLog2 || value > kMaxLog2) {
            std::fprintf(stderr, "usage: %s [max_log2]   (%d..%d, default %d)\n", argv[0], kMinLog2,
                         kMaxLog2, kMaxLog2);
            return 2;
        }
        max_log2 = static_cast<int>(value);
    }

    Arrays arrays = make_arrays(std::size_t{1} << max_log2);
    // Runtime values, so the compiler cannot specialize either path for constant a and b.
    const double a = 1.0 + 1.0 / argc;
    const double b = 0.25 * argc;
    // Raw pointers in the timed loops: if the build also instruments the standard headers,
    // vector::operator[] would otherwise add two hooked calls per element.
    const double* xs = arrays.x.data();
    double* ys = arrays.y_scalar.data();
    double* yv = arrays.y_vector.data();

    std::printf("%10s %14s %14s %8s\n", "n", "scalar ns/el", "vector ns/el", "ratio");
    for (int lg = kMinLog2; lg <= max_log2; lg += kStepLog2) {
        const std::size_t n = std::size_t{1} << lg;
        const std::size_t reps = std::max<std::size_t>(1, kBudget / n);

        auto start = std::chrono::steady_clock::now();
        for (std::size_t r = 0; r < reps; ++r) {
            for (std::size_t i = 0; i < n; ++i) ys[i] = scale_one(xs[i], a, b);
        }
        const double scalar_s = seconds_since(start);

        start = std::chrono::steady_clock::now();
        for (std::size_t r = 0; r < reps; ++r) scale_all(xs, yv, n, a, b);
        const double vector_s = seconds_since(start);

        // Same expression, same rounding: the two paths must agree bit for bit.
        if (!std::equal(ys, ys + n, yv)) {
            std::fprintf(stderr, "mismatch between scalar and vector results at n = %zu\n", n);
            return 1;
        }

        const double elements = static_cast<double>(n) * static_cast<double>(reps);
        std::printf("%10zu %14.3f %14.3f %8.1f\n", n, scalar_s * 1e9 / elements,
                    vector_s * 1e9 / elements, scalar_s / vector_s);
    }
    return 0;
}
