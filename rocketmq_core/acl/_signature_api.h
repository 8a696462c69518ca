/* What the compiled signature check (_signature.c) offers other compiled modules: the
 * capsule ``rocketmq_core.acl._signature.API`` holds a SignatureApi. The send runs
 * (broker/processors/_send_fast.c) check a frame's signature with it where they read
 * its header in place, with no extFields dict to hand. */
#ifndef ROCKETMQ_SIGNATURE_API_H
#define ROCKETMQ_SIGNATURE_API_H

#include <Python.h>

#define SIGNATURE_API_CAPSULE "rocketmq_core.acl._signature.API"

/* what request versions up to this one signed: not the unique-key query field
 * (acl/signing.py's LAST_VERSION_WITHOUT_SIGNED_UNIQUE_KEY) */
#define LAST_VERSION_WITHOUT_SIGNED_UNIQUE_KEY 399

typedef struct {
    /* 1 when ``received`` is the Base64 HMAC-SHA1, keyed by ``keyed`` (a capsule that
     * keyed(secret) gave), of the ``count`` texts one after another and then the body; 0
     * when it is not; -1 with an exception set when ``keyed`` is not such a capsule. The
     * comparison takes the same time whatever the received text. */
    int (*signed_with)(PyObject *keyed, const char *const *texts, const Py_ssize_t *lengths,
                       Py_ssize_t count, const char *body, Py_ssize_t body_length,
                       const char *received, Py_ssize_t received_length);
} SignatureApi;

#endif
