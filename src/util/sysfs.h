/* Small readers of the kernel's text files (sysfs, procfs), shared by detection, the doctor, the
 * flight recorder and weftrun. */
#ifndef WEFT_UTIL_SYSFS_H
#define WEFT_UTIL_SYSFS_H

#include <sched.h>
#include <stddef.h>

/* The first line of path into buf, its newline removed; -1 (buf empty) when unreadable. */
int weft_read_line(const char* path, char* buf, size_t size);
/* A cpulist such as "0-3,8-11" into set; -1 when it is not one. */
int weft_parse_cpulist(const char* text, cpu_set_t* set);

#endif
