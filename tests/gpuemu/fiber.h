/* Fibers for the emulated GPU: every CUDA thread of a block is a fiber of the block's OS thread,
 * switched only at barriers and at the end of the kernel, so a 512-thread block costs one OS
 * thread. x86-64 switches with a few instructions of its own; other machines use ucontext. */
#ifndef WEFT_TESTS_GPUEMU_FIBER_H
#define WEFT_TESTS_GPUEMU_FIBER_H

#include <stddef.h>

struct weft_fiber;

/* A set of n fibers with stacks of stack_bytes each, reusable for several runs. */
struct weft_fiber_set* weft_fiber_set_create(int n, size_t stack_bytes);
void weft_fiber_set_destroy(struct weft_fiber_set* s);
int weft_fiber_set_size(const struct weft_fiber_set* s);

/* Prepare fiber i to run fn(arg, i) from the start the next time it is resumed. */
void weft_fiber_prepare(struct weft_fiber_set* s, int i, void (*fn)(void* arg, int i), void* arg);
/* From the scheduler (the OS thread's own stack): run fiber i until it yields or returns. */
void weft_fiber_resume(struct weft_fiber_set* s, int i);
/* From inside fiber i: back to the scheduler; returns when resumed. */
void weft_fiber_yield(struct weft_fiber_set* s, int i);
/* 1 once fiber i's function has returned (since the last prepare). */
int weft_fiber_done(const struct weft_fiber_set* s, int i);
/* From the scheduler: what every fiber did before its last yield happens before what the
 * scheduler does next, and so before what a fiber does once resumed (a barrier). Only the race
 * detector sees it: fibers of one OS thread need no fence. */
void weft_fiber_collect(struct weft_fiber_set* s);

#endif
