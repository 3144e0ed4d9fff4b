#ifndef FANOUT_CFANOUTMALLOC_SHIM_H
#define FANOUT_CFANOUTMALLOC_SHIM_H
// glibc's allocator tunables (mallopt) and statistics (mallinfo2), which Glibc's module leaves out.
#include <malloc.h>
#endif
