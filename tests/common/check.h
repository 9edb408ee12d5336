/* Minimal assertions for test programs: count failures, print the place, exit status at the end. */
#ifndef WEFT_TESTS_CHECK_H
#define WEFT_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

extern int test_failures;

#define EXPECT(cond)                                                    \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      test_failures++;                                                  \
    }                                                                   \
  } while (0)

#define EXPECT_MSG(cond, ...)                                           \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                     \
      fprintf(stderr, "\n");                                            \
      test_failures++;                                                  \
    }                                                                   \
  } while (0)

#define EXPECT_EQ_INT(a, b)                                                                           \
  do {                                                                                                \
    long long a_ = (long long)(a), b_ = (long long)(b);                                               \
    if (a_ != b_) {                                                                                   \
      fprintf(stderr, "FAILED %s:%d: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, #a, #b, a_, b_); \
      test_failures++;                                                                                \
    }                                                                                                 \
  } while (0)

/* Print a result line and return the process exit status. */
int test_finish(const char* name);
/* A TCP port on 127.0.0.1 that was free a moment ago (for NCCL_COMM_ID). */
int test_free_port(void);
/* Exit with the skip status (77) after printing why. */
void test_skip(const char* why);

#endif
