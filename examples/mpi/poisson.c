/* The MPI version of the co-allocated Poisson solver (examples/poisson, seed 003 §6.1): the
 * same problem and the same check, written as a plain MPI program that knows nothing of
 * coalloc. Red-black Gauss-Seidel for -Δu = f on the unit square with the analytic solution
 * u = sin(πx)·sin(πy); the n×n interior is split into vertical strips, one per MPI rank
 * (so a component's ranks split its share, and the strips at a component's edges exchange
 * halos with another component's ranks); after each colour's half-sweep neighbouring
 * strips swap their edge columns with MPI_Sendrecv; every K iterations the largest change
 * is reduced with MPI_Allreduce and the solve stops below the tolerance. Rank 0 prints
 * "poisson-mpi: n=N ranks=P iterations=I max_error=E ok" (or FAILED, exit 1, when the
 * error is above the bound of examples/poisson: max(π²h²/4, 1e-2)).
 *
 * usage: poisson [N [TOL [MAX_ITER [K]]]]   (defaults 64 1e-6 100000 10)
 * build: mpicc -O2 -o poisson poisson.c -lm */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double exact(double x, double y) { return sin(M_PI * x) * sin(M_PI * y); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 64;
    double tol = argc > 2 ? atof(argv[2]) : 1e-6;
    long max_iter = argc > 3 ? atol(argv[3]) : 100000;
    long every = argc > 4 ? atol(argv[4]) : 10;
    if (n < size || n > 4096 || every < 1) {
        if (rank == 0)
            fprintf(stderr, "poisson-mpi: need %d <= n <= 4096 and K >= 1\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* Columns 1..n, split as evenly as possible: this rank owns first..first+width-1. */
    int width = n / size + (rank < n % size);
    int first = 1 + rank * (n / size) + (rank < n % size ? rank : n % size);
    int rows = n + 2;
    double h = 1.0 / (n + 1);
    double *u = calloc((size_t) (width + 2) * rows, sizeof(double));
    double *f = calloc((size_t) (width + 2) * rows, sizeof(double));
    for (int lc = 0; lc < width + 2; lc++) {
        int gj = first + lc - 1;
        for (int i = 0; i < rows; i++) {
            double x = gj * h, y = i * h;
            if (gj == 0 || gj == n + 1 || i == 0 || i == n + 1)
                u[lc * rows + i] = exact(x, y);
            else
                f[lc * rows + i] = h * h * 2.0 * M_PI * M_PI * exact(x, y);
        }
    }
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    long it = 0;
    for (;;) {
        double change = 0.0;
        for (int colour = 0; colour < 2; colour++) {
            for (int lc = 1; lc <= width; lc++) {
                int gj = first + lc - 1;
                int start = (1 + gj) % 2 == colour ? 1 : 2;
                for (int i = start; i <= n; i += 2) {
                    int k = lc * rows + i;
                    double v = (u[k - 1] + u[k + 1] + u[k - rows] + u[k + rows] + f[k]) * 0.25;
                    change = fmax(change, fabs(v - u[k]));
                    u[k] = v;
                }
            }
            /* Halo exchange: my first column goes left, my last right. */
            MPI_Sendrecv(&u[1 * rows + 1], n, MPI_DOUBLE, left, 0,
                         &u[(width + 1) * rows + 1], n, MPI_DOUBLE, right, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv(&u[width * rows + 1], n, MPI_DOUBLE, right, 1,
                         &u[0 * rows + 1], n, MPI_DOUBLE, left, 1,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        it++;
        if (it % every == 0 || it >= max_iter) {
            double global;
            MPI_Allreduce(&change, &global, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (global < tol || isnan(global) || it >= max_iter)
                break;
        }
    }
    double err = 0.0, worst;
    for (int lc = 1; lc <= width; lc++)
        for (int i = 1; i <= n; i++)
            err = fmax(err, fabs(u[lc * rows + i] - exact((first + lc - 1) * h, i * h)));
    MPI_Reduce(&err, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int ok = 1;
    if (rank == 0) {
        double bound = fmax(M_PI * M_PI * h * h / 4.0, 1e-2);
        ok = worst <= bound;
        printf("poisson-mpi: n=%d ranks=%d iterations=%ld max_error=%.3e %s\n", n, size, it,
               worst, ok ? "ok" : "FAILED");
    }
    free(u);
    free(f);
    MPI_Finalize();
    return ok ? 0 : 1;
}
