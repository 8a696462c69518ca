/* The send fast path's per-message computation, compiled (send_fast.py calls it).
 *
 * ``read_send`` reads a send's header fields from its extFields and ``answer_frame``
 * builds its SUCCESS answer frame. Each takes only the canonical form of its input
 * (plain ASCII decimal numbers, "false", "0" or no batch field, a plain UNIQ_KEY) and
 * answers None for anything else: send_fast.py's Python code, the reference these
 * functions are tested against byte for byte (tests/broker/test_send_fast_path.py),
 * then decides. Neither ever refuses a send: refusals are the Python paths' alone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FIELD_COUNT 12
enum {
    GROUP, TOPIC, DEFAULT_TOPIC, DEFAULT_QUEUES, QUEUE_ID, SYS_FLAG, BORN_TIMESTAMP, FLAG,
    PROPERTIES, RECONSUME_TIMES, MAX_RECONSUME_TIMES, BATCH
};

/* a plain decimal ASCII str ("-" and 1..18 digits) within [low, high]; 0 when not */
static int read_number(PyObject *text, int64_t low, int64_t high, int64_t *out) {
    if (text == NULL || !PyUnicode_CheckExact(text) || !PyUnicode_IS_ASCII(text)) return 0;
    const char *p = (const char *)PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int negative = n > 0 && p[0] == '-';
    if (negative) {
        p++;
        n--;
    }
    if (n < 1 || n > 18) return 0;
    int64_t value = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        value = value * 10 + (p[i] - '0');
    }
    if (negative) value = -value;
    if (value < low || value > high) return 0;
    *out = value;
    return 1;
}

/* the value of property ``name`` (with its \x01) in encoded properties, as
 * protocol.message.property_value finds it; NULL when absent */
static const char *property_value(const char *at, Py_ssize_t length, const char *name,
                                  Py_ssize_t name_length, Py_ssize_t *value_length) {
    const char *end = at + length, *p = at;
    while (p + name_length <= end) {
        const char *found = memchr(p, name[0], (size_t)(end - p));
        if (found == NULL || found + name_length > end) return NULL;
        if (memcmp(found, name, (size_t)name_length) == 0 && (found == at || found[-1] == 2)) {
            const char *value = found + name_length;
            const char *stop = memchr(value, 2, (size_t)(end - value));
            *value_length = (stop ? stop : end) - value;
            return value;
        }
        p = found + 1;
    }
    return NULL;
}

/* whether ``needle`` occurs anywhere in ``text`` (Python's ``in``) */
static int contains(const char *text, Py_ssize_t length, const char *needle, Py_ssize_t size) {
    const char *end = text + length;
    for (const char *p = text; end - p >= size; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (p == NULL || end - p < size) return 0;
        if (memcmp(p, needle, (size_t)size) == 0) return 1;
    }
    return 0;
}

PyDoc_STRVAR(read_send_doc,
"read_send(ext_fields, names, cluster, /)\n--\n\n"
"(topic, queue_id, sys_flag, born_timestamp, flag, reconsume_times, properties, uniq)\n"
"of a send whose fields named by ``names`` (send_fast's twelve wire names) are all in\n"
"their canonical form, ``properties`` encoded with CLUSTER=``cluster`` added as\n"
"send._with_cluster adds it and ``uniq`` its UNIQ_KEY (bytes or None); None when the\n"
"Python fast path must read them.");

static PyObject *read_send(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != FIELD_COUNT ||
        !PyUnicode_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "read_send(ext_fields, names: tuple, cluster: str)");
        return NULL;
    }
    if (!PyDict_CheckExact(args[0])) Py_RETURN_NONE; /* another mapping: the Python code's */
    PyObject *field[FIELD_COUNT];
    for (int i = 0; i < FIELD_COUNT; i++) /* borrowed; NULL when absent */
        field[i] = PyDict_GetItemWithError(args[0], PyTuple_GET_ITEM(args[1], i));
    if (PyErr_Occurred()) return NULL;
    if (field[GROUP] == NULL || !PyUnicode_CheckExact(field[GROUP]) || field[TOPIC] == NULL ||
        !PyUnicode_CheckExact(field[TOPIC]) || field[DEFAULT_TOPIC] == NULL ||
        !PyUnicode_CheckExact(field[DEFAULT_TOPIC]))
        Py_RETURN_NONE;
    /* "false" from Java clients, "0" from the C++ client (its bool as a number) */
    if (field[BATCH] != NULL &&
        !(PyUnicode_CheckExact(field[BATCH]) &&
          (PyUnicode_CompareWithASCIIString(field[BATCH], "false") == 0 ||
           PyUnicode_CompareWithASCIIString(field[BATCH], "0") == 0)))
        Py_RETURN_NONE;
    int64_t queue_id, sys_flag, born_timestamp, flag, ignored, reconsume_times = 0;
    const int64_t low32 = INT32_MIN, high32 = INT32_MAX;
    if (!read_number(field[QUEUE_ID], low32, high32, &queue_id) ||
        !read_number(field[SYS_FLAG], low32, high32, &sys_flag) ||
        !read_number(field[BORN_TIMESTAMP], INT64_MIN, INT64_MAX, &born_timestamp) ||
        !read_number(field[FLAG], low32, high32, &flag) ||
        !read_number(field[DEFAULT_QUEUES], low32, high32, &ignored) ||
        (field[RECONSUME_TIMES] != NULL &&
         !read_number(field[RECONSUME_TIMES], low32, high32, &reconsume_times)) ||
        (field[MAX_RECONSUME_TIMES] != NULL &&
         !read_number(field[MAX_RECONSUME_TIMES], low32, high32, &ignored)))
        Py_RETURN_NONE;
    const char *text = "";
    Py_ssize_t length = 0;
    if (field[PROPERTIES] != NULL && field[PROPERTIES] != Py_None) {
        if (!PyUnicode_CheckExact(field[PROPERTIES])) Py_RETURN_NONE;
        text = PyUnicode_AsUTF8AndSize(field[PROPERTIES], &length);
        if (text == NULL) { /* lone surrogates: the Python path raises as it should */
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    Py_ssize_t cluster_length;
    const char *cluster = PyUnicode_AsUTF8AndSize(args[2], &cluster_length);
    if (cluster == NULL) return NULL;
    PyObject *properties;
    if (contains(text, length, "CLUSTER\x01", 8)) {
        properties = PyBytes_FromStringAndSize(text, length); /* already names a cluster */
    } else {
        int separate = length > 0 && text[length - 1] != 2;
        Py_ssize_t size = length + separate + 8 + cluster_length + 1;
        properties = PyBytes_FromStringAndSize(NULL, size);
        if (properties != NULL) {
            char *out = PyBytes_AS_STRING(properties);
            memcpy(out, text, (size_t)length);
            out += length;
            if (separate) *out++ = 2;
            memcpy(out, "CLUSTER\x01", 8);
            memcpy(out + 8, cluster, (size_t)cluster_length);
            out[8 + cluster_length] = 2;
        }
    }
    if (properties == NULL) return NULL;
    Py_ssize_t uniq_length;
    const char *uniq_at = property_value(PyBytes_AS_STRING(properties),
                                         PyBytes_GET_SIZE(properties), "UNIQ_KEY\x01", 9,
                                         &uniq_length);
    PyObject *uniq = uniq_at ? PyBytes_FromStringAndSize(uniq_at, uniq_length) : Py_NewRef(Py_None);
    if (uniq == NULL) {
        Py_DECREF(properties);
        return NULL;
    }
    return Py_BuildValue("(OLLLLLNN)", field[TOPIC], (long long)queue_id, (long long)sys_flag,
                         (long long)born_timestamp, (long long)flag, (long long)reconsume_times,
                         properties, uniq);
}

static int plain_text(const char *p, Py_ssize_t n) { /* bytes.isalnum() and isascii() */
    if (n == 0) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
            return 0;
    }
    return 1;
}

static char *put_decimal(char *out, long long value) {
    return out + sprintf(out, "%lld", value);
}

static void put_be32(char *p, uint32_t v) {
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

PyDoc_STRVAR(answer_frame_doc,
"answer_frame(parts, tail, store_host, commit_log_offset, queue_id, queue_offset, uniq,\n"
"             opaque, /)\n--\n\n"
"A send's SUCCESS answer frame: ``parts`` (4 bytes pieces, 5 with ``uniq``) and ``tail``\n"
"around the message id, queue id, queue offset, [uniq,] opaque, as send_fast's\n"
"_AnswerFrame builds it; None when ``uniq`` is not plain text.");

static PyObject *answer_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    long long commit_log_offset, queue_id, queue_offset, opaque;
    if (nargs != 8 || !PyTuple_CheckExact(args[0]) || !PyBytes_CheckExact(args[1]) ||
        !PyBytes_CheckExact(args[2]) || (args[6] != Py_None && !PyBytes_CheckExact(args[6]))) {
        PyErr_SetString(PyExc_TypeError, "answer_frame: bad arguments");
        return NULL;
    }
    commit_log_offset = PyLong_AsLongLong(args[3]);
    queue_id = PyLong_AsLongLong(args[4]);
    queue_offset = PyLong_AsLongLong(args[5]);
    opaque = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred()) return NULL;
    PyObject *parts = args[0];
    int with_uniq = args[6] != Py_None;
    Py_ssize_t part_count = PyTuple_GET_SIZE(parts);
    if (part_count != (with_uniq ? 5 : 4)) {
        PyErr_SetString(PyExc_ValueError, "answer_frame: 4 parts, or 5 with uniq");
        return NULL;
    }
    const char *uniq = with_uniq ? PyBytes_AS_STRING(args[6]) : NULL;
    Py_ssize_t uniq_length = with_uniq ? PyBytes_GET_SIZE(args[6]) : 0;
    if (with_uniq && !plain_text(uniq, uniq_length)) Py_RETURN_NONE;
    Py_ssize_t host_length = PyBytes_GET_SIZE(args[2]);
    Py_ssize_t size = 8 + (host_length + 8) * 2 + 4 * 21 + uniq_length + PyBytes_GET_SIZE(args[1]);
    for (Py_ssize_t i = 0; i < part_count; i++) {
        PyObject *part = PyTuple_GET_ITEM(parts, i);
        if (!PyBytes_CheckExact(part)) {
            PyErr_SetString(PyExc_TypeError, "answer_frame: parts are bytes");
            return NULL;
        }
        size += PyBytes_GET_SIZE(part);
    }
    char *buffer = PyMem_Malloc((size_t)size);
    if (buffer == NULL) return PyErr_NoMemory();
    static const char hex[] = "0123456789ABCDEF";
    char *out = buffer + 8;
#define PART(i)                                                                    \
    do {                                                                           \
        PyObject *piece = PyTuple_GET_ITEM(parts, i);                              \
        memcpy(out, PyBytes_AS_STRING(piece), (size_t)PyBytes_GET_SIZE(piece));    \
        out += PyBytes_GET_SIZE(piece);                                            \
    } while (0)
    PART(0);
    const unsigned char *host = (const unsigned char *)PyBytes_AS_STRING(args[2]);
    for (Py_ssize_t i = 0; i < host_length; i++) {
        *out++ = hex[host[i] >> 4];
        *out++ = hex[host[i] & 15];
    }
    for (int shift = 56; shift >= 0; shift -= 8) {
        unsigned byte = (unsigned)((unsigned long long)commit_log_offset >> shift) & 0xff;
        *out++ = hex[byte >> 4];
        *out++ = hex[byte & 15];
    }
    PART(1);
    out = put_decimal(out, queue_id);
    PART(2);
    out = put_decimal(out, queue_offset);
    PART(3);
    if (with_uniq) {
        memcpy(out, uniq, (size_t)uniq_length);
        out += uniq_length;
        PART(4);
    }
    out = put_decimal(out, opaque);
    memcpy(out, PyBytes_AS_STRING(args[1]), (size_t)PyBytes_GET_SIZE(args[1]));
    out += PyBytes_GET_SIZE(args[1]);
#undef PART
    Py_ssize_t header_length = out - buffer - 8;
    put_be32(buffer, (uint32_t)(header_length + 4));
    put_be32(buffer + 4, (uint32_t)header_length);
    PyObject *frame = PyBytes_FromStringAndSize(buffer, out - buffer);
    PyMem_Free(buffer);
    return frame;
}

static PyMethodDef methods[] = {
    {"read_send", (PyCFunction)(void (*)(void))read_send, METH_FASTCALL, read_send_doc},
    {"answer_frame", (PyCFunction)(void (*)(void))answer_frame, METH_FASTCALL,
     answer_frame_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_send_fast", "The send fast path's per-message work, compiled.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__send_fast(void) { return PyModule_Create(&module_definition); }
