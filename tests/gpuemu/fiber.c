/* Fibers of the emulated GPU (see fiber.h). A set's stacks are one mapping (a guard page per
 * stack would cost two kernel mappings per CUDA thread, and a process may have only ~65k), with
 * a guard page below the lowest and a canary at the bottom of each, checked when the fiber ends.
 * Under ThreadSanitizer each fiber is announced to it as a thread of its own, ordered the way
 * CUDA threads are: a resume passes the scheduler's history to the fiber, a yield passes the
 * fiber's nothing until weft_fiber_collect, so CUDA threads of one block stay unordered between
 * two barriers and races among them are seen too. */
#include "fiber.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define WEFT_FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_FIBER_TSAN 1
#endif
#endif
#ifdef WEFT_FIBER_TSAN
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
#define WEFT_FIBER_NO_SYNC 1 /* __tsan_switch_to_fiber_no_sync */
#endif

#if defined(__x86_64__) && !defined(WEFT_FIBER_UCONTEXT)
#define WEFT_FIBER_ASM 1
/* weft_fiber_switch(&save_sp, load_sp): push the callee-saved registers, swap stacks, pop. */
__asm__(
    ".pushsection .text\n"
    ".globl weft_fiber_switch\n"
    ".hidden weft_fiber_switch\n"
    ".p2align 4\n"
    "weft_fiber_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".popsection\n");
__attribute__((visibility("hidden"))) void weft_fiber_switch(void** save_sp,
                                                             void* load_sp) __asm__("weft_fiber_switch");
#else
#include <ucontext.h>
#endif

struct weft_fiber {
  struct weft_fiber_set* set;
  int index;
  int done;
  void (*fn)(void*, int);
  void* arg;
  char* stack; /* usable part, above the guard page */
#ifdef WEFT_FIBER_ASM
  void* sp;
#else
  ucontext_t ctx;
#endif
#ifdef WEFT_FIBER_TSAN
  void* tsan;
#endif
};

struct weft_fiber_set {
  int n;
  size_t stack_bytes;
  char* map;
  size_t map_bytes;
#ifdef WEFT_FIBER_ASM
  void* sched_sp;
#else
  ucontext_t sched;
#endif
#ifdef WEFT_FIBER_TSAN
  void* sched_tsan;
#endif
  struct weft_fiber f[];
};

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

struct weft_fiber_set* weft_fiber_set_create(int n, size_t stack_bytes) {
  size_t pg = page_size();
  stack_bytes = (stack_bytes + pg - 1) / pg * pg;
  struct weft_fiber_set* s = calloc(1, sizeof(*s) + (size_t)n * sizeof(struct weft_fiber));
  if (s == NULL) return NULL;
  s->n = n;
  s->stack_bytes = stack_bytes;
  s->map_bytes = (size_t)n * stack_bytes + pg;
  s->map =
      mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (s->map == MAP_FAILED) {
    free(s);
    return NULL;
  }
  mprotect(s->map, pg, PROT_NONE);
  for (int i = 0; i < n; i++) {
    s->f[i].set = s;
    s->f[i].index = i;
    s->f[i].done = 1;
    s->f[i].stack = s->map + pg + (size_t)i * stack_bytes;
#ifdef WEFT_FIBER_TSAN
    s->f[i].tsan = __tsan_create_fiber(0);
#endif
  }
  return s;
}

void weft_fiber_set_destroy(struct weft_fiber_set* s) {
  if (s == NULL) return;
#ifdef WEFT_FIBER_TSAN
  for (int i = 0; i < s->n; i++) __tsan_destroy_fiber(s->f[i].tsan);
#endif
  munmap(s->map, s->map_bytes);
  free(s);
}

int weft_fiber_set_size(const struct weft_fiber_set* s) { return s->n; }

#define CANARY_WORDS 8
#define CANARY 0x5745465453544b21ull /* "WEFTSTK!" */

static void canary_set(struct weft_fiber* f) {
  uint64_t* c = (uint64_t*)f->stack;
  for (int i = 0; i < CANARY_WORDS; i++) c[i] = CANARY;
}

static void canary_check(const struct weft_fiber* f) {
  const uint64_t* c = (const uint64_t*)f->stack;
  for (int i = 0; i < CANARY_WORDS; i++)
    if (c[i] != CANARY) {
      fprintf(stderr, "weft-emu: CUDA thread %d overflowed its %zu-byte fiber stack\n", f->index,
              f->set->stack_bytes);
      abort();
    }
}

/* The race detector keeps a call stack per fiber: a frame of it that never returns (the fiber's
 * last switch) would stay on it for every later run of the fiber, and the stack grows until it
 * overflows. So the frames around the last switch are left out of the instrumentation. */
#ifdef WEFT_FIBER_TSAN
#define WEFT_FIBER_UNTRACKED __attribute__((no_sanitize_thread))
#else
#define WEFT_FIBER_UNTRACKED
#endif

/* Back to the scheduler, not ordered before what it does next (see weft_fiber_yield). */
WEFT_FIBER_UNTRACKED static void to_scheduler(struct weft_fiber_set* s, struct weft_fiber* f) {
#ifdef WEFT_FIBER_TSAN
  __tsan_release(s);
  __tsan_switch_to_fiber(__atomic_load_n(&s->sched_tsan, __ATOMIC_RELAXED), WEFT_FIBER_NO_SYNC);
#endif
#ifdef WEFT_FIBER_ASM
  weft_fiber_switch(&f->sp, s->sched_sp);
#else
  swapcontext(&f->ctx, &s->sched);
#endif
}

static void fiber_run(struct weft_fiber* f) {
  f->fn(f->arg, f->index);
  canary_check(f);
  f->done = 1;
}

/* Where every fiber starts: run, mark done, hand control back for good. */
WEFT_FIBER_UNTRACKED static void fiber_main(struct weft_fiber* f) {
  fiber_run(f);
  to_scheduler(f->set, f);
  abort(); /* a finished fiber is never resumed */
}

#ifdef WEFT_FIBER_ASM
/* Entered by the first switch's ret, with the fiber in r12 (restored from the initial frame). */
__asm__(
    ".pushsection .text\n"
    ".globl weft_fiber_entry\n"
    ".hidden weft_fiber_entry\n"
    ".p2align 4\n"
    "weft_fiber_entry:\n"
    "  movq %r12, %rdi\n"
    "  call weft_fiber_main_c\n"
    "  ud2\n"
    ".popsection\n");
__attribute__((visibility("hidden"))) void weft_fiber_entry(void) __asm__("weft_fiber_entry");
__attribute__((visibility("hidden"), used)) void weft_fiber_main_c(struct weft_fiber* f) __asm__(
    "weft_fiber_main_c");
WEFT_FIBER_UNTRACKED void weft_fiber_main_c(struct weft_fiber* f) { fiber_main(f); }
#else
WEFT_FIBER_UNTRACKED static void ucontext_main(unsigned lo, unsigned hi) {
  fiber_main((struct weft_fiber*)(((uintptr_t)hi << 32) | lo));
}
#endif

void weft_fiber_prepare(struct weft_fiber_set* s, int i, void (*fn)(void*, int), void* arg) {
  struct weft_fiber* f = &s->f[i];
  f->fn = fn;
  f->arg = arg;
  f->done = 0;
  canary_set(f);
#ifdef WEFT_FIBER_ASM
  /* Initial frame, popped by weft_fiber_switch: mxcsr/fpu word, r15..rbp, return address. */
  uint64_t* top = (uint64_t*)(((uintptr_t)(f->stack + s->stack_bytes)) & ~(uintptr_t)15);
  uint64_t* sp = top - 10;
  uint32_t csr[2];
  __asm__ volatile("stmxcsr %0\n fnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
  memcpy(&sp[0], csr, 8);
  sp[1] = 0;                                     /* r15 */
  sp[2] = 0;                                     /* r14 */
  sp[3] = 0;                                     /* r13 */
  sp[4] = (uint64_t)(uintptr_t)f;                /* r12: the fiber */
  sp[5] = 0;                                     /* rbx */
  sp[6] = 0;                                     /* rbp */
  sp[7] = (uint64_t)(uintptr_t)weft_fiber_entry; /* ret target; rsp is then 16-aligned for its call */
  sp[8] = 0;
  f->sp = sp;
#else
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = f->stack;
  f->ctx.uc_stack.ss_size = s->stack_bytes;
  f->ctx.uc_link = NULL;
  uintptr_t p = (uintptr_t)f;
  makecontext(&f->ctx, (void (*)(void))ucontext_main, 2, (unsigned)(p & 0xffffffffu), (unsigned)(p >> 32));
#endif
}

void weft_fiber_resume(struct weft_fiber_set* s, int i) {
  struct weft_fiber* f = &s->f[i];
#ifdef WEFT_FIBER_TSAN
  /* Atomic: the last fiber's read in yield is not ordered before this (see weft_fiber_yield). */
  __atomic_store_n(&s->sched_tsan, __tsan_get_current_fiber(), __ATOMIC_RELAXED);
  __tsan_switch_to_fiber(f->tsan, 0);
#endif
#ifdef WEFT_FIBER_ASM
  weft_fiber_switch(&s->sched_sp, f->sp);
#else
  swapcontext(&s->sched, &f->ctx);
#endif
}

/* The scheduler does not take the fiber's history here: it would hand it on to the next fiber it
 * resumes, and the CUDA threads of a block would all be ordered. */
void weft_fiber_yield(struct weft_fiber_set* s, int i) { to_scheduler(s, &s->f[i]); }

int weft_fiber_done(const struct weft_fiber_set* s, int i) { return s->f[i].done; }

void weft_fiber_collect(struct weft_fiber_set* s) {
#ifdef WEFT_FIBER_TSAN
  __tsan_acquire(s);
#else
  (void)s;
#endif
}
