/* A request's signature, compiled (signing.py calls it; docs/spec/ACL.md section 1).
 *
 * ``signature`` gives what signing.request_signature gives: HMAC-SHA1 over the extFields'
 * values in key order (the signature's own field left out, and the unique-key query
 * field for old clients) followed by the body, in Base64; ``matches`` compares that with
 * a received signature without making it. The SHA-1 is OpenSSL's (libcrypto, which
 * uses the CPU's SHA instructions where it has them), driven here block by block:
 * ``keyed`` hashes a secret's padded key blocks once, and each request then hashes only
 * its own bytes (RFC 2104's inner and outer hash, started from copies of those states).
 * Anything unusual (a value that is not a str, text UTF-8 cannot carry) answers None
 * and the Python code decides, as it is the reference this is tested against
 * (tests/acl/test_signing.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* the low-level SHA-1 calls are deprecated in OpenSSL 3 in favour of EVP, whose
 * per-call provider lookups cost more than hashing a 1 KiB message */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <openssl/crypto.h>
#include <openssl/sha.h>

static PyObject *signature_key, *unique_key;

/* HMAC-SHA1 with one secret, nothing hashed yet: the inner and outer hash states after
 * their padded key block */
typedef struct {
    SHA_CTX inner, outer;
} KeyedSha1;

#define SIGNATURE_LENGTH 28 /* Base64 of a 20-byte digest, one '=' of padding */

static void base64_of_digest(const unsigned char *digest, char *out) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int o = 0;
    for (int i = 0; i < 18; i += 3) {
        unsigned triple = (unsigned)digest[i] << 16 | (unsigned)digest[i + 1] << 8 | digest[i + 2];
        out[o++] = alphabet[triple >> 18 & 63];
        out[o++] = alphabet[triple >> 12 & 63];
        out[o++] = alphabet[triple >> 6 & 63];
        out[o++] = alphabet[triple & 63];
    }
    unsigned pair = (unsigned)digest[18] << 16 | (unsigned)digest[19] << 8;
    out[o++] = alphabet[pair >> 18 & 63];
    out[o++] = alphabet[pair >> 12 & 63];
    out[o++] = alphabet[pair >> 6 & 63];
    out[o] = '=';
}

#define KEY_CAPSULE "rocketmq_core.acl._signature.KeyedSha1"

static void free_key(PyObject *capsule) {
    KeyedSha1 *prepared = PyCapsule_GetPointer(capsule, KEY_CAPSULE);
    if (prepared != NULL) {
        OPENSSL_cleanse(prepared, sizeof *prepared);
        PyMem_Free(prepared);
    }
}

PyDoc_STRVAR(keyed_doc,
"keyed(secret, /)\n--\n\n"
"HMAC-SHA1 prepared for ``secret`` (bytes): what ``signature`` and ``matches`` take as\n"
"``keyed``, an opaque capsule to be kept per secret.");

static PyObject *keyed(PyObject *module, PyObject *secret) {
    if (!PyBytes_CheckExact(secret)) {
        PyErr_SetString(PyExc_TypeError, "keyed(secret: bytes)");
        return NULL;
    }
    unsigned char block[SHA_CBLOCK] = {0}, inner_pad[SHA_CBLOCK], outer_pad[SHA_CBLOCK];
    Py_ssize_t length = PyBytes_GET_SIZE(secret);
    if (length > SHA_CBLOCK) /* a key longer than a block is replaced by its digest */
        SHA1((const unsigned char *)PyBytes_AS_STRING(secret), (size_t)length, block);
    else
        memcpy(block, PyBytes_AS_STRING(secret), (size_t)length);
    for (int i = 0; i < SHA_CBLOCK; i++) {
        inner_pad[i] = block[i] ^ 0x36;
        outer_pad[i] = block[i] ^ 0x5c;
    }
    KeyedSha1 *prepared = PyMem_Malloc(sizeof *prepared);
    if (prepared == NULL) return PyErr_NoMemory();
    SHA1_Init(&prepared->inner);
    SHA1_Update(&prepared->inner, inner_pad, SHA_CBLOCK);
    SHA1_Init(&prepared->outer);
    SHA1_Update(&prepared->outer, outer_pad, SHA_CBLOCK);
    OPENSSL_cleanse(block, sizeof block); /* no copy of the secret left behind */
    OPENSSL_cleanse(inner_pad, sizeof inner_pad);
    OPENSSL_cleanse(outer_pad, sizeof outer_pad);
    PyObject *capsule = PyCapsule_New(prepared, KEY_CAPSULE, free_key);
    if (capsule == NULL) {
        OPENSSL_cleanse(prepared, sizeof *prepared);
        PyMem_Free(prepared);
    }
    return capsule;
}

#define MOST_FIELDS 64 /* more extFields than a request has: the Python code's */

/* The Base64 signature of a request into ``out``: 1 when made, 0 when the Python code
 * must decide (nothing raised), -1 with an exception set. */
static int request_signature(PyObject *fields, PyObject *body, PyObject *skip,
                             PyObject *keyed_state, char *out) {
    /* another mapping, a body held in another kind of buffer: the Python code's */
    if (!PyDict_CheckExact(fields) || (body != Py_None && !PyBytes_CheckExact(body))) return 0;
    const KeyedSha1 *key_states = PyCapsule_IsValid(keyed_state, KEY_CAPSULE)
                                      ? PyCapsule_GetPointer(keyed_state, KEY_CAPSULE)
                                      : NULL;
    if (key_states == NULL) {
        PyErr_SetString(PyExc_TypeError, "keyed must be what keyed(secret) gives");
        return -1;
    }
    int skip_unique_key = PyObject_IsTrue(skip);
    if (skip_unique_key < 0) return -1;
    PyObject *keys[MOST_FIELDS], *values[MOST_FIELDS]; /* borrowed, sorted by key */
    Py_ssize_t count = 0, position = 0;
    PyObject *key, *value;
    while (PyDict_Next(fields, &position, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value)) return 0;
        if (PyUnicode_Compare(key, signature_key) == 0) continue;
        if (skip_unique_key && PyUnicode_Compare(key, unique_key) == 0) continue;
        if (count == MOST_FIELDS) return 0;
        /* insertion sort: a request has a dozen fields or so; str order, as sorted() */
        Py_ssize_t at = count++;
        while (at > 0 && PyUnicode_Compare(keys[at - 1], key) > 0) {
            keys[at] = keys[at - 1];
            values[at] = values[at - 1];
            at--;
        }
        keys[at] = key;
        values[at] = value;
    }
    const char *texts[MOST_FIELDS];
    Py_ssize_t lengths[MOST_FIELDS];
    for (Py_ssize_t i = 0; i < count; i++) { /* all encodable before anything is hashed */
        texts[i] = PyUnicode_AsUTF8AndSize(values[i], &lengths[i]);
        if (texts[i] == NULL) { /* text UTF-8 cannot carry: the Python code raises */
            PyErr_Clear();
            return 0;
        }
    }
    SHA_CTX hashing = key_states->inner;
    for (Py_ssize_t i = 0; i < count; i++) SHA1_Update(&hashing, texts[i], (size_t)lengths[i]);
    if (body != Py_None) SHA1_Update(&hashing, PyBytes_AS_STRING(body), (size_t)PyBytes_GET_SIZE(body));
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1_Final(digest, &hashing);
    hashing = key_states->outer;
    SHA1_Update(&hashing, digest, sizeof digest);
    SHA1_Final(digest, &hashing);
    base64_of_digest(digest, out);
    OPENSSL_cleanse(&hashing, sizeof hashing);
    return 1;
}

PyDoc_STRVAR(signature_doc,
"signature(ext_fields, body, skip_unique_key, keyed, /)\n--\n\n"
"The Base64 HMAC-SHA1 signature of a request with these extFields and body, ``keyed``\n"
"being what keyed(secret) gave; None when signing.request_signature must work it out.");

static PyObject *signature(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "signature(ext_fields, body, skip_unique_key, keyed)");
        return NULL;
    }
    char made[SIGNATURE_LENGTH];
    int outcome = request_signature(args[0], args[1], args[2], args[3], made);
    if (outcome < 0) return NULL;
    if (outcome == 0) Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize(made, SIGNATURE_LENGTH);
}

PyDoc_STRVAR(matches_doc,
"matches(ext_fields, body, skip_unique_key, keyed, received, /)\n--\n\n"
"Whether ``received`` (a str) is the request's signature, compared in constant time;\n"
"None when signing.signature_matches must work it out.");

static PyObject *matches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "matches(ext_fields, body, skip_unique_key, keyed, received)");
        return NULL;
    }
    char made[SIGNATURE_LENGTH];
    int outcome = request_signature(args[0], args[1], args[2], args[3], made);
    if (outcome < 0) return NULL;
    if (outcome == 0) Py_RETURN_NONE;
    PyObject *received = args[4];
    if (!PyUnicode_CheckExact(received)) Py_RETURN_NONE; /* a str subclass: Python's */
    if (!PyUnicode_IS_ASCII(received) || PyUnicode_GET_LENGTH(received) != SIGNATURE_LENGTH)
        Py_RETURN_FALSE; /* no signature of ours looks like it: nothing to time */
    /* in constant time: every character compared, equal or not */
    int differ = CRYPTO_memcmp(PyUnicode_1BYTE_DATA(received), made, SIGNATURE_LENGTH);
    return PyBool_FromLong(differ == 0);
}

#pragma GCC diagnostic pop

static PyMethodDef methods[] = {
    {"keyed", (PyCFunction)keyed, METH_O, keyed_doc},
    {"signature", (PyCFunction)(void (*)(void))signature, METH_FASTCALL, signature_doc},
    {"matches", (PyCFunction)(void (*)(void))matches, METH_FASTCALL, matches_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_signature", "A request's ACL signature, compiled.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__signature(void) {
    signature_key = PyUnicode_InternFromString("Signature");
    unique_key = PyUnicode_InternFromString("_UNIQUE_KEY_QUERY");
    if (!signature_key || !unique_key) return NULL;
    return PyModule_Create(&module_definition);
}
