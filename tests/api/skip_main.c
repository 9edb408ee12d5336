/* Stands in for an API test when the CUDA toolkit's nccl.h is absent. */
#include <stdio.h>

int main(void) {
  printf("SKIP: %s\n", WHY);
  return 77;
}
