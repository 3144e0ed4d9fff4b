#ifndef FANOUT_CFANOUTLZ4_SHIM_H
#define FANOUT_CFANOUTLZ4_SHIM_H
#include <lz4.h>
#include <lz4frame.h>
#endif
