/* A request's signature, compiled (signing.py calls it; docs/spec/ACL.md section 1).
 *
 * ``signature`` gives what signing.request_signature gives: HMAC-SHA1 over the extFields'
 * values in key order (the signature's own field left out, and the unique-key query
 * field for old clients) followed by the body, in Base64. The HMAC itself is Python's
 * (OpenSSL's through _hashlib): this module only saves the Python work around it, the
 * sort, the join and the encoding. Anything unusual (a value that is not a str, text
 * UTF-8 cannot carry) answers None and the Python code decides, as it is the reference
 * this is tested against (tests/acl/test_signature_compiled.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *name_copy, *name_update, *name_digest, *signature_key, *unique_key;

/* Base64 of a 20-byte digest: 28 characters, one '=' of padding */
static PyObject *base64_of_digest(const unsigned char *digest) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char out[28];
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
    out[o++] = '=';
    return PyUnicode_FromStringAndSize(out, o);
}

#define MOST_FIELDS 64 /* more extFields than a request has: the Python code's */

/* the signed values, joined and UTF-8 encoded; NULL with no error set: Python decides */
static PyObject *signed_values(PyObject *fields, int skip_unique_key) {
    PyObject *keys[MOST_FIELDS], *values[MOST_FIELDS]; /* borrowed, sorted by key */
    Py_ssize_t count = 0, position = 0;
    PyObject *key, *value;
    while (PyDict_Next(fields, &position, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value)) return NULL;
        if (PyUnicode_Compare(key, signature_key) == 0) continue;
        if (skip_unique_key && PyUnicode_Compare(key, unique_key) == 0) continue;
        if (count == MOST_FIELDS) return NULL;
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
    Py_ssize_t lengths[MOST_FIELDS], total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        texts[i] = PyUnicode_AsUTF8AndSize(values[i], &lengths[i]);
        if (texts[i] == NULL) { /* text UTF-8 cannot carry: the Python code raises */
            PyErr_Clear();
            return NULL;
        }
        total += lengths[i];
    }
    PyObject *joined = PyBytes_FromStringAndSize(NULL, total);
    if (joined == NULL) return NULL;
    char *out = PyBytes_AS_STRING(joined);
    for (Py_ssize_t i = 0; i < count; i++) {
        memcpy(out, texts[i], (size_t)lengths[i]);
        out += lengths[i];
    }
    return joined;
}

PyDoc_STRVAR(signature_doc,
"signature(ext_fields, body, skip_unique_key, keyed, /)\n--\n\n"
"The Base64 HMAC-SHA1 signature of a request with these extFields and body, ``keyed``\n"
"being a _hashlib HMAC-SHA1 object holding the secret and nothing hashed yet (it is\n"
"copied, never changed); None when signing.request_signature must work it out.");

static PyObject *signature(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "signature(ext_fields, body, skip_unique_key, keyed)");
        return NULL;
    }
    /* another mapping, a body held in another kind of buffer: the Python code's */
    if (!PyDict_CheckExact(args[0]) || (args[1] != Py_None && !PyBytes_CheckExact(args[1])))
        Py_RETURN_NONE;
    int skip_unique_key = PyObject_IsTrue(args[2]);
    if (skip_unique_key < 0) return NULL;
    PyObject *values = signed_values(args[0], skip_unique_key);
    if (values == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *hashed = PyObject_CallMethodNoArgs(args[3], name_copy);
    PyObject *result = NULL;
    if (hashed == NULL) goto done;
    PyObject *step = PyObject_CallMethodOneArg(hashed, name_update, values);
    if (step == NULL) goto done;
    Py_DECREF(step);
    if (args[1] != Py_None && PyBytes_GET_SIZE(args[1]) > 0) {
        step = PyObject_CallMethodOneArg(hashed, name_update, args[1]);
        if (step == NULL) goto done;
        Py_DECREF(step);
    }
    PyObject *digest = PyObject_CallMethodNoArgs(hashed, name_digest);
    if (digest == NULL) goto done;
    if (PyBytes_CheckExact(digest) && PyBytes_GET_SIZE(digest) == 20)
        result = base64_of_digest((const unsigned char *)PyBytes_AS_STRING(digest));
    else
        PyErr_SetString(PyExc_ValueError, "signature: keyed is not an HMAC-SHA1");
    Py_DECREF(digest);
done:
    Py_XDECREF(hashed);
    Py_DECREF(values);
    return result;
}

static PyMethodDef methods[] = {
    {"signature", (PyCFunction)(void (*)(void))signature, METH_FASTCALL, signature_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_signature", "A request's ACL signature, compiled.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__signature(void) {
    name_copy = PyUnicode_InternFromString("copy");
    name_update = PyUnicode_InternFromString("update");
    name_digest = PyUnicode_InternFromString("digest");
    signature_key = PyUnicode_InternFromString("Signature");
    unique_key = PyUnicode_InternFromString("_UNIQUE_KEY_QUERY");
    if (!name_copy || !name_update || !name_digest || !signature_key || !unique_key) return NULL;
    return PyModule_Create(&module_definition);
}
