/* MPI_Init time, for bench/mpi_init.sh: every rank reads the wall clock before and after
 * MPI_Init; rank 0 prints one line
 *   init_ms max=M mean=A span=S ranks=N
 * M and A: the longest and the mean time a rank spent in MPI_Init; S: from the first rank's
 * entry to the last rank's return (what a co-allocated start waits for, barrier included). */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    double t0 = now_ms();
    MPI_Init(&argc, &argv);
    double t1 = now_ms();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double d = t1 - t0, max, sum, first, last;
    MPI_Reduce(&d, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&d, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t0, &first, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t1, &last, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("init_ms max=%.1f mean=%.1f span=%.1f ranks=%d\n", max, sum / size,
               last - first, size);
    MPI_Finalize();
    return 0;
}
