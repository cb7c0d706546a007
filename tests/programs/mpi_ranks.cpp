// Test program for MPI runs (tests/e2e/run_dir_tests.cpp): rank r calls compute() 50 (r + 1)
// times, then all ranks meet in an MPI_Allreduce and a barrier; the load imbalance is known:
// compute's ncalls are 50 at the least (rank 0), 125 on average and 200 at the most (the last
// rank of 4). With PROF_TEST_CRASH_RANK=N, rank N aborts after its work, while the others wait
// in the barrier (the launcher then kills them).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace {

volatile double g_sink;

__attribute__((noinline)) double compute(int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += i * 0.5;
    return s;
}

__attribute__((noinline)) double work(int rank) {
    double s = 0;
    for (int i = 0; i < 50 * (rank + 1); ++i) s += compute(20000);
    return s;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double mine = work(rank), total = 0;
    if (const char* crash = std::getenv("PROF_TEST_CRASH_RANK"); crash && std::atoi(crash) == rank)
        std::abort();
    MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    g_sink = total;
    if (rank == 0) std::printf("ranks %d\n", size);
    MPI_Finalize();
    return 0;
}
