/* MPI driver of bench/compare.sh (built once with Open MPI, once with MPICH): MPI_Allreduce, or
 * with "-C allgather|reducescatter|broadcast|reduce" first, MPI_Allgather,
 * MPI_Reduce_scatter_block, MPI_Bcast or MPI_Reduce (root 0), sized as nccl-tests sizes them. */
#include <mpi.h>

#include "sweep.h"

enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, REDUCE };
static const char* const coll_names[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce"};
static int coll = ALLREDUCE, nranks = 1;

static void mpi_coll(const float* in, float* out, size_t count) {
  int n = (int)count, per = (int)(count / (size_t)nranks), rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  switch (coll) {
    case ALLGATHER:
      MPI_Allgather(in, per, MPI_FLOAT, out, per, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case REDUCESCATTER:
      MPI_Reduce_scatter_block(in, out, per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case BROADCAST: /* the root sends its input, the others receive into their output */
      MPI_Bcast(rank == 0 ? (void*)in : (void*)out, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case REDUCE:
      MPI_Reduce(in, out, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      break;
    default:
      MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
}

/* What each rank's output holds (sweep_input's values), and how much of it. */
static size_t coll_out_elems(const struct sweep_ops* o, size_t count) {
  size_t per = count / (size_t)o->nranks;
  if (coll == ALLGATHER) return per * (size_t)o->nranks;
  if (coll == REDUCESCATTER) return per;
  return (coll == BROADCAST) == (o->rank != 0) ? count : 0; /* broadcast: non-roots; reduce: root */
}
static float coll_want(const struct sweep_ops* o, size_t count, size_t i) {
  size_t per = count / (size_t)o->nranks;
  double total = (double)o->nranks * (o->nranks + 1) / 2;
  if (coll == ALLGATHER) return sweep_input((int)(i / per), i % per);
  if (coll == REDUCESCATTER) return (float)(total * (double)(((size_t)o->rank * per + i) % 7 + 1));
  if (coll == BROADCAST) return sweep_input(0, i);
  return (float)(total * (double)(i % 7 + 1));
}

static void mpi_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }
static double mpi_sum(double x) {
  double y;
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return y;
}
static double mpi_max(double x) {
  double y;
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc > 2 && strcmp(argv[1], "-C") == 0) {
    for (coll = REDUCE; coll > ALLREDUCE && strcmp(argv[2], coll_names[coll]) != 0; coll--) continue;
    if (strcmp(argv[2], coll_names[coll]) != 0) {
      fprintf(stderr, "mpi_allreduce: unknown collective -C %s\n", argv[2]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    argv[2] = argv[0];
    argv += 2;
    argc -= 2;
  }
  struct sweep_ops o = {.allreduce = mpi_coll, .barrier = mpi_barrier, .sum = mpi_sum, .max = mpi_max};
  if (coll != ALLREDUCE) o.out_elems = coll_out_elems, o.want = coll_want;
  MPI_Comm_rank(MPI_COMM_WORLD, &o.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &o.nranks);
  nranks = o.nranks;
  char ver[MPI_MAX_LIBRARY_VERSION_STRING + 32];
  int len;
  MPI_Get_library_version(ver, &len);
  char* nl = strchr(ver, '\n');
  if (nl) *nl = 0;
  char name[sizeof(ver) + 32];
  snprintf(name, sizeof(name), "%s, %s", coll_names[coll], ver);
  int rc = sweep_main(&o, argc, argv, name);
  MPI_Finalize();
  return rc;
}
