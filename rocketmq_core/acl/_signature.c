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
 * (tests/acl/test_signing.py). The module's ``API`` capsule offers the check to other
 * compiled modules (_signature_api.h).
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

#include "_signature_api.h"

static PyObject *signature_key, *unique_key, *access_key_name;
/* the RemotingCommand attributes before_request reads */
static PyObject *code_name, *ext_fields_name, *version_name, *body_name;

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

static int signature_equal(PyObject *received, const char *made);

#define MOST_FIELDS 64 /* more extFields than a request has: the Python code's */
#define GATHERED_VALUES 1024 /* the values of a usual header fit: copied, hashed at once */

/* a and b (exact strs) hold the same text */
static int same_text(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (PyUnicode_IS_COMPACT_ASCII(a) && PyUnicode_IS_COMPACT_ASCII(b))
        return PyUnicode_GET_LENGTH(a) == PyUnicode_GET_LENGTH(b) &&
               memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)PyUnicode_GET_LENGTH(a)) == 0;
    return PyUnicode_Compare(a, b) == 0;
}

/* <0, 0, >0 as str a sorts before, with or after str b (code point order) */
static int text_order(PyObject *a, PyObject *b) {
    if (PyUnicode_KIND(a) == PyUnicode_1BYTE_KIND && PyUnicode_KIND(b) == PyUnicode_1BYTE_KIND) {
        Py_ssize_t a_length = PyUnicode_GET_LENGTH(a), b_length = PyUnicode_GET_LENGTH(b);
        const unsigned char *a_text = PyUnicode_DATA(a), *b_text = PyUnicode_DATA(b);
        if (a_length > 0 && b_length > 0 && a_text[0] != b_text[0])
            return a_text[0] < b_text[0] ? -1 : 1; /* most keys differ at once */
        int order = memcmp(a_text, b_text, (size_t)(a_length < b_length ? a_length : b_length));
        if (order != 0) return order;
        return a_length < b_length ? -1 : a_length > b_length;
    }
    return PyUnicode_Compare(a, b);
}

/* A request's extFields as the signature takes them: borrowed, sorted by key (str order,
 * as sorted()), without the signature's own field (and the unique-key query field for old
 * clients) */
typedef struct {
    PyObject *keys[MOST_FIELDS], *values[MOST_FIELDS];
    Py_ssize_t count;
} SortedFields;

/* Collect ``fields`` (an exact dict) into ``sorted``: 1 when done, 0 when the Python code
 * must decide (a key or value that is not an exact str, more fields than MOST_FIELDS).
 * Every key and value is checked, those left out too, so that a caller may then look keys
 * up knowing no Python code runs. */
static int sorted_fields(PyObject *fields, int skip_unique_key, SortedFields *sorted) {
    Py_ssize_t count = 0, position = 0;
    PyObject *key, *value;
    while (PyDict_Next(fields, &position, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value)) return 0;
        if (same_text(key, signature_key)) continue;
        if (skip_unique_key && same_text(key, unique_key)) continue;
        if (count == MOST_FIELDS) return 0;
        /* insertion sort: a request has a dozen fields or so */
        Py_ssize_t at = count++;
        while (at > 0 && text_order(sorted->keys[at - 1], key) > 0) {
            sorted->keys[at] = sorted->keys[at - 1];
            sorted->values[at] = sorted->values[at - 1];
            at--;
        }
        sorted->keys[at] = key;
        sorted->values[at] = value;
    }
    sorted->count = count;
    return 1;
}

/* the key states a keyed() capsule holds; NULL with an exception set when it is not one */
static const KeyedSha1 *key_states_of(PyObject *keyed_state) {
    if (PyCapsule_IsValid(keyed_state, KEY_CAPSULE))
        return PyCapsule_GetPointer(keyed_state, KEY_CAPSULE);
    PyErr_SetString(PyExc_TypeError, "keyed must be what keyed(secret) gives");
    return NULL;
}

/* The Base64 HMAC-SHA1 of ``count`` texts one after another, then the body, into ``out`` */
static void sign_texts(const KeyedSha1 *key_states, const char *const *texts,
                       const Py_ssize_t *lengths, Py_ssize_t count, const char *body,
                       Py_ssize_t body_length, char *out) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) total += lengths[i];
    SHA_CTX hashing = key_states->inner;
    if (total <= GATHERED_VALUES) { /* the usual header: its values hashed in one call */
        char gathered[GATHERED_VALUES];
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            memcpy(gathered + at, texts[i], (size_t)lengths[i]);
            at += lengths[i];
        }
        SHA1_Update(&hashing, gathered, (size_t)total);
    } else {
        for (Py_ssize_t i = 0; i < count; i++)
            SHA1_Update(&hashing, texts[i], (size_t)lengths[i]);
    }
    if (body_length > 0) SHA1_Update(&hashing, body, (size_t)body_length);
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1_Final(digest, &hashing);
    hashing = key_states->outer;
    SHA1_Update(&hashing, digest, sizeof digest);
    SHA1_Final(digest, &hashing);
    base64_of_digest(digest, out);
    OPENSSL_cleanse(&hashing, sizeof hashing);
}

/* The Base64 signature of ``sorted`` and ``body`` into ``out``: 1 when made, 0 when the
 * Python code must decide (nothing raised), -1 with an exception set. */
static int signature_of(const SortedFields *sorted, PyObject *body, PyObject *keyed_state,
                        char *out) {
    /* a body held in another kind of buffer: the Python code's */
    if (body != Py_None && !PyBytes_CheckExact(body)) return 0;
    const KeyedSha1 *key_states = key_states_of(keyed_state);
    if (key_states == NULL) return -1;
    Py_ssize_t count = sorted->count, lengths[MOST_FIELDS];
    const char *texts[MOST_FIELDS];
    for (Py_ssize_t i = 0; i < count; i++) { /* all encodable before anything is hashed */
        PyObject *value = sorted->values[i];
        if (PyUnicode_IS_COMPACT_ASCII(value)) { /* the usual value: its bytes are its UTF-8 */
            texts[i] = (const char *)PyUnicode_DATA(value);
            lengths[i] = PyUnicode_GET_LENGTH(value);
        } else if ((texts[i] = PyUnicode_AsUTF8AndSize(value, &lengths[i])) == NULL) {
            PyErr_Clear(); /* text UTF-8 cannot carry: the Python code raises */
            return 0;
        }
    }
    if (body == Py_None)
        sign_texts(key_states, texts, lengths, count, NULL, 0, out);
    else
        sign_texts(key_states, texts, lengths, count, PyBytes_AS_STRING(body),
                   PyBytes_GET_SIZE(body), out);
    return 1;
}

/* The Base64 signature of a request into ``out``, as signature_of answers. */
static int request_signature(PyObject *fields, PyObject *body, int skip_unique_key,
                             PyObject *keyed_state, char *out) {
    if (!PyDict_CheckExact(fields)) return 0; /* another mapping: the Python code's */
    SortedFields sorted;
    if (!sorted_fields(fields, skip_unique_key, &sorted)) return 0;
    return signature_of(&sorted, body, keyed_state, out);
}

PyDoc_STRVAR(signature_doc,
"signature(ext_fields, body, skip_unique_key, keyed, /)\n--\n\n"
"The Base64 HMAC-SHA1 signature of a request with these extFields and body, ``keyed``\n"
"being what keyed(secret) gave; None when signing.request_signature must work it out.");

/* The signature of (ext_fields, body, skip_unique_key, keyed) as the entry points take
 * them, into ``made``: as request_signature answers. */
static int signature_of_arguments(PyObject *const *args, char *made) {
    int skip_unique_key = PyObject_IsTrue(args[2]);
    if (skip_unique_key < 0) return -1;
    return request_signature(args[0], args[1], skip_unique_key, args[3], made);
}

static PyObject *signature(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "signature(ext_fields, body, skip_unique_key, keyed)");
        return NULL;
    }
    char made[SIGNATURE_LENGTH];
    int outcome = signature_of_arguments(args, made);
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
    int outcome = signature_of_arguments(args, made);
    if (outcome < 0) return NULL;
    if (outcome == 0) Py_RETURN_NONE;
    PyObject *received = args[4];
    if (!PyUnicode_CheckExact(received)) Py_RETURN_NONE; /* a str subclass: Python's */
    return PyBool_FromLong(signature_equal(received, made));
}

/* ``received`` is the signature ``made``, compared in constant time: every character,
 * equal or not */
static int text_is_signature(const char *received, Py_ssize_t length, const char *made) {
    if (length != SIGNATURE_LENGTH) return 0; /* no signature of ours looks like it */
    return CRYPTO_memcmp(received, made, SIGNATURE_LENGTH) == 0;
}

/* ``received`` (an exact str) is the signature ``made`` (text_is_signature) */
static int signature_equal(PyObject *received, const char *made) {
    if (!PyUnicode_IS_ASCII(received)) return 0;
    return text_is_signature((const char *)PyUnicode_1BYTE_DATA(received),
                             PyUnicode_GET_LENGTH(received), made);
}

/* SignatureApi.signed_with (_signature_api.h) */
static int signed_with(PyObject *keyed_state, const char *const *texts, const Py_ssize_t *lengths,
                       Py_ssize_t count, const char *body, Py_ssize_t body_length,
                       const char *received, Py_ssize_t received_length) {
    const KeyedSha1 *key_states = key_states_of(keyed_state);
    if (key_states == NULL) return -1;
    char made[SIGNATURE_LENGTH];
    sign_texts(key_states, texts, lengths, count, body, body_length, made);
    return text_is_signature(received, received_length, made);
}

static SignatureApi api = {signed_with};

/* an int, or an int subclass (an IntEnum member) that hashes and compares as one */
static int int_hashed_as_int(PyObject *value) {
    if (PyLong_CheckExact(value)) return 1;
    PyTypeObject *type = Py_TYPE(value);
    return PyLong_Check(value) && type->tp_hash == PyLong_Type.tp_hash &&
           type->tp_richcompare == PyLong_Type.tp_richcompare;
}

/* Whether ``request`` is certainly allowed: 1 yes, 0 the Python check decides, -1 an
 * exception is set. Certainly allowed: its accessKey is in ``signing_keys`` (accessKey ->
 * keyed(secret), the accounts without a white list of their own), its signature is right,
 * its code is in ``deciding_fields`` (code -> the two extField names whose values decide
 * its resources) and ``verdicts`` holds None (allowed) for (accessKey, code, value, value). */
static int known(PyObject *signing_keys, PyObject *deciding_fields, PyObject *verdicts,
                 PyObject *request) {
    PyObject *code = NULL, *fields = NULL, *version = NULL, *body = NULL, *key = NULL;
    PyObject *names, *access_key, *keyed_state, *received, *first, *second;
    SortedFields sorted;
    long version_number;
    int overflow, outcome, answer = 0;
    char made[SIGNATURE_LENGTH];
    /* the request's attributes first (a property could run Python code); then only exact
     * strs, dicts and ints that hash and compare as ints: no Python code runs while the
     * references below are borrowed */
    if ((code = PyObject_GetAttr(request, code_name)) == NULL ||
        (fields = PyObject_GetAttr(request, ext_fields_name)) == NULL ||
        (version = PyObject_GetAttr(request, version_name)) == NULL ||
        (body = PyObject_GetAttr(request, body_name)) == NULL)
        goto failed;
    if (!int_hashed_as_int(code) || !PyDict_CheckExact(fields) || !PyLong_CheckExact(version))
        goto done;
    version_number = PyLong_AsLongAndOverflow(version, &overflow);
    if (overflow != 0 || (version_number == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        goto done;
    }
    names = PyDict_GetItemWithError(deciding_fields, code); /* not a busy code: Python's */
    if (names == NULL) goto checked_lookup;
    if (!PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != 2 ||
        !PyUnicode_CheckExact(PyTuple_GET_ITEM(names, 0)) ||
        !PyUnicode_CheckExact(PyTuple_GET_ITEM(names, 1)))
        goto done;
    /* every key and value an exact str, or the Python check's */
    if (!sorted_fields(fields, version_number <= LAST_VERSION_WITHOUT_SIGNED_UNIQUE_KEY,
                       &sorted))
        goto done;
    access_key = PyDict_GetItemWithError(fields, access_key_name);
    if (access_key == NULL) goto checked_lookup;
    keyed_state = PyDict_GetItemWithError(signing_keys, access_key);
    if (keyed_state == NULL) goto checked_lookup;
    received = PyDict_GetItemWithError(fields, signature_key);
    if (received == NULL) goto checked_lookup;
    outcome = signature_of(&sorted, body, keyed_state, made);
    if (outcome < 0) goto failed;
    if (outcome == 0 || !signature_equal(received, made)) goto done;
    first = PyDict_GetItemWithError(fields, PyTuple_GET_ITEM(names, 0));
    if (first == NULL && PyErr_Occurred()) goto failed;
    second = PyDict_GetItemWithError(fields, PyTuple_GET_ITEM(names, 1));
    if (second == NULL && PyErr_Occurred()) goto failed;
    key = PyTuple_Pack(4, access_key, code, first != NULL ? first : Py_None,
                       second != NULL ? second : Py_None);
    if (key == NULL) goto failed;
    /* kept as allowed (the verdict is only compared, never used, once looked up) */
    answer = PyDict_GetItemWithError(verdicts, key) == Py_None;
checked_lookup:
    if (PyErr_Occurred()) goto failed;
done:
    Py_XDECREF(code);
    Py_XDECREF(fields);
    Py_XDECREF(version);
    Py_XDECREF(body);
    Py_XDECREF(key);
    return answer;
failed:
    Py_XDECREF(code);
    Py_XDECREF(fields);
    Py_XDECREF(version);
    Py_XDECREF(body);
    Py_XDECREF(key);
    return -1;
}

PyDoc_STRVAR(before_request_doc,
"before_request(signing_keys, deciding_fields, verdicts, check, context, request, /)\n--\n\n"
"An RPC hook's before_request: None (serve it) when ``request`` is certainly allowed\n"
"(signed right by an account of ``signing_keys``, accessKey -> keyed(secret), with a\n"
"verdict kept as allowed in ``verdicts`` for the values of its ``deciding_fields``), else\n"
"what ``check(context, request)`` answers.");

static PyObject *before_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1]) ||
        !PyDict_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "before_request(signing_keys: dict, deciding_fields: dict,"
                        " verdicts: dict, check, context, request)");
        return NULL;
    }
    int answer = known(args[0], args[1], args[2], args[5]);
    if (answer < 0) return NULL;
    if (answer) Py_RETURN_NONE;
    return PyObject_Vectorcall(args[3], args + 4, 2, NULL);
}

#pragma GCC diagnostic pop

static PyMethodDef methods[] = {
    {"keyed", (PyCFunction)keyed, METH_O, keyed_doc},
    {"signature", (PyCFunction)(void (*)(void))signature, METH_FASTCALL, signature_doc},
    {"matches", (PyCFunction)(void (*)(void))matches, METH_FASTCALL, matches_doc},
    {"before_request", (PyCFunction)(void (*)(void))before_request, METH_FASTCALL,
     before_request_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_signature", "A request's ACL signature, compiled.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__signature(void) {
    signature_key = PyUnicode_InternFromString("Signature");
    unique_key = PyUnicode_InternFromString("_UNIQUE_KEY_QUERY");
    access_key_name = PyUnicode_InternFromString("AccessKey");
    code_name = PyUnicode_InternFromString("code");
    ext_fields_name = PyUnicode_InternFromString("ext_fields");
    version_name = PyUnicode_InternFromString("version");
    body_name = PyUnicode_InternFromString("body");
    if (!signature_key || !unique_key || !access_key_name || !code_name || !ext_fields_name ||
        !version_name || !body_name)
        return NULL;
    PyObject *module = PyModule_Create(&module_definition);
    if (module == NULL) return NULL;
    PyObject *capsule = PyCapsule_New(&api, SIGNATURE_API_CAPSULE, NULL);
    if (capsule == NULL || PyModule_AddObject(module, "API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
