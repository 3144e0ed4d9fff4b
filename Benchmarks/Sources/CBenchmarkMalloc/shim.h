#ifndef FANOUT_CBENCHMARKMALLOC_SHIM_H
#define FANOUT_CBENCHMARKMALLOC_SHIM_H
// glibc's allocator statistics (mallinfo2), which Swift's Glibc module does not export.
#include <malloc.h>
#endif
