/* MPI_Allreduce driver of bench/compare.sh (built once with Open MPI, once with MPICH). */
#include <mpi.h>

#include "sweep.h"

static void mpi_allreduce(const float* in, float* out, size_t count) {
  MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
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
  struct sweep_ops o = {.allreduce = mpi_allreduce, .barrier = mpi_barrier, .sum = mpi_sum, .max = mpi_max};
  MPI_Comm_rank(MPI_COMM_WORLD, &o.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &o.nranks);
  char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int len;
  MPI_Get_library_version(ver, &len);
  char* nl = strchr(ver, '\n');
  if (nl) *nl = 0;
  int rc = sweep_main(&o, argc, argv, ver);
  MPI_Finalize();
  return rc;
}
