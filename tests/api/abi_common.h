/* Helpers shared by the ABI dump and the static ABI test: the type code of an expression, so
 * that a field's type (not only its size) is part of the comparison. */
#ifndef WEFT_TESTS_API_ABI_COMMON_H
#define WEFT_TESTS_API_ABI_COMMON_H

#include <stddef.h>

/* Arrays decay and qualifiers drop in _Generic, which is what a by-value comparison wants. */
#define ABI_TYPECODE(x)                                                                               \
  _Generic((x), char : 1, signed char : 2, unsigned char : 3, short : 4, unsigned short : 5, int : 6, \
           unsigned int : 7, long : 8, unsigned long : 9, long long : 10, unsigned long long : 11,    \
           float : 12, double : 13, char* : 14, const char* : 15, void* : 16, default : 99)

#endif
