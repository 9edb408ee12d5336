/* One rank of a multi-host test job (launched per rank by the tests/net scripts, possibly inside
 * a network namespace). Joins through NCCL_COMM_ID and runs, in one communicator, every
 * collective x datatype x op plus send/recv patterns under each NCCL_ALGO x NCCL_PROTO
 * combination, checking every result against an independent reference.
 *   net_ranks RANK NRANKS [check|short|kill:VICTIM|stall:VICTIM|quit:VICTIM|loop:SECONDS]
 * check: exit 0 when every result is right. short: the same for a few all-reduces and
 * all-gathers only (small to larger than the connectors hold), for tests of a network itself. kill:V: rank V
 * SIGKILLs itself inside a large all-reduce; the others must get an error (exit 3) naming rank V within
 * WEFT_TIMEOUT. stall:V: rank V stops (SIGSTOP) so its peers time out. quit:V: rank V destroys its
 * communicator (normally) where the others make a third all-reduce, and exits 0; the others must
 * fail naming it; quitp2p:V the same with ring send/recv exchanges. loop:S: all-reduces for S seconds (the
 * script disturbs the network meanwhile); exit 0 when all were right, 3 on an error. regloop:S: loop:S
 * with the buffer registered (ncclCommRegister). */
#include <signal.h>

#include "check.h"
#include "coll_util.h"

static const char* combos[][2] = {{"Ring", "Simple"}, {"Ring", "LL"}, {"Tree", "Simple"}, {"Tree", "LL"}};

static void add_large(struct case_list* l, int n, uint64_t seed) {
  static const size_t counts[] = {100003, 262144 + 17};
  for (int i = 0; i < 2; i++) {
    uint64_t s = mix64(seed + 77 + (uint64_t)i);
    case_add(l, (struct coll_case){C_ALLREDUCE, ncclFloat32, O_SUM, i, 0, counts[i], s});
    case_add(l, (struct coll_case){C_ALLREDUCE, ncclInt32, O_AVG, 1 - i, 0, counts[i] / 3, s + 1});
    case_add(l, (struct coll_case){C_ALLGATHER, ncclInt8, O_NONE, i, 0, counts[i] / 7, s + 2});
    case_add(l, (struct coll_case){C_REDUCESCATTER, ncclFloat64, O_MAX, i, 0, counts[i] / 9, s + 3});
    case_add(l,
             (struct coll_case){C_BROADCAST, ncclUint8, O_NONE, i, (int)(s % (uint64_t)n), counts[i], s + 4});
    case_add(l,
             (struct coll_case){C_REDUCE, ncclFloat16, O_SUM, i, (int)(s % (uint64_t)n), counts[i], s + 5});
    case_add(l, (struct coll_case){C_ALLTOALL, ncclInt32, O_NONE, 0, 0, counts[i] / n / 2, s + 6});
    case_add(l, (struct coll_case){C_SENDRECV, ncclFloat32, O_NONE, 0, 0, counts[i], s + 7});
  }
}

/* A call returns when the work is complete, so its send buffer is the caller's again at once:
 * overwriting it right after the return must not change what peers receive (network sends may
 * read user buffers in place; they must be finished by then). Broadcast from every root,
 * all-gather, send/recv; 8 MiB each, more than the connectors hold. Returns the number of wrong
 * results. */
static int run_reuse(ncclComm_t comm, int rank, int n) {
  size_t count = 8u << 20;
  unsigned char* buf = malloc(count * (size_t)n);
  unsigned char* mine = malloc(count);
  unsigned char flag = 0;
  int bad = 0;
  for (int root = 0; root < n; root++) { /* every rank runs every call, whatever it found */
    for (size_t i = 0; i < count; i++) buf[i] = rank == root ? (unsigned char)(i * 7 + root) : 0;
    if (ncclBroadcast(buf, buf, count, ncclUint8, root, comm, NULL) != ncclSuccess) goto failed;
    if (rank == root) memset(buf, 0xEE, count);
    if (ncclAllReduce(&flag, &flag, 1, ncclUint8, ncclMax, comm, NULL) != ncclSuccess)
      goto failed; /* a barrier */
    for (size_t i = 0; i < count && rank != root; i++)
      if (buf[i] != (unsigned char)(i * 7 + root)) {
        fprintf(stderr, "rank %d: broadcast from %d, byte %zu: %d after the root reused its buffer\n", rank,
                root, i, buf[i]);
        bad++;
        break;
      }
  }
  for (size_t i = 0; i < count; i++) mine[i] = (unsigned char)(i * 13 + rank);
  if (ncclAllGather(mine, buf, count, ncclUint8, comm, NULL) != ncclSuccess) goto failed;
  memset(mine, 0xEE, count);
  if (ncclAllReduce(&flag, &flag, 1, ncclUint8, ncclMax, comm, NULL) != ncclSuccess) goto failed;
  for (size_t i = 0; i < count * (size_t)n && bad == 0; i++)
    if (buf[i] != (unsigned char)((i % count) * 13 + i / count)) {
      fprintf(stderr, "rank %d: all-gather byte %zu: %d after the senders reused their buffers\n", rank, i,
              buf[i]);
      bad++;
    }
  /* Send/recv: each rank to the next, which checks after the sender overwrote its buffer. */
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (size_t i = 0; i < count; i++) mine[i] = (unsigned char)(i * 5 + rank);
  if (ncclGroupStart() != ncclSuccess || ncclSend(mine, count, ncclUint8, next, comm, NULL) != ncclSuccess ||
      ncclRecv(buf, count, ncclUint8, prev, comm, NULL) != ncclSuccess || ncclGroupEnd() != ncclSuccess)
    goto failed;
  memset(mine, 0xEE, count);
  if (ncclAllReduce(&flag, &flag, 1, ncclUint8, ncclMax, comm, NULL) != ncclSuccess) goto failed;
  for (size_t i = 0; i < count && bad == 0; i++)
    if (buf[i] != (unsigned char)(i * 5 + prev)) {
      fprintf(stderr, "rank %d: send/recv byte %zu: %d after the sender reused its buffer\n", rank, i,
              buf[i]);
      bad++;
    }
  free(mine);
  free(buf);
  return bad;
failed: /* a call failed: its WARN says why */
  fprintf(stderr, "rank %d: a call of the buffer-reuse checks failed: %s\n", rank, ncclGetLastError(comm));
  free(mine);
  free(buf);
  return bad + 1;
}

/* A communicator reads NCCL_ALGO / NCCL_PROTO when it is created: a split under new settings. */
static int split_with(ncclComm_t comm, int rank, const char* algo, const char* proto, ncclComm_t* sub) {
  setenv("NCCL_ALGO", algo, 1);
  setenv("NCCL_PROTO", proto, 1);
  if (ncclCommSplit(comm, 0, rank, sub, NULL) == ncclSuccess) return 0;
  fprintf(stderr, "rank %d: split for %s/%s failed: %s\n", rank, algo, proto, ncclGetLastError(comm));
  return 1;
}

static int run_check(ncclComm_t comm, int rank, int n) {
  uint64_t seed = 0x5eed0000ull + (uint64_t)n;
  const char* s = getenv("COLL_SEED");
  if (s) seed = strtoull(s, NULL, 0);
  coll_base_seed = seed;
  struct case_list l = {0};
  cases_matrix(&l, n, seed, 3000);
  cases_edges(&l, n, seed);
  add_large(&l, n, seed);
  int problems = 0;
  for (int k = 0; k < 5; k++) {
    ncclComm_t sub;
    if (split_with(comm, rank, k < 4 ? combos[k][0] : "Ring", k < 4 ? combos[k][1] : "Simple", &sub) != 0) {
      problems++;
      continue;
    }
    double t0 = now_s();
    int p = k < 4 ? run_case_list(sub, rank, n, &l) : run_reuse(sub, rank, n);
    if (rank == 0 && k < 4)
      printf("%s/%s: %d cases, %d wrong, %.2f s\n", combos[k][0], combos[k][1], l.n, p, now_s() - t0);
    if (rank == 0 && k == 4)
      printf("Ring/Simple, buffers reused right after the calls return: %d wrong\n", p);
    fflush(stdout);
    problems += p;
    if (ncclCommDestroy(sub) != ncclSuccess) problems++;
  }
  free(l.v);
  return problems;
}

static int run_short(ncclComm_t comm, int rank, int n) {
  static const size_t counts[] = {1, 4099, 262144 + 17, (1u << 20) + 3};
  struct case_list l = {0};
  uint64_t seed = 0x5ee7ull + (uint64_t)n;
  coll_base_seed = seed;
  for (int i = 0; i < 4; i++) {
    uint64_t sd = mix64(seed + (uint64_t)i);
    case_add(&l, (struct coll_case){C_ALLREDUCE, ncclFloat32, O_SUM, i & 1, 0, counts[i], sd});
    case_add(&l, (struct coll_case){C_ALLREDUCE, ncclInt32, O_MAX, 1 - (i & 1), 0, counts[i], sd + 1});
    case_add(&l, (struct coll_case){C_ALLGATHER, ncclInt8, O_NONE, i & 1, 0, counts[i], sd + 2});
  }
  int problems = 0;
  for (int k = 0; k < 4; k++) {
    ncclComm_t sub;
    if (split_with(comm, rank, combos[k][0], combos[k][1], &sub) != 0) {
      problems++;
      continue;
    }
    int p = run_case_list(sub, rank, n, &l);
    if (rank == 0) printf("%s/%s: %d cases, %d wrong\n", combos[k][0], combos[k][1], l.n, p);
    fflush(stdout);
    problems += p;
    if (ncclCommDestroy(sub) != ncclSuccess) problems++;
  }
  free(l.v);
  return problems;
}

/* Large all-reduces until the deadline (or forever); the victim dies or stops in the third (fault
 * SIGKILL or SIGSTOP), or (fault 0) leaves before it, destroying its communicator normally.
 * registered: the buffer is registered with ncclCommRegister for the loop. */
static int run_loop(ncclComm_t comm, int rank, int victim, int fault, double seconds, int registered) {
  size_t count = 1 << 20;
  float* buf = malloc(count * sizeof(float));
  void* handle = NULL;
  if (registered && ncclCommRegister(comm, buf, count * sizeof(float), &handle) != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommRegister failed: %s\n", rank, ncclGetLastError(comm));
    free(buf);
    return 1;
  }
  double t0 = now_s();
  /* Rank 0's clock alone says when to stop, carried in the last element (which the check skips):
   * ranks that each read their own clock may disagree on the last iteration, and one would then
   * wait for a peer that has gone. */
  const float stop = 1000.0f;
  for (int it = 0;; it++) {
    for (size_t i = 0; i < count; i++) buf[i] = (float)((rank + (int)i) % 7);
    if (rank == 0 && seconds > 0 && now_s() - t0 >= seconds) buf[count - 1] = stop;
    if (rank == victim && it == 2 && fault == 0) break;
    if (rank == victim && it == 2) raise(fault);
    ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL);
    if (res != ncclSuccess) {
      fprintf(stderr, "rank %d: all-reduce %d returned %s after %.1f s: %s\n", rank, it,
              ncclGetErrorString(res), now_s() - t0, ncclGetLastError(comm));
      free(buf);
      return -1;
    }
    int nr = 0;
    ncclCommCount(comm, &nr);
    for (size_t i = 0; i < count; i += 4099) {
      float want = 0;
      for (int r = 0; r < nr; r++) want += (float)((r + (int)i) % 7);
      if (buf[i] != want) {
        fprintf(stderr, "rank %d: all-reduce %d wrong at %zu: %g != %g\n", rank, it, i, buf[i], want);
        free(buf);
        return 1;
      }
    }
    if (buf[count - 1] >= stop) break;
  }
  if (handle != NULL && ncclCommDeregister(comm, handle) != ncclSuccess) {
    free(buf);
    return 1;
  }
  free(buf);
  return 0;
}

/* Ring send/recv exchanges (each rank to the next) until one fails; the victim leaves before the
 * third (ncclCommDestroy). Returns -1 on a failed call, 1 on wrong data, 0 for the victim. */
static int run_p2p_quit(ncclComm_t comm, int rank, int n, int victim) {
  size_t count = 1 << 18;
  float* out = malloc(count * sizeof(float));
  float* in = malloc(count * sizeof(float));
  int next = (rank + 1) % n, prev = (rank + n - 1) % n, rc = 0;
  double t0 = now_s();
  for (int it = 0; rank != victim || it < 2; it++) {
    for (size_t i = 0; i < count; i++) out[i] = (float)(rank * 1000 + it);
    ncclResult_t res = ncclGroupStart();
    if (res == ncclSuccess) res = ncclSend(out, count, ncclFloat32, next, comm, NULL);
    if (res == ncclSuccess) res = ncclRecv(in, count, ncclFloat32, prev, comm, NULL);
    ncclResult_t end = ncclGroupEnd();
    if (res == ncclSuccess) res = end;
    if (res != ncclSuccess) {
      fprintf(stderr, "rank %d: send/recv %d returned %s after %.1f s: %s\n", rank, it,
              ncclGetErrorString(res), now_s() - t0, ncclGetLastError(comm));
      rc = -1;
      break;
    }
    if (in[0] != (float)(prev * 1000 + it) || in[count - 1] != in[0]) {
      fprintf(stderr, "rank %d: send/recv %d received %g, want %d\n", rank, it, in[0], prev * 1000 + it);
      rc = 1;
      break;
    }
  }
  free(out);
  free(in);
  return rc;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: net_ranks RANK NRANKS [check|short|kill:V|stall:V|quit:V|quitp2p:V|loop:S|regloop:S]\n");
    return 2;
  }
  int rank = atoi(argv[1]), n = atoi(argv[2]);
  const char* mode = argc > 3 ? argv[3] : "check";
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, ncclGetLastError(NULL));
    return 2;
  }
  int rc;
  if (strcmp(mode, "check") == 0 || strcmp(mode, "short") == 0) {
    rc = (strcmp(mode, "short") == 0 ? run_short(comm, rank, n) : run_check(comm, rank, n)) ? 1 : 0;
  } else if (strncmp(mode, "quitp2p:", 8) == 0) {
    int r = run_p2p_quit(comm, rank, n, atoi(mode + 8));
    rc = r < 0 ? 3 : r;
  } else {
    int victim = -1, fault = strncmp(mode, "stall:", 6) == 0  ? SIGSTOP
                             : strncmp(mode, "quit:", 5) == 0 ? 0
                                                              : SIGKILL;
    int registered = strncmp(mode, "regloop:", 8) == 0;
    double secs = 0;
    if (strncmp(mode, "loop:", 5) == 0 || registered)
      secs = atof(strchr(mode, ':') + 1);
    else
      victim = atoi(strchr(mode, ':') ? strchr(mode, ':') + 1 : "0");
    int r = run_loop(comm, rank, victim, fault, secs, registered);
    rc = r < 0 ? 3 : r;
  }
  if (rc == 3) {
    ncclCommAbort(comm); /* must return even with peers gone */
    fprintf(stderr, "rank %d: aborted\n", rank);
  } else if (ncclCommDestroy(comm) != ncclSuccess) {
    rc = 1;
  }
  return rc;
}
