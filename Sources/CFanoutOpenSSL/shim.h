#ifndef FANOUT_CFANOUTOPENSSL_SHIM_H
#define FANOUT_CFANOUTOPENSSL_SHIM_H

// Target the OpenSSL 3.0 API and hide everything deprecated up to 3.0, so Swift cannot call it.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#endif
