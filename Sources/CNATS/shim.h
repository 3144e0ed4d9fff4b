#ifndef FANOUT_CNATS_SHIM_H
#define FANOUT_CNATS_SHIM_H
#include <nats/nats.h>
#endif
