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
#include <strings.h>

#include "../../acl/_signature_api.h"

#define FIELD_COUNT 12
enum {
    GROUP, TOPIC, DEFAULT_TOPIC, DEFAULT_QUEUES, QUEUE_ID, SYS_FLAG, BORN_TIMESTAMP, FLAG,
    PROPERTIES, RECONSUME_TIMES, MAX_RECONSUME_TIMES, BATCH
};

/* A run of text read in place: a header field's value. ``text`` NULL: the field is absent. */
typedef struct {
    const char *text;
    Py_ssize_t length;
} View;

/* plain decimal ASCII ("-" and 1..18 digits) within [low, high]; 0 when not */
static int read_digits(View view, int64_t low, int64_t high, int64_t *out) {
    const char *p = view.text;
    Py_ssize_t n = view.length;
    if (p == NULL) return 0;
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

static int view_is(View view, const char *text) {
    Py_ssize_t length = (Py_ssize_t)strlen(text);
    return view.text != NULL && view.length == length && memcmp(view.text, text, (size_t)length) == 0;
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

/* store.rules.waits_for_store: no WAIT property, or WAIT "true" in any case */
static int waits_for_store(const char *properties, Py_ssize_t length) {
    Py_ssize_t wait_length = 0;
    const char *wait = property_value(properties, length, "WAIT\x01", 5, &wait_length);
    return wait == NULL || (wait_length == 4 && strncasecmp(wait, "true", 4) == 0);
}

/* whether ``needle`` occurs anywhere in ``text`` (Python's ``in``) */
static int contains(const char *text, Py_ssize_t length, const char *needle, Py_ssize_t size) {
    if (size == 0) return 1;
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

typedef struct {
    int64_t queue_id, sys_flag, born_timestamp, flag, reconsume_times;
} SendNumbers;

enum { NOT_CANONICAL, SINGLE, BATCH_OF };

/* the numbers of a send whose fields (by the enum above) are in their canonical form, and
 * what it holds: SINGLE, a message, or BATCH_OF messages (its batch field, whatever the
 * request code); NOT_CANONICAL when a field is missing or not canonical */
static int read_send_fields(const View *field, SendNumbers *out) {
    if (field[GROUP].text == NULL || field[TOPIC].text == NULL || field[DEFAULT_TOPIC].text == NULL)
        return NOT_CANONICAL;
    /* "false" or "true" from Java clients, "0" or "1" from the C++ client (its bool) */
    int kind = field[BATCH].text == NULL || view_is(field[BATCH], "false") ||
                       view_is(field[BATCH], "0")
                   ? SINGLE
               : view_is(field[BATCH], "true") || view_is(field[BATCH], "1") ? BATCH_OF
                                                                             : NOT_CANONICAL;
    if (kind == NOT_CANONICAL) return NOT_CANONICAL;
    int64_t ignored;
    const int64_t low32 = INT32_MIN, high32 = INT32_MAX;
    out->reconsume_times = 0;
    int read = read_digits(field[QUEUE_ID], low32, high32, &out->queue_id) &&
               read_digits(field[SYS_FLAG], low32, high32, &out->sys_flag) &&
               read_digits(field[BORN_TIMESTAMP], INT64_MIN, INT64_MAX, &out->born_timestamp) &&
               read_digits(field[FLAG], low32, high32, &out->flag) &&
               read_digits(field[DEFAULT_QUEUES], low32, high32, &ignored) &&
               (field[RECONSUME_TIMES].text == NULL ||
                read_digits(field[RECONSUME_TIMES], low32, high32, &out->reconsume_times)) &&
               (field[MAX_RECONSUME_TIMES].text == NULL ||
                read_digits(field[MAX_RECONSUME_TIMES], low32, high32, &ignored));
    return read ? kind : NOT_CANONICAL;
}

/* the encoded properties with CLUSTER=``cluster`` added as send._with_cluster adds it */
static PyObject *with_cluster(View properties, View cluster) {
    const char *text = properties.text ? properties.text : "";
    Py_ssize_t length = properties.text ? properties.length : 0;
    if (contains(text, length, "CLUSTER\x01", 8))
        return PyBytes_FromStringAndSize(text, length); /* already names a cluster */
    int separate = length > 0 && text[length - 1] != 2;
    PyObject *encoded = PyBytes_FromStringAndSize(NULL, length + separate + 8 + cluster.length + 1);
    if (encoded == NULL) return NULL;
    char *out = PyBytes_AS_STRING(encoded);
    memcpy(out, text, (size_t)length);
    out += length;
    if (separate) *out++ = 2;
    memcpy(out, "CLUSTER\x01", 8);
    memcpy(out + 8, cluster.text, (size_t)cluster.length);
    out[8 + cluster.length] = 2;
    return encoded;
}

/* a str's UTF-8 in place; 0 (nothing raised) when ``value`` is not a str that has one */
static int str_view(PyObject *value, View *out) {
    if (value == NULL || !PyUnicode_CheckExact(value)) return 0;
    out->text = PyUnicode_AsUTF8AndSize(value, &out->length);
    if (out->text == NULL) { /* lone surrogates: the Python path raises as it should */
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static PyObject *read_send(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != FIELD_COUNT ||
        !PyUnicode_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "read_send(ext_fields, names: tuple, cluster: str)");
        return NULL;
    }
    if (!PyDict_CheckExact(args[0])) Py_RETURN_NONE; /* another mapping: the Python code's */
    View field[FIELD_COUNT];
    for (int i = 0; i < FIELD_COUNT; i++) {
        PyObject *value = PyDict_GetItemWithError(args[0], PyTuple_GET_ITEM(args[1], i));
        if (value == NULL && PyErr_Occurred()) return NULL;
        field[i] = (View){NULL, 0};
        if (value == NULL || (i == PROPERTIES && value == Py_None)) continue; /* absent */
        if (!str_view(value, &field[i])) Py_RETURN_NONE;
    }
    SendNumbers numbers;
    if (read_send_fields(field, &numbers) != SINGLE) Py_RETURN_NONE;
    View cluster;
    if (!str_view(args[2], &cluster)) Py_RETURN_NONE;
    PyObject *properties = with_cluster(field[PROPERTIES], cluster);
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
    PyObject *topic = PyDict_GetItemWithError(args[0], PyTuple_GET_ITEM(args[1], TOPIC));
    if (topic == NULL) { /* gone meanwhile: nothing above runs Python code, but be sure */
        Py_DECREF(properties);
        Py_DECREF(uniq);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(OLLLLLNN)", topic, (long long)numbers.queue_id,
                         (long long)numbers.sys_flag, (long long)numbers.born_timestamp,
                         (long long)numbers.flag, (long long)numbers.reconsume_times, properties,
                         uniq);
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

/* whether ``parts`` (bytes, 4 of them; 5 with a UNIQ_KEY) and ``tail`` are a template */
static int answer_template(PyObject *parts, PyObject *tail, int with_uniq) {
    if (!PyTuple_CheckExact(parts) || !PyBytes_CheckExact(tail) ||
        PyTuple_GET_SIZE(parts) != (with_uniq ? 5 : 4))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parts); i++)
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(parts, i))) return 0;
    return 1;
}

/* the most bytes write_answer writes with this template, host, message ids (``count``)
 * and UNIQ_KEY */
static Py_ssize_t answer_bound(PyObject *parts, PyObject *tail, Py_ssize_t host_length,
                               Py_ssize_t count, Py_ssize_t uniq_length) {
    Py_ssize_t size = 8 + ((host_length + 8) * 2 + 1) * count + 4 * 21 + uniq_length +
                      PyBytes_GET_SIZE(tail);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parts); i++)
        size += PyBytes_GET_SIZE(PyTuple_GET_ITEM(parts, i));
    return size;
}

/* the frame at ``buffer`` (answer_bound bytes at least), its msgId the offset message ids
 * of the ``count`` records at ``offsets`` (a batch's are joined by commas); returns where
 * it ends */
static char *write_answer(char *buffer, PyObject *parts, PyObject *tail,
                          const unsigned char *host, Py_ssize_t host_length,
                          const long long *offsets, Py_ssize_t count, long long queue_id,
                          long long queue_offset, const char *uniq, Py_ssize_t uniq_length,
                          long long opaque) {
    static const char hex[] = "0123456789ABCDEF";
    char *out = buffer + 8;
#define PART(i)                                                                    \
    do {                                                                           \
        PyObject *piece = PyTuple_GET_ITEM(parts, i);                              \
        memcpy(out, PyBytes_AS_STRING(piece), (size_t)PyBytes_GET_SIZE(piece));    \
        out += PyBytes_GET_SIZE(piece);                                            \
    } while (0)
    PART(0);
    for (Py_ssize_t id = 0; id < count; id++) {
        if (id > 0) *out++ = ',';
        for (Py_ssize_t i = 0; i < host_length; i++) {
            *out++ = hex[host[i] >> 4];
            *out++ = hex[host[i] & 15];
        }
        for (int shift = 56; shift >= 0; shift -= 8) {
            unsigned byte = (unsigned)((unsigned long long)offsets[id] >> shift) & 0xff;
            *out++ = hex[byte >> 4];
            *out++ = hex[byte & 15];
        }
    }
    PART(1);
    out = put_decimal(out, queue_id);
    PART(2);
    out = put_decimal(out, queue_offset);
    PART(3);
    if (uniq != NULL) {
        memcpy(out, uniq, (size_t)uniq_length);
        out += uniq_length;
        PART(4);
    }
    out = put_decimal(out, opaque);
#undef PART
    memcpy(out, PyBytes_AS_STRING(tail), (size_t)PyBytes_GET_SIZE(tail));
    out += PyBytes_GET_SIZE(tail);
    Py_ssize_t header_length = out - buffer - 8;
    put_be32(buffer, (uint32_t)(header_length + 4));
    put_be32(buffer + 4, (uint32_t)header_length);
    return out;
}

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
    int with_uniq = args[6] != Py_None;
    if (!answer_template(args[0], args[1], with_uniq)) {
        PyErr_SetString(PyExc_ValueError, "answer_frame: 4 bytes parts, or 5 with uniq");
        return NULL;
    }
    const char *uniq = with_uniq ? PyBytes_AS_STRING(args[6]) : NULL;
    Py_ssize_t uniq_length = with_uniq ? PyBytes_GET_SIZE(args[6]) : 0;
    if (with_uniq && !plain_text(uniq, uniq_length)) Py_RETURN_NONE;
    Py_ssize_t host_length = PyBytes_GET_SIZE(args[2]);
    char *buffer = PyMem_Malloc((size_t)answer_bound(args[0], args[1], host_length, 1, uniq_length));
    if (buffer == NULL) return PyErr_NoMemory();
    char *end = write_answer(buffer, args[0], args[1], (const unsigned char *)PyBytes_AS_STRING(args[2]),
                             host_length, &commit_log_offset, 1, queue_id, queue_offset, uniq,
                             uniq_length, opaque);
    PyObject *frame = PyBytes_FromStringAndSize(buffer, end - buffer);
    PyMem_Free(buffer);
    return frame;
}


/* --- the whole usual send: send_fast.fast_send, compiled ------------------------------ */

enum { R_MESSAGE_TYPE, R_PUT_OK, R_PLAIN_TOPIC, R_ANSWER_FRAME, R_BORN_HOST, R_AFTER_PUT,
       R_V1_NAMES, R_V2_NAMES, R_PUT_HOOKS_TYPE, R_COUNT };
#define PERM_WRITE 2
#define COMPRESSED 0x1   /* sysFlag: the body is compressed */
#define MULTI_TAGS 0x2   /* sysFlag: TAGS hold several tags */
#define SEND_MESSAGE 10

static PyObject *s_ready, *s_config, *s_broker_permission, *s_is_slave, *s_code, *s_ext_fields,
    *s_broker_cluster_name, *s_topics, *s_get, *s_perm, *s_body, *s_max_message_size,
    *s_put_hooks, *s_markers, *s_act_on, *s_read_queue_nums, *s_write_queue_nums,
    *s_topic_filter_type, *s_multi_tag, *s_peer_address, *s_store, *s_append, *s_stats,
    *s_count_put, *s_ha, *s_after_append, *s_flush_to, *s_status, *s_serialize_type,
    *s_connection, *s_takes_encoded_answers, *s_region_id, *s_trace_on, *s_head, *s_tail,
    *s_uniq_head, *s_uniq_tail, *s_store_host, *s_commit_log_offset, *s_queue_offset,
    *s_opaque, *s_commit_log_offsets;

/* an attribute as a C long long: 1; 0 (no error set) when it is not an int of 64 bits,
 * which the Python code then reads; -1 with the error of getting it */
static int attribute_int(PyObject *owner, PyObject *name, long long *out) {
    PyObject *value = PyObject_GetAttr(owner, name);
    if (value == NULL) return -1;
    int ok = 0, overflow = 0;
    if (PyLong_Check(value)) {
        *out = PyLong_AsLongLongAndOverflow(value, &overflow);
        ok = overflow ? 0 : (*out == -1 && PyErr_Occurred()) ? -1 : 1;
    }
    Py_DECREF(value);
    return ok;
}

/* 1: true, 0: false, -1: error */
static int attribute_true(PyObject *owner, PyObject *name) {
    PyObject *value = PyObject_GetAttr(owner, name);
    if (value == NULL) return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

/* whether any of ``markers`` (a tuple; a marker that is not bytes is not what PutHooks
 * holds, and counts as found: let it say) occurs in ``text``, as PutHooks.act_on */
static int markers_found(PyObject *markers, const char *text, Py_ssize_t length) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(markers); i++) {
        PyObject *marker = PyTuple_GET_ITEM(markers, i);
        if (!PyBytes_CheckExact(marker) ||
            contains(text, length, PyBytes_AS_STRING(marker), PyBytes_GET_SIZE(marker)))
            return 1;
    }
    return 0;
}

/* whether a put hook may act on ``encoded``: PutHooks.act_on, its markers searched here
 * (anything but a PutHooks itself is asked) */
static int hooks_act_on(PyObject *put_hooks, PyObject *put_hooks_type, PyObject *encoded) {
    PyObject *markers = Py_TYPE(put_hooks) == (PyTypeObject *)put_hooks_type
                            ? PyObject_GetAttr(put_hooks, s_markers)
                            : Py_NewRef(Py_None);
    if (markers == NULL) return -1;
    int acts = 0;
    if (PyTuple_CheckExact(markers)) {
        acts = markers_found(markers, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded));
    } else { /* None: a hook that looks at every message, or another kind of hooks, decides */
        PyObject *verdict = PyObject_CallMethodOneArg(put_hooks, s_act_on, encoded);
        acts = verdict == NULL ? -1 : PyObject_IsTrue(verdict);
        Py_XDECREF(verdict);
    }
    Py_DECREF(markers);
    return acts;
}


/* the SUCCESS frame of a put as send_fast._answer builds it; None when it does not apply
 * (a UNIQ_KEY to escape), NULL on error */
static PyObject *usual_answer(PyObject *module, PyObject *refs, PyObject *config,
                              PyObject *result, PyObject *queue, PyObject *uniq,
                              PyObject *request) {
    PyObject *region = PyObject_GetAttr(config, s_region_id);
    PyObject *trace = region ? PyObject_GetAttr(config, s_trace_on) : NULL;
    PyObject *frame = NULL, *parts = NULL, *tail = NULL, *host = NULL, *offset = NULL,
             *queue_offset = NULL, *opaque = NULL, *answer = NULL;
    if (trace == NULL) goto done;
    frame = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(refs, R_ANSWER_FRAME), region, trace,
                                         NULL);
    if (frame == NULL) goto done;
    parts = PyObject_GetAttr(frame, uniq == Py_None ? s_head : s_uniq_head);
    tail = parts ? PyObject_GetAttr(frame, uniq == Py_None ? s_tail : s_uniq_tail) : NULL;
    host = tail ? PyObject_GetAttr(result, s_store_host) : NULL;
    offset = host ? PyObject_GetAttr(result, s_commit_log_offset) : NULL;
    queue_offset = offset ? PyObject_GetAttr(result, s_queue_offset) : NULL;
    opaque = queue_offset ? PyObject_GetAttr(request, s_opaque) : NULL;
    if (opaque == NULL) goto done;
    PyObject *frame_args[8] = {parts, tail, host, offset, queue, queue_offset, uniq, opaque};
    answer = answer_frame(module, frame_args, 8);
done:
    Py_XDECREF(region);
    Py_XDECREF(trace);
    Py_XDECREF(frame);
    Py_XDECREF(parts);
    Py_XDECREF(tail);
    Py_XDECREF(host);
    Py_XDECREF(offset);
    Py_XDECREF(queue_offset);
    Py_XDECREF(opaque);
    return answer;
}

PyDoc_STRVAR(send_one_doc,
"send_one(broker, ctx, request, refs, /)\n--\n\n"
"send_fast.fast_send for the usual send, compiled: the checks, the put, the counting,\n"
"the HA step and the answer frame. ``refs``: (MessageToStore, PutStatus.PUT_OK,\n"
"_plain_topic, _answer_frame, send._born_host, _after_put, V1 names, V2 names, PutHooks).\n"
"None, with nothing done, when send_fast.fast_send must decide (anything but the usual\n"
"send); once the message is put, every answer is fast_send's.");

static PyObject *send_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyTuple_CheckExact(args[3]) || PyTuple_GET_SIZE(args[3]) != R_COUNT) {
        PyErr_SetString(PyExc_TypeError, "send_one(broker, ctx, request, refs: tuple)");
        return NULL;
    }
    PyObject *broker = args[0], *ctx = args[1], *request = args[2], *refs = args[3];
    PyObject *config = NULL, *fields = NULL, *topic_config = NULL, *put_hooks = NULL,
             *born_host = NULL, *message = NULL, *result = NULL, *answer = NULL;
    PyObject *value = NULL, *ext_fields = NULL, *cluster = NULL, *body = NULL;
    long long number;
    int truth;

    /* --- the checks: None before anything is done --- */
    if ((truth = attribute_true(broker, s_ready)) <= 0) goto undecided;
    if ((config = PyObject_GetAttr(broker, s_config)) == NULL) goto failed;
    if ((truth = attribute_int(config, s_broker_permission, &number)) <= 0) goto undecided;
    if (!(number & PERM_WRITE)) goto undecided;
    if ((truth = attribute_true(config, s_is_slave)) != 0) goto undecided;
    long long code;
    if ((truth = attribute_int(request, s_code, &code)) <= 0) goto undecided;
    PyObject *names = PyTuple_GET_ITEM(refs, code == SEND_MESSAGE ? R_V1_NAMES : R_V2_NAMES);
    if ((ext_fields = PyObject_GetAttr(request, s_ext_fields)) == NULL) goto failed;
    if ((cluster = PyObject_GetAttr(config, s_broker_cluster_name)) == NULL) goto failed;
    if (!PyUnicode_CheckExact(cluster)) goto undecided;
    PyObject *read_args[3] = {ext_fields, names, cluster};
    if ((fields = read_send(module, read_args, 3)) == NULL) goto failed;
    if (fields == Py_None) goto undecided;
    PyObject *topic = PyTuple_GET_ITEM(fields, 0), *encoded = PyTuple_GET_ITEM(fields, 6),
             *uniq = PyTuple_GET_ITEM(fields, 7);
    long long queue_id = PyLong_AsLongLong(PyTuple_GET_ITEM(fields, 1));
    long long sys_flag = PyLong_AsLongLong(PyTuple_GET_ITEM(fields, 2));
    if (PyErr_Occurred()) goto failed;
    value = PyObject_GetAttr(broker, s_topics);
    if (value == NULL) goto failed;
    topic_config = PyObject_CallMethodOneArg(value, s_get, topic);
    Py_CLEAR(value);
    if (topic_config == NULL) goto failed;
    if (topic_config == Py_None) goto undecided;
    if ((truth = attribute_int(topic_config, s_perm, &number)) <= 0) goto undecided;
    if (!(number & PERM_WRITE)) goto undecided;
    value = PyObject_CallOneArg(PyTuple_GET_ITEM(refs, R_PLAIN_TOPIC), topic);
    if (value == NULL) goto failed;
    truth = PyObject_IsTrue(value);
    Py_CLEAR(value);
    if (truth <= 0) goto undecided;
    if ((body = PyObject_GetAttr(request, s_body)) == NULL) goto failed;
    if (!PyBytes_CheckExact(body) || sys_flag & COMPRESSED) goto undecided;
    if ((truth = attribute_int(config, s_max_message_size, &number)) <= 0) goto undecided;
    if (PyBytes_GET_SIZE(body) > number) goto undecided;
    if ((put_hooks = PyObject_GetAttr(broker, s_put_hooks)) == NULL) goto failed;
    if ((truth = hooks_act_on(put_hooks, PyTuple_GET_ITEM(refs, R_PUT_HOOKS_TYPE), encoded)) != 0)
        goto undecided;
    if (queue_id < 0) goto undecided; /* a random queue: the Python code draws it */
    long long read_queues, write_queues;
    if (attribute_int(topic_config, s_read_queue_nums, &read_queues) <= 0 ||
        attribute_int(topic_config, s_write_queue_nums, &write_queues) <= 0)
        goto undecided;
    if (queue_id >= (read_queues > write_queues ? read_queues : write_queues)) goto undecided;
    value = PyObject_GetAttr(topic_config, s_topic_filter_type);
    if (value == NULL) goto failed;
    if (PyUnicode_Check(value) && PyUnicode_Compare(value, s_multi_tag) == 0)
        sys_flag |= MULTI_TAGS;
    Py_CLEAR(value);
    value = PyObject_GetAttr(ctx, s_peer_address);
    if (value == NULL) goto failed;
    born_host = PyObject_CallOneArg(PyTuple_GET_ITEM(refs, R_BORN_HOST), value);
    Py_CLEAR(value);
    if (born_host == NULL) goto failed;
    PyObject *queue = PyLong_FromLongLong(queue_id), *flags = PyLong_FromLongLong(sys_flag);
    if (queue == NULL || flags == NULL) {
        Py_XDECREF(queue);
        Py_XDECREF(flags);
        goto failed;
    }
    /* MessageToStore(topic, queue_id, body, encoded, flag, sys_flag, born_timestamp,
     * born_host, reconsume_times) */
    PyObject *message_args[9] = {topic, queue, body, encoded, PyTuple_GET_ITEM(fields, 4), flags,
                                 PyTuple_GET_ITEM(fields, 3), born_host,
                                 PyTuple_GET_ITEM(fields, 5)};
    message = PyObject_Vectorcall(PyTuple_GET_ITEM(refs, R_MESSAGE_TYPE), message_args, 9, NULL);
    Py_DECREF(flags);
    if (message == NULL) {
        Py_DECREF(queue);
        goto failed;
    }

    /* --- the put: from here on every path answers --- */
    value = PyObject_GetAttr(broker, s_store);
    if (value != NULL) {
        result = PyObject_CallMethodOneArg(value, s_append, message);
        Py_CLEAR(value);
    }
    PyObject *replica_end = NULL;
    if (result != NULL && (value = PyObject_GetAttr(broker, s_stats)) != NULL) {
        PyObject *counted = PyObject_CallMethodObjArgs(value, s_count_put, message, result, NULL);
        Py_CLEAR(value);
        if (counted != NULL && (value = PyObject_GetAttr(broker, s_ha)) != NULL) {
            replica_end = value == Py_None
                              ? PyLong_FromLong(-1)
                              : PyObject_CallMethodObjArgs(value, s_after_append, result,
                                                           encoded, NULL);
            Py_CLEAR(value);
        }
        Py_XDECREF(counted);
    }
    if (replica_end == NULL) {
        Py_DECREF(queue);
        goto failed;
    }
    /* the usual answer, a finished frame; anything else is _after_put's */
    long long flush_to, replica;
    replica = PyLong_AsLongLong(replica_end);
    int usual = !PyErr_Occurred() && replica < 0 &&
                attribute_int(result, s_flush_to, &flush_to) > 0 && flush_to < 0;
    if (usual) {
        value = PyObject_GetAttr(result, s_status);
        usual = value == PyTuple_GET_ITEM(refs, R_PUT_OK);
        Py_CLEAR(value);
    }
    long long serialize_type;
    if (usual) usual = attribute_int(request, s_serialize_type, &serialize_type) > 0 &&
                       serialize_type == 0;
    if (usual) {
        value = PyObject_GetAttr(ctx, s_connection);
        usual = value != NULL && attribute_true(value, s_takes_encoded_answers) > 0;
        Py_CLEAR(value);
    }
    if (usual) { /* an error making the frame is the send's, as in the Python code */
        answer = usual_answer(module, refs, config, result, queue, uniq, request);
    } else { /* a check that failed to read: _after_put reads it again and decides */
        PyErr_Clear();
    }
    if (answer == Py_None || !usual) { /* a UNIQ_KEY to escape, a wait, another answer */
        Py_CLEAR(answer);
        PyObject *tail_args[7] = {broker, ctx, request, queue, uniq, result, replica_end};
        answer = PyObject_Vectorcall(PyTuple_GET_ITEM(refs, R_AFTER_PUT), tail_args, 7, NULL);
    }
    Py_DECREF(replica_end);
    Py_DECREF(queue);
    goto done;

undecided:
    if (truth < 0 || PyErr_Occurred()) goto failed;
    answer = Py_NewRef(Py_None);
    goto done;
failed:
    answer = NULL;
done:
    Py_XDECREF(value);
    Py_XDECREF(config);
    Py_XDECREF(ext_fields);
    Py_XDECREF(cluster);
    Py_XDECREF(fields);
    Py_XDECREF(topic_config);
    Py_XDECREF(body);
    Py_XDECREF(put_hooks);
    Py_XDECREF(born_host);
    Py_XDECREF(message);
    Py_XDECREF(result);
    return answer;
}


/* --- a batch's records as messages: send._batch_messages, compiled -------------------- */

static int32_t read_be32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* a record's properties with the batch-level ones it lacks (send._merge) */
static PyObject *merged_properties(const char *own, Py_ssize_t own_length, PyObject *batch_level) {
    Py_ssize_t count = PyList_GET_SIZE(batch_level), size = own_length;
    int separate = own_length > 0 && own[own_length - 1] != 2;
    size += separate;
    char adds[64]; /* which batch-level pairs this record lacks */
    if (count > (Py_ssize_t)sizeof adds) return Py_NewRef(Py_None);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry = PyList_GET_ITEM(batch_level, i);
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) return Py_NewRef(Py_None);
        PyObject *first = PyTuple_GET_ITEM(entry, 0), *inside = PyTuple_GET_ITEM(entry, 1),
                 *pair = PyTuple_GET_ITEM(entry, 2);
        if (!PyBytes_CheckExact(first) || !PyBytes_CheckExact(inside) || !PyBytes_CheckExact(pair))
            return Py_NewRef(Py_None);
        Py_ssize_t first_length = PyBytes_GET_SIZE(first);
        int has = (first_length <= own_length &&
                   memcmp(own, PyBytes_AS_STRING(first), (size_t)first_length) == 0) ||
                  contains(own, own_length, PyBytes_AS_STRING(inside), PyBytes_GET_SIZE(inside));
        adds[i] = !has;
        if (!has) size += PyBytes_GET_SIZE(pair);
    }
    PyObject *merged = PyBytes_FromStringAndSize(NULL, size);
    if (merged == NULL) return NULL;
    char *out = PyBytes_AS_STRING(merged);
    memcpy(out, own, (size_t)own_length);
    out += own_length;
    if (separate) *out++ = 2;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!adds[i]) continue;
        PyObject *pair = PyTuple_GET_ITEM(PyList_GET_ITEM(batch_level, i), 2);
        memcpy(out, PyBytes_AS_STRING(pair), (size_t)PyBytes_GET_SIZE(pair));
        out += PyBytes_GET_SIZE(pair);
    }
    return merged;
}

PyDoc_STRVAR(batch_messages_doc,
"batch_messages(body, topic, queue_id, sys_flag, born_timestamp, born_host,\n"
"               reconsume_times, batch_level, most, message_type, /)\n--\n\n"
"The MessageToStore of each record of a SEND_BATCH_MESSAGE body, its properties merged\n"
"with ``batch_level`` (send._batch_level_pairs), as send._batch_messages makes them;\n"
"None when the Python code must refuse the body (a record cut short or inconsistent,\n"
"more than ``most`` records, none at all) or read it.");

/* send._batch_level_pairs of encoded batch-level properties: for each name\x01value,
 * (name\x01, \x02name\x01, name\x01value\x02) */
static PyObject *batch_level_pairs(const char *text, Py_ssize_t length) {
    PyObject *pairs = PyList_New(0);
    if (pairs == NULL) return NULL;
    for (Py_ssize_t start = 0; start <= length;) {
        const char *at = text + start;
        const char *stop = memchr(at, 2, (size_t)(length - start));
        Py_ssize_t pair_length = stop != NULL ? stop - at : length - start;
        const char *separator = memchr(at, 1, (size_t)pair_length);
        if (separator != NULL && separator > at) {
            Py_ssize_t name_length = separator - at;
            PyObject *first = PyBytes_FromStringAndSize(at, name_length + 1);
            PyObject *inside = PyBytes_FromStringAndSize(NULL, name_length + 2);
            PyObject *pair = PyBytes_FromStringAndSize(NULL, pair_length + 1);
            PyObject *entry = NULL;
            if (first != NULL && inside != NULL && pair != NULL) {
                char *inside_text = PyBytes_AS_STRING(inside), *pair_text = PyBytes_AS_STRING(pair);
                inside_text[0] = 2;
                memcpy(inside_text + 1, at, (size_t)name_length + 1);
                memcpy(pair_text, at, (size_t)pair_length);
                pair_text[pair_length] = 2;
                entry = PyTuple_Pack(3, first, inside, pair);
            }
            Py_XDECREF(first);
            Py_XDECREF(inside);
            Py_XDECREF(pair);
            if (entry == NULL || PyList_Append(pairs, entry) < 0) {
                Py_XDECREF(entry);
                Py_DECREF(pairs);
                return NULL;
            }
            Py_DECREF(entry);
        }
        start += pair_length + 1;
    }
    return pairs;
}

/* what a run learns of a batch's records as they are made */
typedef struct {
    PyObject *markers; /* put-hook markers: one in a record's properties, and a put hook
                          may act on the batch (the Python code decides) */
    Py_ssize_t bytes;  /* the records' bodies and properties */
} BatchTally;

/* The messages of a batch body's records, as batch_messages answers: a list, None (a
 * new reference) when the Python code decides, NULL with an exception set. ``fields``
 * are batch_messages' arguments after the body (topic ... message_type); ``tally``, when
 * not NULL, is told of each record, and a record with one of its markers leaves the
 * batch to the Python code. */
static PyObject *messages_of_records(const unsigned char *data, Py_ssize_t size,
                                     PyObject *const *fields, BatchTally *tally) {
    PyObject *topic = fields[0], *queue_id = fields[1], *sys_flag = fields[2];
    PyObject *born_timestamp = fields[3], *born_host = fields[4], *reconsume_times = fields[5];
    PyObject *batch_level = fields[6], *message_type = fields[8];
    int overflow;
    long long most_given = PyLong_AsLongLongAndOverflow(fields[7], &overflow);
    if (most_given == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t most = overflow > 0 || most_given > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX
                      : overflow < 0                            ? 0
                                                                : (Py_ssize_t)most_given;
    Py_ssize_t position = 0;
    PyObject *messages = PyList_New(0);
    if (messages == NULL) return NULL;
    while (position < size) {
        if (PyList_GET_SIZE(messages) == most || size - position < 20) goto python_decides;
        int32_t total = read_be32(data + position), flag = read_be32(data + position + 12);
        int32_t body_length = read_be32(data + position + 16);
        Py_ssize_t at = position + 20;
        if (body_length < 0 || (Py_ssize_t)body_length + 2 > size - at) goto python_decides;
        const unsigned char *body_at = data + at;
        at += body_length;
        int16_t properties_length = (int16_t)((uint16_t)data[at] << 8 | data[at + 1]);
        at += 2;
        if (properties_length < 0 || properties_length > size - at) goto python_decides;
        const char *properties_at = (const char *)data + at;
        at += properties_length;
        if (total != at - position) goto python_decides;
        PyObject *body = PyBytes_FromStringAndSize((const char *)body_at, body_length);
        PyObject *properties = body ? merged_properties(properties_at, properties_length, batch_level)
                                    : NULL;
        PyObject *flags = properties ? PyLong_FromLong(flag) : NULL;
        PyObject *message = NULL;
        if (tally != NULL && flags != NULL && properties != Py_None) {
            tally->bytes += body_length + PyBytes_GET_SIZE(properties);
            if (markers_found(tally->markers, PyBytes_AS_STRING(properties),
                              PyBytes_GET_SIZE(properties))) {
                Py_DECREF(body);
                Py_DECREF(properties);
                Py_DECREF(flags);
                goto python_decides;
            }
        }
        if (flags != NULL && properties != Py_None) {
            /* MessageToStore(topic, queue_id, body, properties, flag, sys_flag,
             * born_timestamp, born_host, reconsume_times) */
            PyObject *message_args[9] = {topic, queue_id, body, properties, flags, sys_flag,
                                         born_timestamp, born_host, reconsume_times};
            message = PyObject_Vectorcall(message_type, message_args, 9, NULL);
        }
        int odd = properties == Py_None;
        Py_XDECREF(body);
        Py_XDECREF(properties);
        Py_XDECREF(flags);
        if (odd && !PyErr_Occurred()) goto python_decides;
        if (message == NULL || PyList_Append(messages, message) < 0) {
            Py_XDECREF(message);
            Py_DECREF(messages);
            return NULL;
        }
        Py_DECREF(message);
        position = at;
    }
    if (PyList_GET_SIZE(messages) > 0) return messages;
python_decides:
    Py_DECREF(messages);
    Py_RETURN_NONE;
}

static PyObject *batch_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10 || !PyBytes_CheckExact(args[0]) || !PyList_CheckExact(args[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "batch_messages(body: bytes, topic, queue_id, sys_flag, born_timestamp,"
                        " born_host, reconsume_times, batch_level: list, most, message_type)");
        return NULL;
    }
    return messages_of_records((const unsigned char *)PyBytes_AS_STRING(args[0]),
                               PyBytes_GET_SIZE(args[0]), args + 1, NULL);
}

/* --- runs of usual sends, answered from the bytes read (send_frames.py) ---------------
 *
 * serve_sends reads each whole frame from a position of what a connection read: a JSON
 * header in the form clients write (an object of plain values, extFields an object of
 * strings, numbers and booleans; ASCII; escapes of ASCII characters), then the checks,
 * the put and the answer of send_fast's fast path. It stops before the first frame
 * that is anything else, nothing done for it: the decoder decodes that one as usual. */

#define HEADER_SCRATCH 4096 /* bytes of one header's strings that had escapes */
#define SEND_MESSAGE_V2 310
#define SEND_BATCH_MESSAGE 320
#define FLAG_RESPONSE_OR_ONEWAY 0x3

typedef struct {
    const char *p, *end;
    char scratch[HEADER_SCRATCH];
    Py_ssize_t scratch_used;
} Scan;

static void skip_space(Scan *scan) {
    while (scan->p < scan->end &&
           (*scan->p == ' ' || *scan->p == '\t' || *scan->p == '\n' || *scan->p == '\r'))
        scan->p++;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* a JSON string of ASCII characters: its text in place, or unescaped into the scratch */
static int scan_string(Scan *scan, View *out) {
    if (scan->p >= scan->end || *scan->p != '"') return 0;
    const char *start = ++scan->p, *at = start;
    for (; at < scan->end && *at != '"' && *at != '\\'; at++)
        if ((unsigned char)*at < 0x20 || (unsigned char)*at >= 0x80) return 0;
    if (at < scan->end && *at == '"') {
        *out = (View){start, at - start};
        scan->p = at + 1;
        return 1;
    }
    char *first = scan->scratch + scan->scratch_used, *to = first;
    char *limit = scan->scratch + HEADER_SCRATCH;
    if (at - start > limit - to) return 0;
    memcpy(to, start, (size_t)(at - start));
    to += at - start;
    while (at < scan->end && *at != '"') {
        if (to >= limit) return 0;
        unsigned char c = (unsigned char)*at;
        if (c < 0x20 || c >= 0x80) return 0;
        if (c != '\\') {
            *to++ = (char)c;
            at++;
            continue;
        }
        if (scan->end - at < 2) return 0;
        switch (at[1]) {
        case '"': case '\\': case '/': *to++ = at[1]; break;
        case 'b': *to++ = '\b'; break;
        case 'f': *to++ = '\f'; break;
        case 'n': *to++ = '\n'; break;
        case 'r': *to++ = '\r'; break;
        case 't': *to++ = '\t'; break;
        case 'u': {
            if (scan->end - at < 6) return 0;
            int code = 0;
            for (int i = 2; i < 6; i++) {
                int digit = hex_digit(at[i]);
                if (digit < 0) return 0;
                code = code * 16 + digit;
            }
            if (code >= 0x80) return 0; /* UTF-8 to make: orjson's */
            *to++ = (char)code;
            at += 4;
            break;
        }
        default: return 0;
        }
        at += 2;
    }
    if (at >= scan->end) return 0;
    *out = (View){first, to - first};
    scan->scratch_used = to - scan->scratch;
    scan->p = at + 1;
    return 1;
}

/* a JSON integer as written (no fraction, exponent or "-0"; 18 characters at most): its
 * digits in place */
static int scan_integer(Scan *scan, View *out) {
    const char *start = scan->p, *at = start;
    if (at < scan->end && *at == '-') at++;
    if (at >= scan->end || *at < '0' || *at > '9') return 0;
    if (*at == '0') {
        at++;
        if (at - start == 2) return 0; /* "-0": Python's str() of it is "0" */
    } else {
        while (at < scan->end && *at >= '0' && *at <= '9') at++;
    }
    if (at < scan->end && (*at == '.' || *at == 'e' || *at == 'E' || (*at >= '0' && *at <= '9')))
        return 0;
    if (at - start > 18) return 0; /* past 64 bits orjson reads a float: its text differs */
    *out = (View){start, at - start};
    scan->p = at;
    return 1;
}

static int scan_word(Scan *scan, const char *word) {
    Py_ssize_t length = (Py_ssize_t)strlen(word);
    if (scan->end - scan->p < length || memcmp(scan->p, word, (size_t)length) != 0) return 0;
    scan->p += length;
    return 1;
}

enum { V_STRING, V_INTEGER, V_TRUE, V_FALSE, V_NULL };

/* a string, integer, true, false or null: which, and its text (true and false as the
 * header codec's str() of them gives it) */
static int scan_plain_value(Scan *scan, View *out, int *kind) {
    if (scan->p >= scan->end) return 0;
    switch (*scan->p) {
    case '"': *kind = V_STRING; return scan_string(scan, out);
    case 't': *kind = V_TRUE; *out = (View){"true", 4}; return scan_word(scan, "true");
    case 'f': *kind = V_FALSE; *out = (View){"false", 5}; return scan_word(scan, "false");
    case 'n': *kind = V_NULL; *out = (View){NULL, 0}; return scan_word(scan, "null");
    default: *kind = V_INTEGER; return scan_integer(scan, out);
    }
}

/* after a member: 1 and past the comma, 2 at the object's end (past it), 0 otherwise */
static int scan_next_member(Scan *scan) {
    skip_space(scan);
    if (scan->p < scan->end && *scan->p == ',') {
        scan->p++;
        skip_space(scan);
        return 1;
    }
    if (scan->p < scan->end && *scan->p == '}') {
        scan->p++;
        return 2;
    }
    return 0;
}

static int scan_key(Scan *scan, View *key) {
    if (!scan_string(scan, key)) return 0;
    skip_space(scan);
    if (scan->p >= scan->end || *scan->p != ':') return 0;
    scan->p++;
    skip_space(scan);
    return 1;
}

/* every member of a header's extFields, for an ACL check (the signature covers them all) */
#define MOST_MEMBERS 64
typedef struct {
    View key[MOST_MEMBERS], value[MOST_MEMBERS]; /* a null value: text NULL */
    int count, overflow;                         /* overflow: more than MOST_MEMBERS */
} Members;

/* The names a run reads (SEND_MESSAGE's twelve, then SEND_MESSAGE_V2's), for looking a
 * key up: a one-letter name (V2's) by its letter, the others by a walk */
typedef struct {
    PyObject *names;
    signed char by_letter[256]; /* a one-letter name's index, or -1 */
} Names;

static void names_index(PyObject *names, Names *index) {
    index->names = names;
    memset(index->by_letter, -1, sizeof index->by_letter);
    for (int i = 2 * FIELD_COUNT - 1; i >= 0; i--) { /* the first of a name twice counts */
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (PyBytes_GET_SIZE(name) == 1)
            index->by_letter[(unsigned char)PyBytes_AS_STRING(name)[0]] = (signed char)i;
    }
}

/* the index of ``key`` among the names, or -1 */
static int name_index(const Names *index, View key) {
    if (key.length == 1) return index->by_letter[(unsigned char)key.text[0]];
    for (int i = 0; i < 2 * FIELD_COUNT; i++) {
        PyObject *name = PyTuple_GET_ITEM(index->names, i);
        if (PyBytes_GET_SIZE(name) == key.length && key.length > 0 &&
            PyBytes_AS_STRING(name)[0] == key.text[0] &&
            memcmp(PyBytes_AS_STRING(name), key.text, (size_t)key.length) == 0)
            return i;
    }
    return -1;
}

/* extFields: each of the names found once at most, as text (numbers and booleans as the
 * header codec's str() of them, null as absent); other keys only need plain values.
 * ``all``, when not NULL, gets every member. */
static int scan_ext_fields(Scan *scan, const Names *names, View *field, Members *all) {
    for (int i = 0; i < 2 * FIELD_COUNT; i++) field[i] = (View){NULL, 0};
    if (all != NULL) all->count = all->overflow = 0;
    if (scan->p >= scan->end || *scan->p != '{') return 0;
    scan->p++;
    skip_space(scan);
    if (scan->p < scan->end && *scan->p == '}') {
        scan->p++;
        return 1;
    }
    int seen = 0;
    for (;;) {
        View key, value;
        int kind;
        if (!scan_key(scan, &key) || !scan_plain_value(scan, &value, &kind)) return 0;
        int i = name_index(names, key);
        if (i >= 0) {
            if (seen & (1 << i)) return 0; /* twice: the last one counts; the codec decides */
            seen |= 1 << i;
            field[i] = value;
        }
        if (all != NULL) {
            if (all->count == MOST_MEMBERS) {
                all->overflow = 1;
            } else {
                all->key[all->count] = key;
                all->value[all->count++] = value;
            }
        }
        int next = scan_next_member(scan);
        if (next == 0) return 0;
        if (next == 2) return 1;
    }
}

typedef struct {
    int64_t code, flag, opaque, version;
    View field[2 * FIELD_COUNT]; /* by SEND_MESSAGE's names, then by SEND_MESSAGE_V2's */
    Members *all; /* every extFields member, when an ACL check needs them; else NULL */
} SendHeader;

/* a request header in the form clients write, read as the header codec would read it;
 * 0 when it is in any other form (or one the codec refuses) */
static int scan_header(Scan *scan, const Names *names, SendHeader *header) {
    enum { CODE = 1, FLAG = 2, OPAQUE = 4, VERSION = 8, LANGUAGE = 16, REMARK = 32, EXT = 64 };
    int seen = 0;
    header->flag = header->opaque = header->version = 0;
    skip_space(scan);
    if (scan->p >= scan->end || *scan->p != '{') return 0;
    scan->p++;
    skip_space(scan);
    for (;;) {
        View key, value;
        int kind, bit;
        if (!scan_key(scan, &key)) return 0;
        if (view_is(key, "extFields")) {
            if (seen & EXT || !scan_ext_fields(scan, names, header->field, header->all)) return 0;
            seen |= EXT;
        } else {
            if (!scan_plain_value(scan, &value, &kind)) return 0;
            int64_t number = 0;
            if (view_is(key, "code")) bit = CODE;
            else if (view_is(key, "flag")) bit = FLAG;
            else if (view_is(key, "opaque")) bit = OPAQUE;
            else if (view_is(key, "version")) bit = VERSION;
            else if (view_is(key, "language")) bit = LANGUAGE;
            else if (view_is(key, "remark")) bit = REMARK;
            else bit = 0; /* serializeTypeCurrentRPC and the like: not read */
            if (seen & bit) return 0;
            seen |= bit;
            if (bit & (CODE | FLAG | OPAQUE | VERSION)) {
                int64_t low = bit == OPAQUE ? INT32_MIN : INT64_MIN;
                int64_t high = bit == OPAQUE ? INT32_MAX : INT64_MAX;
                if (kind != V_INTEGER || !read_digits(value, low, high, &number)) return 0;
                if (bit == CODE) header->code = number;
                else if (bit == FLAG) header->flag = number;
                else if (bit == OPAQUE) header->opaque = number;
                else header->version = number;
            } else if (bit == LANGUAGE && kind != V_STRING) {
                return 0;
            } else if (bit == REMARK && kind != V_STRING && kind != V_NULL) {
                return 0;
            }
        }
        int next = scan_next_member(scan);
        if (next == 0) return 0;
        if (next == 2) break;
    }
    skip_space(scan);
    return scan->p == scan->end && (seen & CODE) && (seen & EXT);
}

/* the answers of a run, one after another */
typedef struct {
    char *data;
    Py_ssize_t used, capacity;
} Answers;

static char *answers_room(Answers *answers, Py_ssize_t size) {
    if (answers->capacity - answers->used < size) {
        Py_ssize_t capacity = answers->capacity ? answers->capacity * 2 : 16384;
        while (capacity - answers->used < size) capacity *= 2;
        char *grown = PyMem_Realloc(answers->data, (size_t)capacity);
        if (grown == NULL) return NULL;
        answers->data = grown;
        answers->capacity = capacity;
    }
    return answers->data + answers->used;
}

/* a run's stored messages by (topic, record size), for BrokerStats.count_put_runs: the
 * sends in a row of one topic and size are counted here, and added to the dict at once */
typedef struct {
    PyObject *dict;  /* {(topic, size): messages}, or NULL before the first */
    PyObject *topic; /* of the row being counted (a strong reference), or NULL */
    Py_ssize_t size, in_row;
} Counts;

static int counts_flush(Counts *counts) {
    if (counts->in_row == 0) return 0;
    if (counts->dict == NULL && (counts->dict = PyDict_New()) == NULL) return -1;
    PyObject *key = Py_BuildValue("(On)", counts->topic, counts->size);
    if (key == NULL) return -1;
    PyObject *count = PyDict_GetItemWithError(counts->dict, key);
    long long so_far = count ? PyLong_AsLongLong(count) : 0;
    PyObject *now = PyErr_Occurred() ? NULL : PyLong_FromLongLong(so_far + counts->in_row);
    int failed = now == NULL || PyDict_SetItem(counts->dict, key, now) < 0;
    Py_XDECREF(now);
    Py_DECREF(key);
    counts->in_row = 0;
    return failed ? -1 : 0;
}

static int count_stored(Counts *counts, PyObject *topic, Py_ssize_t size) {
    if (counts->in_row && (counts->topic != topic || counts->size != size) &&
        counts_flush(counts) < 0)
        return -1;
    if (counts->topic != topic) Py_XSETREF(counts->topic, Py_NewRef(topic));
    counts->size = size;
    counts->in_row++;
    return 0;
}

/* --- the ACL check of a run's frame: the guard's compiled check (acl/_signature.c's
 * before_request), made on the header as read in place ------------------------------- */

typedef struct {
    const SignatureApi *api;
    PyObject *signing_keys, *verdicts; /* accessKey -> keyed(secret); verdict key -> None */
    PyObject *names[3]; /* SEND_MESSAGE's, SEND_MESSAGE_V2's and SEND_BATCH_MESSAGE's deciding
                         * names; NULL: the code is the guard's */
    PyObject *last_key;    /* the verdict key of the last frame allowed (strong), or NULL */
    PyObject *last_keyed;  /* and its accessKey's prepared key (strong) */
} FrameCheck;

/* the frame check of a run: 0 when ``check`` (AclValidator.frame_check's tuple) is ready in
 * ``out``, -1 with an exception set */
static int frame_check_open(PyObject *check, FrameCheck *out) {
    if (!PyTuple_CheckExact(check) || PyTuple_GET_SIZE(check) != 4 ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(check, 1)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(check, 2)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(check, 3))) {
        PyErr_SetString(PyExc_TypeError, "serve_sends: a malformed frame check");
        return -1;
    }
    out->api = PyCapsule_GetPointer(PyTuple_GET_ITEM(check, 0), SIGNATURE_API_CAPSULE);
    if (out->api == NULL) return -1;
    out->signing_keys = PyTuple_GET_ITEM(check, 1);
    out->verdicts = PyTuple_GET_ITEM(check, 3);
    out->last_key = out->last_keyed = NULL;
    const long codes[3] = {SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE};
    for (int i = 0; i < 3; i++) {
        PyObject *code = PyLong_FromLong(codes[i]);
        if (code == NULL) return -1;
        PyObject *names = PyDict_GetItemWithError(PyTuple_GET_ITEM(check, 2), code);
        Py_DECREF(code);
        if (names == NULL && PyErr_Occurred()) return -1;
        int usable = names != NULL && PyTuple_CheckExact(names) && PyTuple_GET_SIZE(names) == 2 &&
                     PyUnicode_IS_COMPACT_ASCII(PyTuple_GET_ITEM(names, 0)) &&
                     PyUnicode_IS_COMPACT_ASCII(PyTuple_GET_ITEM(names, 1));
        out->names[i] = usable ? names : NULL;
    }
    return 0;
}

static void frame_check_close(FrameCheck *check) {
    Py_CLEAR(check->last_key);
    Py_CLEAR(check->last_keyed);
}

/* the text of a view and of an ASCII str (or None for an absent view) are the same */
static int view_is_text(View view, PyObject *text) {
    if (view.text == NULL || text == Py_None) return view.text == NULL && text == Py_None;
    return PyUnicode_GET_LENGTH(text) == view.length &&
           memcmp(PyUnicode_DATA(text), view.text, (size_t)view.length) == 0;
}

/* a str of a view's ASCII text, or None for an absent one (a new reference) */
static PyObject *text_or_none(View view) {
    if (view.text == NULL) return Py_NewRef(Py_None);
    return PyUnicode_DecodeASCII(view.text, view.length, NULL);
}

static int key_order(View a, View b) {
    if (a.length > 0 && b.length > 0 && a.text[0] != b.text[0]) /* most keys differ at once */
        return (unsigned char)a.text[0] < (unsigned char)b.text[0] ? -1 : 1;
    int order = memcmp(a.text, b.text, (size_t)(a.length < b.length ? a.length : b.length));
    if (order != 0) return order;
    return a.length < b.length ? -1 : a.length > b.length;
}

/* Whether a frame with this header and body is certainly allowed, as the guard's compiled
 * check decides a request: 1 yes, 0 the guard decides (the frame goes the usual way), -1
 * with an exception set. Certainly allowed: every extFields key once, its accessKey in
 * the signing keys, a verdict kept as allowed for (accessKey, code, its deciding values),
 * and its signature right: over the values in key order (the signature's own left out,
 * and the unique-key query field for old clients' versions), then the body. */
static int frame_allowed(FrameCheck *check, const SendHeader *header, const char *body,
                         Py_ssize_t body_length) {
    const Members *all = header->all;
    PyObject *names = check->names[header->code == SEND_MESSAGE      ? 0
                                   : header->code == SEND_MESSAGE_V2 ? 1
                                                                     : 2];
    if (all->overflow || names == NULL) return 0;
    int order[MOST_MEMBERS];
    for (int i = 0; i < all->count; i++) { /* insertion sort: a send has fifteen or so */
        int at = i;
        while (at > 0 && key_order(all->key[order[at - 1]], all->key[i]) > 0) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = i;
    }
    PyObject *first_name = PyTuple_GET_ITEM(names, 0), *second_name = PyTuple_GET_ITEM(names, 1);
    int skip_unique_key = header->version <= LAST_VERSION_WITHOUT_SIGNED_UNIQUE_KEY;
    View access = {NULL, 0}, received = {NULL, 0}, first = {NULL, 0}, second = {NULL, 0};
    const char *texts[MOST_MEMBERS];
    Py_ssize_t lengths[MOST_MEMBERS], signed_count = 0;
    for (int i = 0; i < all->count; i++) {
        View key = all->key[order[i]], value = all->value[order[i]];
        if (i > 0 && key_order(all->key[order[i - 1]], key) == 0)
            return 0; /* a key twice: the last one counts; the guard decides */
        if (value.text == NULL) continue; /* null: absent, as the header codec reads it */
        if (view_is_text(key, first_name)) first = value;
        if (view_is_text(key, second_name)) second = value;
        if (view_is(key, "AccessKey")) access = value;
        if (view_is(key, "Signature")) {
            received = value;
            continue;
        }
        if (skip_unique_key && view_is(key, "_UNIQUE_KEY_QUERY")) continue;
        texts[signed_count] = value.text;
        lengths[signed_count++] = value.length;
    }
    if (access.text == NULL || received.text == NULL) return 0;
    /* the signature first, as the guard checks it: whether a verdict is kept takes no
     * time to learn from the answers to unsigned requests */
    PyObject *last = check->last_key, *access_text = NULL, *keyed;
    if (last != NULL && view_is_text(access, PyTuple_GET_ITEM(last, 0))) {
        keyed = check->last_keyed;
    } else {
        if ((access_text = text_or_none(access)) == NULL) return -1;
        keyed = PyDict_GetItemWithError(check->signing_keys, access_text);
        if (keyed == NULL) { /* an account the guard decides */
            Py_DECREF(access_text);
            return PyErr_Occurred() ? -1 : 0;
        }
    }
    int signed_right = check->api->signed_with(keyed, texts, lengths, signed_count, body,
                                               body_length, received.text, received.length);
    if (signed_right <= 0 || (access_text == NULL &&
                              PyLong_AsLongLong(PyTuple_GET_ITEM(last, 1)) == header->code &&
                              view_is_text(first, PyTuple_GET_ITEM(last, 2)) &&
                              view_is_text(second, PyTuple_GET_ITEM(last, 3)))) {
        Py_XDECREF(access_text); /* wrong, or the verdict of the frame before */
        return signed_right;
    }
    /* another resource than the frame before: its verdict must be kept as allowed */
    PyObject *key = Py_BuildValue("(OLNN)",
                                  access_text ? access_text : PyTuple_GET_ITEM(last, 0),
                                  (long long)header->code, text_or_none(first),
                                  text_or_none(second));
    Py_XDECREF(access_text);
    if (key == NULL) return -1;
    PyObject *verdict = PyDict_GetItemWithError(check->verdicts, key);
    if (verdict != Py_None) { /* not allowed, or not yet decided */
        Py_DECREF(key);
        return PyErr_Occurred() ? -1 : 0;
    }
    Py_INCREF(keyed); /* before the last key goes: it may hold the only other reference */
    Py_XSETREF(check->last_key, key);
    Py_XSETREF(check->last_keyed, keyed);
    return 1;
}

/* serve_sends' run tuple (send_frames.SendFrames._run), field by field */
enum { RUN_MAX_FRAME, RUN_NAMES, RUN_CLUSTER, RUN_MAX_MESSAGE_SIZE, RUN_MARKERS, RUN_TOPIC_NAMES,
       RUN_TOPICS, RUN_BORN_HOST, RUN_MESSAGE_TYPE, RUN_APPEND, RUN_PUT_OK, RUN_ANSWER,
       RUN_RECORD_FIXED, RUN_APPEND_BATCH, RUN_BATCH_MOST, RUN_FRAME_CHECK, RUN_WAITING_ONLY,
       RUN_FIELDS };

/* --- a run's batches: SEND_BATCH_MESSAGE frames put as send.send_message puts them ---- */

/* the level pairs of the last batch-level properties a run met (a producer's batches
 * usually share them) */
typedef struct {
    PyObject *of, *pairs; /* the properties (bytes) and their pairs (a list), or NULL */
} LevelCache;

/* the level pairs of ``properties`` (borrowed from the cache), or NULL with an exception */
static PyObject *level_pairs(LevelCache *cache, PyObject *properties) {
    Py_ssize_t length = PyBytes_GET_SIZE(properties);
    if (cache->of != NULL && PyBytes_GET_SIZE(cache->of) == length &&
        memcmp(PyBytes_AS_STRING(cache->of), PyBytes_AS_STRING(properties), (size_t)length) == 0)
        return cache->pairs;
    PyObject *pairs = batch_level_pairs(PyBytes_AS_STRING(properties), length);
    if (pairs == NULL) return NULL;
    Py_XSETREF(cache->of, Py_NewRef(properties));
    Py_XSETREF(cache->pairs, pairs);
    return pairs;
}

/* a batch's messages as send._batch_messages makes them (a list), None (a new reference)
 * when its body is the Python code's, NULL with an exception set */
static PyObject *batch_of(PyObject *run, PyObject *topic, const SendNumbers *numbers,
                          int multi_tag, PyObject *born_host, PyObject *pairs, const char *body,
                          Py_ssize_t body_length, BatchTally *tally) {
    /* batch_messages' arguments after the body: topic, queue_id, sys_flag, born_timestamp,
     * born_host, reconsume_times, batch_level, most, message_type */
    PyObject *fields[9] = {
        topic,
        PyLong_FromLongLong(numbers->queue_id),
        PyLong_FromLongLong(numbers->sys_flag | (multi_tag ? MULTI_TAGS : 0)),
        PyLong_FromLongLong(numbers->born_timestamp),
        born_host,
        PyLong_FromLongLong(numbers->reconsume_times),
        pairs,
        PyTuple_GET_ITEM(run, RUN_BATCH_MOST),
        PyTuple_GET_ITEM(run, RUN_MESSAGE_TYPE),
    };
    PyObject *messages = NULL;
    if (fields[1] != NULL && fields[2] != NULL && fields[3] != NULL && fields[5] != NULL)
        messages = messages_of_records((const unsigned char *)body, body_length, fields, tally);
    Py_XDECREF(fields[1]);
    Py_XDECREF(fields[2]);
    Py_XDECREF(fields[3]);
    Py_XDECREF(fields[5]);
    return messages;
}

/* room for ``count`` CommitLog offsets: a single send's in place, a batch's on the heap,
 * kept for the run's next batch */
typedef struct {
    long long one;
    long long *offsets;
    Py_ssize_t capacity;
} OffsetRoom;

static long long *offset_room(OffsetRoom *room, Py_ssize_t count) {
    if (count == 1) return &room->one;
    if (count > room->capacity) {
        long long *grown = PyMem_Realloc(room->offsets, (size_t)count * sizeof *grown);
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        room->offsets = grown;
        room->capacity = count;
    }
    return room->offsets;
}

/* a batch's PutResult.commit_log_offsets into ``offsets``: 1 when it is a list of
 * ``count`` ints of 64 bits, 0 (nothing raised) when not, -1 with an exception set */
static int put_offsets(PyObject *put, long long *offsets, Py_ssize_t count) {
    PyObject *list = PyObject_GetAttr(put, s_commit_log_offsets);
    if (list == NULL) return -1;
    int read = PyList_CheckExact(list) && PyList_GET_SIZE(list) == count;
    for (Py_ssize_t i = 0; read && i < count; i++) {
        PyObject *offset = PyList_GET_ITEM(list, i);
        int overflow;
        offsets[i] = PyLong_CheckExact(offset) ? PyLong_AsLongLongAndOverflow(offset, &overflow) : -1;
        read = PyLong_CheckExact(offset) && overflow == 0 && offsets[i] >= 0;
    }
    Py_DECREF(list);
    return PyErr_Occurred() ? -1 : read;
}

/* a batch put, counted as count_put_batch counts it: (topic, messages, bytes) appended */
static int count_batch(PyObject **batches, PyObject *topic, Py_ssize_t messages,
                       Py_ssize_t bytes) {
    if (*batches == NULL && (*batches = PyList_New(0)) == NULL) return -1;
    PyObject *entry = Py_BuildValue("(Onn)", topic, messages, bytes);
    int failed = entry == NULL || PyList_Append(*batches, entry) < 0;
    Py_XDECREF(entry);
    return failed ? -1 : 0;
}


PyDoc_STRVAR(serve_sends_doc,
"serve_sends(run, source, position, /)\n--\n\n"
"Answer the usual SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE frames of ``source`` (bytes or\n"
"bytearray) from\n"
"``position`` on, one after another, as send_fast's fast path would; stop before the\n"
"first frame that is anything else (or incomplete), nothing done for it. ``run`` is\n"
"send_frames.SendFrames' tuple (max frame length, the wire names of SEND_MESSAGE then of\n"
"SEND_MESSAGE_V2 as bytes, the\n"
"cluster as bytes, max message size, put-hook markers, topic names by bytes (a str, or\n"
"None for a topic the fast path leaves), the topic table, the born host, MessageToStore,\n"
"the store's usual append, PutStatus.PUT_OK, the answer template (head, tail, uniq head,\n"
"uniq tail), the record size but for the topic, body and properties, the store's usual\n"
"batch append (None: SEND_BATCH_MESSAGE frames are not taken), maxBatchMessageCount, and\n"
"the ACL check of each frame: None, or AclValidator.frame_check's tuple, when a frame the\n"
"check does not certainly allow is left to the guard, and whether only sends that wait to\n"
"be stored are taken: a SYNC_MASTER's, whose others answer at once, the general way).\n\n"
"Returns (position, answers: bytes or None, counts: {(topic, record size): messages} or\n"
"None, missed: topic bytes not in the topic names or None, failure: (exception, header\n"
"start, header end) of a frame whose put raised, answered by the caller, or None,\n"
"declined: the start of the frame before ``position`` whose put the usual append\n"
"declined, nothing done, for the caller to dispatch, or -1, how many of the frames\n"
"answered were SEND_MESSAGE's, how many SEND_BATCH_MESSAGE's, and the batches put, of\n"
"any code, as [(topic, messages, record bytes)] or None).");

static PyObject *serve_sends(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != RUN_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "serve_sends(run: tuple, source, position)");
        return NULL;
    }
    PyObject *run = args[0];
    PyObject *names = PyTuple_GET_ITEM(run, RUN_NAMES), *answer = PyTuple_GET_ITEM(run, RUN_ANSWER);
    PyObject *cluster_bytes = PyTuple_GET_ITEM(run, RUN_CLUSTER);
    PyObject *markers = PyTuple_GET_ITEM(run, RUN_MARKERS);
    PyObject *topic_names = PyTuple_GET_ITEM(run, RUN_TOPIC_NAMES);
    PyObject *topics = PyTuple_GET_ITEM(run, RUN_TOPICS);
    PyObject *born_host = PyTuple_GET_ITEM(run, RUN_BORN_HOST);
    if (!PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != 2 * FIELD_COUNT ||
        !PyBytes_CheckExact(cluster_bytes) || !PyTuple_CheckExact(markers) ||
        !PyDict_CheckExact(topic_names) || !PyDict_CheckExact(topics) ||
        !PyBytes_CheckExact(born_host) || !PyTuple_CheckExact(answer) ||
        PyTuple_GET_SIZE(answer) != 4 ||
        !answer_template(PyTuple_GET_ITEM(answer, 0), PyTuple_GET_ITEM(answer, 1), 0) ||
        !answer_template(PyTuple_GET_ITEM(answer, 2), PyTuple_GET_ITEM(answer, 3), 1)) {
        PyErr_SetString(PyExc_TypeError, "serve_sends: a malformed run tuple");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < 2 * FIELD_COUNT; i++)
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "serve_sends: names are bytes");
            return NULL;
        }
    Names name_lookup;
    names_index(names, &name_lookup);
    long long max_frame = PyLong_AsLongLong(PyTuple_GET_ITEM(run, RUN_MAX_FRAME));
    long long max_message_size = PyLong_AsLongLong(PyTuple_GET_ITEM(run, RUN_MAX_MESSAGE_SIZE));
    long long record_fixed = PyLong_AsLongLong(PyTuple_GET_ITEM(run, RUN_RECORD_FIXED));
    Py_ssize_t position = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) return NULL;
    View cluster = {PyBytes_AS_STRING(cluster_bytes), PyBytes_GET_SIZE(cluster_bytes)};

    Py_buffer source;
    if (PyObject_GetBuffer(args[1], &source, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *base = source.buf;
    Py_ssize_t end = source.len;
    Answers answers = {NULL, 0, 0};
    Counts counts = {NULL, NULL, 0, 0};
    PyObject *missed = NULL, *failure = NULL, *result = NULL;
    PyObject *last_key = NULL, *last_name = NULL; /* the topic of the frame before */
    PyObject *last_config = NULL;                 /* and its config, read once */
    long long perm = 0, read_queues = 0, write_queues = 0;
    int multi_tag = 0, failed = 0;
    Py_ssize_t declined = -1; /* where a frame the store's usual append declined starts */
    Py_ssize_t served_v1 = 0; /* SEND_MESSAGE frames answered (the rest: SEND_MESSAGE_V2) */
    Scan scanned, *scan = &scanned; /* a header's escaped strings: HEADER_SCRATCH bytes */
    Members members;
    FrameCheck acl = {NULL, NULL, NULL, {NULL, NULL, NULL}, NULL, NULL};
    PyObject *append_batch = PyTuple_GET_ITEM(run, RUN_APPEND_BATCH);
    LevelCache level = {NULL, NULL};    /* a batch's level pairs, kept for the next batch */
    OffsetRoom room = {0, NULL, 0};     /* a send's or a batch's CommitLog offsets */
    PyObject *batch_counts = NULL;      /* [(topic, messages, bytes)] of the batches put */
    Py_ssize_t served_batch_code = 0;   /* SEND_BATCH_MESSAGE frames answered */
    PyObject *frame_check = PyTuple_GET_ITEM(run, RUN_FRAME_CHECK);
    int waiting_only = PyObject_IsTrue(PyTuple_GET_ITEM(run, RUN_WAITING_ONLY));
    if (waiting_only < 0) goto error;
    if (frame_check != Py_None && frame_check_open(frame_check, &acl) < 0) goto error;

    while (position >= 0 && end - position >= 8) {
        const unsigned char *frame = base + position;
        long long length = (uint32_t)read_be32(frame);
        if (length < 4 || length > max_frame - 4 || end - position - 4 < length) break;
        uint32_t type_and_length = (uint32_t)read_be32(frame + 4);
        Py_ssize_t header_length = type_and_length & 0xFFFFFF;
        if (type_and_length >> 24 != 0 || header_length > length - 4) break; /* not JSON */
        const char *header_text = (const char *)frame + 8;
        scan->p = header_text;
        scan->end = header_text + header_length;
        scan->scratch_used = 0;
        SendHeader header;
        header.all = acl.api != NULL ? &members : NULL;
        if (!scan_header(scan, &name_lookup, &header) ||
            (header.code != SEND_MESSAGE && header.code != SEND_MESSAGE_V2 &&
             header.code != SEND_BATCH_MESSAGE) ||
            header.flag & FLAG_RESPONSE_OR_ONEWAY)
            break;

        const char *body_at = header_text + header_length;
        Py_ssize_t body_length = (Py_ssize_t)length - 4 - header_length;
        if (acl.api != NULL) {
            int allowed = frame_allowed(&acl, &header, body_at, body_length);
            if (allowed < 0) goto error;
            if (!allowed) break;
        }
        /* each code reads its own names, as the header codec does */
        const View *field = header.field + (header.code == SEND_MESSAGE ? 0 : FIELD_COUNT);
        SendNumbers numbers;
        int kind = read_send_fields(field, &numbers), is_batch = kind == BATCH_OF;
        /* a batch is one by its batch field, whatever its code (the C++ client sends its
         * batches as SEND_MESSAGE), as send.send_message reads it */
        if (kind == NOT_CANONICAL || (header.code == SEND_BATCH_MESSAGE && !is_batch) ||
            (is_batch && append_batch == Py_None))
            break;
        View topic_text = field[TOPIC];
        if (last_key == NULL || PyBytes_GET_SIZE(last_key) != topic_text.length ||
            memcmp(PyBytes_AS_STRING(last_key), topic_text.text, (size_t)topic_text.length)) {
            PyObject *key = PyBytes_FromStringAndSize(topic_text.text, topic_text.length);
            if (key == NULL) goto error;
            PyObject *name = PyDict_GetItemWithError(topic_names, key); /* borrowed */
            if (name == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(key);
                    goto error;
                }
                missed = key; /* the caller learns it and calls again */
                break;
            }
            Py_XSETREF(last_key, key);
            Py_XSETREF(last_name, Py_NewRef(name));
        }
        if (!PyUnicode_CheckExact(last_name)) break; /* a topic the fast path leaves */
        PyObject *config = PyDict_GetItemWithError(topics, last_name); /* borrowed */
        if (config == NULL) {
            if (PyErr_Occurred()) goto error;
            break; /* a new topic: the general path creates it */
        }
        if (config != last_config) {
            if (attribute_int(config, s_perm, &perm) <= 0 ||
                attribute_int(config, s_read_queue_nums, &read_queues) <= 0 ||
                attribute_int(config, s_write_queue_nums, &write_queues) <= 0) {
                if (PyErr_Occurred()) goto error;
                break;
            }
            PyObject *filter = PyObject_GetAttr(config, s_topic_filter_type);
            if (filter == NULL) goto error;
            multi_tag = PyUnicode_Check(filter) && PyUnicode_Compare(filter, s_multi_tag) == 0;
            Py_DECREF(filter);
            if (PyErr_Occurred()) goto error;
            Py_XSETREF(last_config, Py_NewRef(config));
        }
        if (!(perm & PERM_WRITE) || numbers.sys_flag & COMPRESSED ||
            body_length > max_message_size || numbers.queue_id < 0 ||
            numbers.queue_id >= (read_queues > write_queues ? read_queues : write_queues))
            break;
        PyObject *properties = with_cluster(field[PROPERTIES], cluster);
        if (properties == NULL) goto error;
        const char *encoded = PyBytes_AS_STRING(properties);
        Py_ssize_t encoded_length = PyBytes_GET_SIZE(properties), uniq_length = 0;
        /* a put hook's, or on a SYNC_MASTER a send that is not to wait for the slave */
        int hooked = markers_found(markers, encoded, encoded_length) ||
                     (waiting_only && !waits_for_store(encoded, encoded_length));
        PyObject *put_argument = NULL; /* the message, or a batch's list of them */
        Py_ssize_t records = 1, record_bytes = body_length + encoded_length;
        char uniq_text[128]; /* the answer's copy: the properties go with the message */
        const char *uniq = NULL;
        if (is_batch) { /* its properties are the batch's: each record's are merged with them */
            PyObject *pairs = hooked ? NULL : level_pairs(&level, properties);
            Py_DECREF(properties);
            if (hooked) break;
            if (pairs == NULL) goto error;
            BatchTally tally = {markers, 0};
            put_argument = batch_of(run, last_name, &numbers, multi_tag, born_host, pairs,
                                    body_at, body_length, &tally);
            if (put_argument == NULL) goto error;
            if (put_argument == Py_None) { /* the general path's */
                Py_DECREF(put_argument);
                break;
            }
            records = PyList_GET_SIZE(put_argument);
            record_bytes = tally.bytes;
        } else {
            const char *uniq_at = property_value(encoded, encoded_length, "UNIQ_KEY\x01", 9,
                                                 &uniq_length);
            uniq = uniq_at ? uniq_text : NULL;
            if (hooked || (uniq_at != NULL && (!plain_text(uniq_at, uniq_length) ||
                                               uniq_length > (Py_ssize_t)sizeof uniq_text))) {
                Py_DECREF(properties); /* a hook's, or a UNIQ_KEY the answer escapes */
                break;
            }
            if (uniq_at != NULL) memcpy(uniq_text, uniq_at, (size_t)uniq_length);
            /* MessageToStore(topic, queue_id, body, properties, flag, sys_flag,
             * born_timestamp, born_host, reconsume_times) */
            PyObject *message_args[9] = {
                last_name,
                PyLong_FromLongLong(numbers.queue_id),
                PyBytes_FromStringAndSize(body_at, body_length),
                properties,
                PyLong_FromLongLong(numbers.flag),
                PyLong_FromLongLong(numbers.sys_flag | (multi_tag ? MULTI_TAGS : 0)),
                PyLong_FromLongLong(numbers.born_timestamp),
                born_host,
                PyLong_FromLongLong(numbers.reconsume_times),
            };
            int made = 1;
            for (int i = 0; i < 9; i++) made &= message_args[i] != NULL;
            if (made)
                put_argument = PyObject_Vectorcall(PyTuple_GET_ITEM(run, RUN_MESSAGE_TYPE),
                                                   message_args, 9, NULL);
            for (int i = 1; i < 7; i++) Py_XDECREF(message_args[i]);
            Py_XDECREF(message_args[8]);
            if (put_argument == NULL) goto error;
        }
        PyObject *put = PyObject_CallOneArg(
            is_batch ? append_batch : PyTuple_GET_ITEM(run, RUN_APPEND), put_argument);
        Py_DECREF(put_argument);
        Py_ssize_t frame_end = position + 4 + (Py_ssize_t)length;
        if (put == NULL) { /* answered by the caller as a processor's error is answered */
            if (!PyErr_ExceptionMatches(PyExc_Exception)) goto error; /* an interrupt */
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            PyErr_NormalizeException(&type, &value, &traceback);
            if (traceback != NULL && value != NULL) PyException_SetTraceback(value, traceback);
            failure = Py_BuildValue("(Onn)", value ? value : Py_None, position + 8,
                                    position + 8 + header_length);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            if (failure == NULL) goto error;
            position = frame_end;
            break;
        }
        if (put == Py_None) { /* not the usual put, nothing written: dispatched by the
                                 caller, before the frames after it */
            Py_DECREF(put);
            declined = position;
            position = frame_end;
            break;
        }
        long long queue_offset, flush_to, *offsets = offset_room(&room, records);
        PyObject *status = offsets ? PyObject_GetAttr(put, s_status) : NULL;
        PyObject *store_host = status ? PyObject_GetAttr(put, s_store_host) : NULL;
        int usual = store_host != NULL && status == PyTuple_GET_ITEM(run, RUN_PUT_OK) &&
                    PyBytes_CheckExact(store_host) &&
                    (is_batch ? put_offsets(put, offsets, records) > 0
                              : attribute_int(put, s_commit_log_offset, offsets) > 0) &&
                    attribute_int(put, s_queue_offset, &queue_offset) > 0 &&
                    attribute_int(put, s_flush_to, &flush_to) > 0 && flush_to < 0;
        Py_XDECREF(status);
        Py_DECREF(put);
        if (!usual) {
            Py_XDECREF(store_host);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError,
                                "the store's usual append gave another answer than PUT_OK");
            goto error; /* written, so not the general path's: an error, loudly */
        }
        PyObject *parts = PyTuple_GET_ITEM(answer, uniq ? 2 : 0);
        PyObject *tail = PyTuple_GET_ITEM(answer, uniq ? 3 : 1);
        Py_ssize_t host_length = PyBytes_GET_SIZE(store_host);
        char *to = answers_room(&answers,
                                answer_bound(parts, tail, host_length, records, uniq_length));
        if (to == NULL) {
            Py_DECREF(store_host);
            PyErr_NoMemory();
            goto error;
        }
        char *written = write_answer(to, parts, tail,
                                     (const unsigned char *)PyBytes_AS_STRING(store_host),
                                     host_length, offsets, records, numbers.queue_id,
                                     queue_offset, uniq, uniq_length, header.opaque);
        Py_DECREF(store_host);
        answers.used = written - answers.data;
        Py_ssize_t topic_length = PyUnicode_GET_LENGTH(last_name);
        Py_ssize_t fixed = (Py_ssize_t)record_fixed + (topic_length <= 127 ? 1 : 2) + topic_length;
        if (is_batch) { /* counted as one request, as count_put_batch counts it */
            if (count_batch(&batch_counts, last_name, records, fixed * records + record_bytes) < 0)
                goto error;
        } else if (count_stored(&counts, last_name, fixed + record_bytes) < 0) {
            goto error;
        }
        served_v1 += header.code == SEND_MESSAGE;
        served_batch_code += header.code == SEND_BATCH_MESSAGE;
        position = frame_end;
    }
    goto done;

error:
    failed = 1;
done:
    if (!failed && counts_flush(&counts) == 0) {
        PyObject *served = answers.used ? PyBytes_FromStringAndSize(answers.data, answers.used)
                                        : Py_NewRef(Py_None);
        if (served != NULL)
            result = Py_BuildValue("(nNOOOnnnO)", position, served,
                                   counts.dict ? counts.dict : Py_None, missed ? missed : Py_None,
                                   failure ? failure : Py_None, declined, served_v1,
                                   served_batch_code, batch_counts ? batch_counts : Py_None);
    }
    /* on an error after puts, their answers are lost with the connection (the caller
     * closes it): nothing stored is lost */
    PyMem_Free(answers.data);
    PyBuffer_Release(&source);
    Py_XDECREF(counts.dict);
    Py_XDECREF(counts.topic);
    Py_XDECREF(missed);
    Py_XDECREF(failure);
    Py_XDECREF(last_key);
    Py_XDECREF(last_name);
    Py_XDECREF(last_config);
    frame_check_close(&acl);
    Py_XDECREF(level.of);
    Py_XDECREF(level.pairs);
    PyMem_Free(room.offsets);
    Py_XDECREF(batch_counts);
    return result;
}

static PyMethodDef methods[] = {
    {"read_send", (PyCFunction)(void (*)(void))read_send, METH_FASTCALL, read_send_doc},
    {"answer_frame", (PyCFunction)(void (*)(void))answer_frame, METH_FASTCALL,
     answer_frame_doc},
    {"send_one", (PyCFunction)(void (*)(void))send_one, METH_FASTCALL, send_one_doc},
    {"batch_messages", (PyCFunction)(void (*)(void))batch_messages, METH_FASTCALL,
     batch_messages_doc},
    {"serve_sends", (PyCFunction)(void (*)(void))serve_sends, METH_FASTCALL, serve_sends_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_send_fast", "The send fast path's per-message work, compiled.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__send_fast(void) {
    if ((s_ready = PyUnicode_InternFromString("ready")) == NULL) return NULL;
    if ((s_config = PyUnicode_InternFromString("config")) == NULL) return NULL;
    if ((s_broker_permission = PyUnicode_InternFromString("broker_permission")) == NULL) return NULL;
    if ((s_is_slave = PyUnicode_InternFromString("is_slave")) == NULL) return NULL;
    if ((s_code = PyUnicode_InternFromString("code")) == NULL) return NULL;
    if ((s_ext_fields = PyUnicode_InternFromString("ext_fields")) == NULL) return NULL;
    if ((s_broker_cluster_name = PyUnicode_InternFromString("broker_cluster_name")) == NULL) return NULL;
    if ((s_topics = PyUnicode_InternFromString("topics")) == NULL) return NULL;
    if ((s_get = PyUnicode_InternFromString("get")) == NULL) return NULL;
    if ((s_perm = PyUnicode_InternFromString("perm")) == NULL) return NULL;
    if ((s_body = PyUnicode_InternFromString("body")) == NULL) return NULL;
    if ((s_max_message_size = PyUnicode_InternFromString("max_message_size")) == NULL) return NULL;
    if ((s_put_hooks = PyUnicode_InternFromString("put_hooks")) == NULL) return NULL;
    if ((s_markers = PyUnicode_InternFromString("markers")) == NULL) return NULL;
    if ((s_act_on = PyUnicode_InternFromString("act_on")) == NULL) return NULL;
    if ((s_read_queue_nums = PyUnicode_InternFromString("read_queue_nums")) == NULL) return NULL;
    if ((s_write_queue_nums = PyUnicode_InternFromString("write_queue_nums")) == NULL) return NULL;
    if ((s_topic_filter_type = PyUnicode_InternFromString("topic_filter_type")) == NULL) return NULL;
    if ((s_peer_address = PyUnicode_InternFromString("peer_address")) == NULL) return NULL;
    if ((s_store = PyUnicode_InternFromString("store")) == NULL) return NULL;
    if ((s_append = PyUnicode_InternFromString("append")) == NULL) return NULL;
    if ((s_stats = PyUnicode_InternFromString("stats")) == NULL) return NULL;
    if ((s_count_put = PyUnicode_InternFromString("count_put")) == NULL) return NULL;
    if ((s_ha = PyUnicode_InternFromString("ha")) == NULL) return NULL;
    if ((s_after_append = PyUnicode_InternFromString("after_append")) == NULL) return NULL;
    if ((s_flush_to = PyUnicode_InternFromString("flush_to")) == NULL) return NULL;
    if ((s_status = PyUnicode_InternFromString("status")) == NULL) return NULL;
    if ((s_serialize_type = PyUnicode_InternFromString("serialize_type")) == NULL) return NULL;
    if ((s_connection = PyUnicode_InternFromString("connection")) == NULL) return NULL;
    if ((s_takes_encoded_answers = PyUnicode_InternFromString("takes_encoded_answers")) == NULL) return NULL;
    if ((s_region_id = PyUnicode_InternFromString("region_id")) == NULL) return NULL;
    if ((s_trace_on = PyUnicode_InternFromString("trace_on")) == NULL) return NULL;
    if ((s_store_host = PyUnicode_InternFromString("store_host")) == NULL) return NULL;
    if ((s_commit_log_offset = PyUnicode_InternFromString("commit_log_offset")) == NULL) return NULL;
    if ((s_queue_offset = PyUnicode_InternFromString("queue_offset")) == NULL) return NULL;
    if ((s_opaque = PyUnicode_InternFromString("opaque")) == NULL) return NULL;
    if ((s_commit_log_offsets = PyUnicode_InternFromString("commit_log_offsets")) == NULL) return NULL;
    if ((s_multi_tag = PyUnicode_InternFromString("MULTI_TAG")) == NULL) return NULL;
    if ((s_head = PyUnicode_InternFromString("_head")) == NULL) return NULL;
    if ((s_tail = PyUnicode_InternFromString("_tail")) == NULL) return NULL;
    if ((s_uniq_head = PyUnicode_InternFromString("_uniq_head")) == NULL) return NULL;
    if ((s_uniq_tail = PyUnicode_InternFromString("_uniq_tail")) == NULL) return NULL;
    PyObject *module = PyModule_Create(&module_definition);
    /* what serve_sends' run tuple holds: send_frames.py takes no runs from a build that
     * reads another */
    if (module != NULL && PyModule_AddIntConstant(module, "RUN_FIELDS", RUN_FIELDS) < 0)
        Py_CLEAR(module);
    return module;
}
