/* NCCL's device-list syntax, shared by NCCL_SOCKET_IFNAME and NCCL_IB_HCA: "a,b" matches names
 * starting with a or b, a leading "=" makes every entry an exact name, a leading "^" excludes
 * what matches, and (for devices with ports) "name:port" narrows an entry to one port. */
#ifndef WEFT_UTIL_NAME_LIST_H
#define WEFT_UTIL_NAME_LIST_H

/* 1 when name (and port) is selected by spec; a NULL spec selects everything, an empty one nothing. port 0:
 * the caller's names have no ports, so ':' is part of an entry (interface aliases "eth0:1");
 * port >= 1: an entry's ":N" must equal it, an entry without one matches every port. */
int weft_name_list_match(const char* spec, const char* name, int port);

#endif
