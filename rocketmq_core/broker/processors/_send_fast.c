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
    *s_opaque;

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

/* whether a put hook may act on ``encoded``: PutHooks.act_on, its markers searched here
 * (anything but a PutHooks itself is asked) */
static int hooks_act_on(PyObject *put_hooks, PyObject *put_hooks_type, PyObject *encoded) {
    PyObject *markers = Py_TYPE(put_hooks) == (PyTypeObject *)put_hooks_type
                            ? PyObject_GetAttr(put_hooks, s_markers)
                            : Py_NewRef(Py_None);
    if (markers == NULL) return -1;
    int acts = 0;
    if (PyTuple_CheckExact(markers)) {
        const char *text = PyBytes_AS_STRING(encoded);
        Py_ssize_t length = PyBytes_GET_SIZE(encoded);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(markers) && !acts; i++) {
            PyObject *marker = PyTuple_GET_ITEM(markers, i);
            if (!PyBytes_CheckExact(marker)) {
                acts = 1; /* not what PutHooks holds: let it say */
                break;
            }
            acts = contains(text, length, PyBytes_AS_STRING(marker), PyBytes_GET_SIZE(marker));
        }
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

static PyObject *batch_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10 || !PyBytes_CheckExact(args[0]) || !PyList_CheckExact(args[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "batch_messages(body: bytes, topic, queue_id, sys_flag, born_timestamp,"
                        " born_host, reconsume_times, batch_level: list, most, message_type)");
        return NULL;
    }
    int overflow;
    long long most_given = PyLong_AsLongLongAndOverflow(args[8], &overflow);
    if (most_given == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t most = overflow > 0 || most_given > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX
                      : overflow < 0                            ? 0
                                                                : (Py_ssize_t)most_given;
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]), position = 0;
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
        PyObject *properties = body ? merged_properties(properties_at, properties_length, args[7])
                                    : NULL;
        PyObject *flags = properties ? PyLong_FromLong(flag) : NULL;
        PyObject *message = NULL;
        if (flags != NULL && properties != Py_None) {
            /* MessageToStore(topic, queue_id, body, properties, flag, sys_flag,
             * born_timestamp, born_host, reconsume_times) */
            PyObject *message_args[9] = {args[1], args[2], body, properties, flags, args[3],
                                         args[4], args[5], args[6]};
            message = PyObject_Vectorcall(args[9], message_args, 9, NULL);
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

static PyMethodDef methods[] = {
    {"read_send", (PyCFunction)(void (*)(void))read_send, METH_FASTCALL, read_send_doc},
    {"answer_frame", (PyCFunction)(void (*)(void))answer_frame, METH_FASTCALL,
     answer_frame_doc},
    {"send_one", (PyCFunction)(void (*)(void))send_one, METH_FASTCALL, send_one_doc},
    {"batch_messages", (PyCFunction)(void (*)(void))batch_messages, METH_FASTCALL,
     batch_messages_doc},
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
    if ((s_multi_tag = PyUnicode_InternFromString("MULTI_TAG")) == NULL) return NULL;
    if ((s_head = PyUnicode_InternFromString("_head")) == NULL) return NULL;
    if ((s_tail = PyUnicode_InternFromString("_tail")) == NULL) return NULL;
    if ((s_uniq_head = PyUnicode_InternFromString("_uniq_head")) == NULL) return NULL;
    if ((s_uniq_tail = PyUnicode_InternFromString("_uniq_tail")) == NULL) return NULL;
    return PyModule_Create(&module_definition);
}
