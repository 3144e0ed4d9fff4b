#ifndef FANOUT_CFANOUTOPENSSL_SHIM_H
#define FANOUT_CFANOUTOPENSSL_SHIM_H

// Target the OpenSSL 3.0 API and hide everything deprecated up to 3.0, so Swift cannot call it.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

// Function-like macros are not imported by Swift: wrap the ones needed.
static inline long CFanoutOpenSSL_BIO_get_mem_data(BIO *b, char **pp) {
    return BIO_get_mem_data(b, pp);
}
static inline void CFanoutOpenSSL_OPENSSL_free(void *p) {
    OPENSSL_free(p);
}

#endif
