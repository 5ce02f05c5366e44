/* An unmodified MPI program for coalloc's PMI tests (crates/coalloc-cli/tests/mpi.rs):
 * every rank checks MPI_Allreduce over all ranks and MPI_Sendrecv with its neighbours
 * (rank - 1 and rank + 1, round the ring: across components at their edges), then prints
 * one line "rank R of N on HOST: ok" or "... FAILED ..." and exits 0 or 1 (under Slurm
 * "rank R of N on HOST node NODE: ok", NODE being SLURMD_NODENAME: the rig's nodes share
 * one host).
 * `--started` prints "rank R computing" once MPI_Init returned; `--abort-at R` makes rank R
 * call MPI_Abort(MPI_COMM_WORLD, 5) after the first collective.
 * Nothing in it knows about coalloc. Build: mpicc -O2 -o ring ring.c */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    int hlen;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &hlen);
    int abort_at = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--started") == 0) {
            /* Proof that the computation began (the failed-start test looks for it). */
            printf("rank %d computing\n", rank);
            fflush(stdout);
        } else if (strcmp(argv[i], "--abort-at") == 0 && i + 1 < argc) {
            abort_at = atoi(argv[++i]);
        }
    }

    /* Sum of 0..size-1 and of the ranks squared, over every rank. */
    long mine[2] = { rank, (long) rank * rank }, sum[2];
    MPI_Allreduce(mine, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == abort_at)
        MPI_Abort(MPI_COMM_WORLD, 5);
    long n = size;
    if (sum[0] != n * (n - 1) / 2 || sum[1] != (n - 1) * n * (2 * n - 1) / 6) {
        printf("rank %d: allreduce gave %ld %ld\n", rank, sum[0], sum[1]);
        bad = 1;
    }

    /* Neighbours round the ring: send my rank (and a block of data) right, receive from
     * the left. */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    enum { LEN = 4096 };
    int *out = malloc(LEN * sizeof(int)), *in = malloc(LEN * sizeof(int));
    for (int i = 0; i < LEN; i++)
        out[i] = rank * LEN + i;
    MPI_Sendrecv(out, LEN, MPI_INT, right, 7, in, LEN, MPI_INT, left, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (int i = 0; i < LEN; i++)
        if (in[i] != left * LEN + i) {
            printf("rank %d: from %d got %d at %d\n", rank, left, in[i], i);
            bad = 1;
            break;
        }

    /* A second collective after the exchange: a later (job-wide) PMI barrier follows in
     * MPI_Finalize. */
    int all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const char *node = getenv("SLURMD_NODENAME");
    printf("rank %d of %d on %s%s%s: %s\n", rank, size, host, node ? " node " : "",
           node ? node : "", bad ? "FAILED" : "ok");
    free(out);
    free(in);
    MPI_Finalize();
    return bad || all_bad;
}
