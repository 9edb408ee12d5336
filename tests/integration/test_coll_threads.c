/* Every collective x datatype x op with ranks as threads of one process, for 1, 2, 3, 4, 5
 * and 8 ranks; counts 0, 1, 7 and random; in place and out of place. Arguments: rank counts
 * to run instead (e.g. "3 5"); COLL_SEED=<seed> repeats a run. */
#include "check.h"
#include "coll_util.h"

int main(int argc, char** argv) { return run_matrix_main(argc, argv, 0, "test_coll_threads"); }
