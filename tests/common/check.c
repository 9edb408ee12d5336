/* Shared helpers for test programs. */
#include "check.h"

int test_failures;

int test_finish(const char* name) {
  if (test_failures) {
    printf("%s: %d check(s) failed\n", name, test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

void test_skip(const char* why) {
  printf("SKIP: %s\n", why);
  exit(77);
}
