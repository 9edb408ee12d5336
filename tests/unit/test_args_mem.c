/* ncclMemAlloc/ncclMemFree (shared memory another process can map through the recorded
 * path) and ncclCommRegister/ncclCommDeregister, with their argument errors. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "collectives/mem.h"
#include "core/comm.h"
#include "nccl.h"

static int count_own_shm(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "ls /dev/shm 2>/dev/null | grep -c '^weft-mem-%d-'", (int)getpid());
  FILE* f = popen(cmd, "r");
  int n = -1;
  if (f && fscanf(f, "%d", &n) != 1) n = -1;
  if (f) pclose(f);
  return n;
}

static void test_alloc(void) {
  void* p = NULL;
  size_t size = 3 * 4096 + 5;
  EXPECT_EQ_INT(ncclMemAlloc(&p, size), ncclSuccess);
  EXPECT(p != NULL);
  memset(p, 0x5a, size);
  struct weft_mem_seg seg;
  EXPECT_EQ_INT(weft_mem_lookup((char*)p + 100, 200, &seg), ncclSuccess);
  EXPECT(seg.base == p && seg.size >= size && seg.pid == getpid());
  EXPECT_EQ_INT(weft_mem_lookup((char*)p + seg.size - 1, 2, NULL), ncclInvalidArgument);
  EXPECT_EQ_INT(weft_mem_lookup(&seg, 1, NULL), ncclInvalidArgument);
  EXPECT_EQ_INT(count_own_shm(), 0); /* unlinked at once: nothing to leak */
  /* another process maps the same pages through the path and writes into them */
  pid_t child = fork();
  if (child == 0) {
    int fd = open(seg.path, O_RDWR);
    if (fd < 0) _exit(2);
    unsigned char* q = mmap(NULL, seg.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (q == MAP_FAILED || q[size - 1] != 0x5a) _exit(3);
    q[0] = 0xa5;
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  EXPECT_EQ_INT(((unsigned char*)p)[0], 0xa5);
  EXPECT_EQ_INT(ncclMemFree(p), ncclSuccess);
  EXPECT_EQ_INT(weft_mem_lookup(p, 1, NULL), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclMemFree(p), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "not returned by ncclMemAlloc") != NULL);
  EXPECT_EQ_INT(ncclMemFree(NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclMemAlloc(NULL, 10), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "ptr is NULL") != NULL);
  EXPECT_EQ_INT(ncclMemAlloc(&p, 0), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "size is 0") != NULL);
}

static void test_register(struct ncclComm* c, struct ncclComm* other) {
  static char plain[1000];
  void* shared = NULL;
  void *h1 = NULL, *h2 = NULL;
  EXPECT_EQ_INT(ncclMemAlloc(&shared, 8192), ncclSuccess);
  EXPECT_EQ_INT(ncclCommRegister(c, plain, sizeof(plain), &h1), ncclSuccess);
  EXPECT_EQ_INT(ncclCommRegister(c, shared, 8192, &h2), ncclSuccess);
  EXPECT(h1 != NULL && h2 != NULL && h1 != h2);
  const struct weft_mem_reg* r = weft_mem_reg_find(&c->ctx, plain + 10, 20);
  EXPECT(r != NULL && r == h1 && !r->shared);
  r = weft_mem_reg_find(&c->ctx, (char*)shared + 4096, 4096);
  EXPECT(r != NULL && r->shared);
  EXPECT(weft_mem_reg_find(&c->ctx, plain + 990, 20) == NULL);
  EXPECT(weft_mem_reg_find(&other->ctx, plain, 1) == NULL);
  EXPECT_EQ_INT(ncclCommDeregister(other, h1), ncclInvalidArgument); /* not other's */
  EXPECT_EQ_INT(ncclCommDeregister(c, h1), ncclSuccess);
  EXPECT_EQ_INT(ncclCommDeregister(c, h1), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "is not a registration") != NULL);
  EXPECT(weft_mem_reg_find(&c->ctx, plain, 1) == NULL);
  EXPECT_EQ_INT(ncclCommRegister(c, NULL, 10, &h1), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "buff is NULL") != NULL);
  EXPECT_EQ_INT(ncclCommRegister(c, plain, 0, &h1), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "size is 0") != NULL);
  EXPECT_EQ_INT(ncclCommRegister(c, plain, 10, NULL), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "handle is NULL") != NULL);
  EXPECT_EQ_INT(ncclCommRegister(NULL, plain, 10, &h1), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclCommDeregister(NULL, h2), ncclInvalidArgument);
  weft_mem_comm_fini(&c->ctx); /* drops h2 */
  EXPECT(weft_mem_reg_find(&c->ctx, shared, 1) == NULL);
  EXPECT_EQ_INT(ncclMemFree(shared), ncclSuccess);
  weft_mem_comm_fini(NULL);
}

int main(void) {
  struct ncclComm* c = calloc(1, sizeof(*c));
  struct ncclComm* other = calloc(1, sizeof(*other));
  c->magic = other->magic = WEFT_COMM_MAGIC;
  c->ctx.nranks = other->ctx.nranks = 1;
  test_alloc();
  test_register(c, other);
  free(c);
  free(other);
  return test_finish("test_args_mem");
}
