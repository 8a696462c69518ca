/* The mmap store's append, compiled: one call writes a run of messages of one queue as
 * CommitLog records, their consume-queue entries and their index entries.
 *
 * It takes only the usual case (V1 records with IPv4 hosts, everything fitting the
 * current files) and answers None, having written nothing, for anything else; the
 * store's Python path then does the same work, and is the reference this code is
 * tested against byte for byte (tests/test_append_kernel.py). Layouts: docs/spec/STORE.md
 * and docs/spec/MESSAGE.md; the index rules are IndexFile.put's in index.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define BLANK_SIZE 8
#define MAX_V1_TOPIC 127
#define MAX_PROPERTIES 32767
#define TRANSACTION_PREPARED 0x4 /* prepared and rolled back: in no queue */
#define HOSTS_V6 0x30            /* BORNHOST_V6 | STOREHOST_V6 */
#define RECORD_FRONT 88          /* every field before the body of a V1 IPv4 record */
#define CQ_ENTRY 20
#define INDEX_HEADER 40
#define INDEX_SLOT 4
#define INDEX_ENTRY 20

/* --- CRC-32 (IEEE, as zlib.crc32), eight bytes a step ------------------------------ */

static uint32_t crc_tables[8][256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_tables[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc_tables[t][n] = (crc_tables[t - 1][n] >> 8) ^ crc_tables[0][crc_tables[t - 1][n] & 0xff];
}

/* The table CRC: ``reg`` is the bare register (not inverted), eight bytes a step */
static uint32_t crc_table_run(uint32_t reg, const uint8_t *p, Py_ssize_t n) {
    while (n >= 8) {
        uint32_t low = reg ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                              (uint32_t)p[3] << 24);
        uint32_t high = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                        (uint32_t)p[7] << 24;
        reg = crc_tables[7][low & 0xff] ^ crc_tables[6][(low >> 8) & 0xff] ^
              crc_tables[5][(low >> 16) & 0xff] ^ crc_tables[4][low >> 24] ^
              crc_tables[3][high & 0xff] ^ crc_tables[2][(high >> 8) & 0xff] ^
              crc_tables[1][(high >> 16) & 0xff] ^ crc_tables[0][high >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) reg = crc_tables[0][(reg ^ *p++) & 0xff] ^ (reg >> 8);
    return reg;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_CARRYLESS 1

/* Carry-less folding (Intel's "Fast CRC Computation Using PCLMULQDQ"): 64 bytes a step
 * instead of 8. The folded 16 bytes are congruent to all the data before them modulo the
 * polynomial, so the table finishes on those 16 bytes and the tail: no Barrett step.
 * The constants are x^(512+32), x^(512-32), x^(128+32), x^(128-32) mod P, bit-reflected. */
__attribute__((target("pclmul"))) static inline __m128i
fold(__m128i value, __m128i constants, __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(value, constants, 0x00),
                                       _mm_clmulepi64_si128(value, constants, 0x11)),
                         next);
}

__attribute__((target("pclmul"))) static uint32_t
crc_carryless_run(uint32_t reg, const uint8_t *p, Py_ssize_t n) {
    const __m128i by_four = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i by_one = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)reg)); /* the register enters the data */
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        x0 = fold(x0, by_four, _mm_loadu_si128((const __m128i *)p));
        x1 = fold(x1, by_four, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = fold(x2, by_four, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = fold(x3, by_four, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x0 = fold(fold(fold(x0, by_one, x1), by_one, x2), by_one, x3);
    for (; n >= 16; p += 16, n -= 16) x0 = fold(x0, by_one, _mm_loadu_si128((const __m128i *)p));
    uint8_t folded[16];
    _mm_storeu_si128((__m128i *)folded, x0);
    return crc_table_run(crc_table_run(0, folded, 16), p, n);
}

static int carryless = 0; /* set at import when the CPU has PCLMULQDQ */
#endif

/* crc32(data, value) of zlib: ``crc`` is the CRC of what came before */
static uint32_t crc32_continue(uint32_t crc, const uint8_t *p, Py_ssize_t n) {
#ifdef HAVE_CARRYLESS
    if (carryless && n >= 64) return ~crc_carryless_run(~crc, p, n);
#endif
    return ~crc_table_run(~crc, p, n);
}

/* --- big-endian fields ------------------------------------------------------------- */

static inline void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void put64(uint8_t *p, uint64_t v) {
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static inline int32_t get32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static inline int64_t get64(const uint8_t *p) {
    return (int64_t)((uint64_t)(uint32_t)get32(p) << 32 | (uint32_t)get32(p + 4));
}

/* --- one message, read and checked before anything is written ---------------------- */

typedef struct {
    PyObject *body, *properties, *born_host; /* owned references */
    int64_t flag, sys_flag, born_timestamp, reconsume_times, prepared_offset, tags_code;
    const uint8_t *uniq;                     /* UNIQ_KEY value inside properties, or NULL */
    Py_ssize_t uniq_length;
    const uint8_t *keys;                     /* KEYS value inside properties, or NULL */
    Py_ssize_t keys_length;
    Py_ssize_t size;                         /* of its record */
} Message;

static PyObject *s_topic, *s_queue_id, *s_body, *s_properties, *s_flag, *s_sys_flag,
    *s_born_timestamp, *s_born_host, *s_reconsume_times, *s_prepared_transaction_offset,
    *s_tags_code;

/* an int attribute within [low, high]; 0 when it is not one (nothing raised) */
static int int_attribute(PyObject *object, PyObject *name, int64_t low, int64_t high,
                         int64_t *out) {
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL) {
        PyErr_Clear();
        return 0;
    }
    int overflow = 0;
    long long number = PyLong_Check(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
    int ok = PyLong_Check(value) && !overflow && !(number == -1 && PyErr_Occurred()) &&
             number >= low && number <= high;
    PyErr_Clear();
    Py_DECREF(value);
    if (ok) *out = number;
    return ok;
}

static PyObject *bytes_attribute(PyObject *object, PyObject *name) {
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyBytes_Check(value)) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
}

static int is_name(const uint8_t *name, Py_ssize_t length, const char *expected) {
    Py_ssize_t n = (Py_ssize_t)strlen(expected);
    return length == n && memcmp(name, expected, (size_t)n) == 0;
}

/* TAGS, KEYS and UNIQ_KEY of a message, as store.rules.raw_dispatch_fields reads them */
static int read_properties(Message *message, int has_tags_code, PyObject *tags_code_of) {
    const uint8_t *at = (const uint8_t *)PyBytes_AS_STRING(message->properties);
    const uint8_t *end = at + PyBytes_GET_SIZE(message->properties);
    int coded = has_tags_code;
    if (!coded) message->tags_code = 0;
    message->uniq = message->keys = NULL;
    while (at < end) {
        const uint8_t *pair_end = memchr(at, 0x02, (size_t)(end - at));
        if (pair_end == NULL) pair_end = end;
        const uint8_t *split = memchr(at, 0x01, (size_t)(pair_end - at));
        const uint8_t *value = split ? split + 1 : pair_end;
        Py_ssize_t name_length = (split ? split : pair_end) - at;
        Py_ssize_t value_length = pair_end - value;
        if (is_name(at, name_length, "TAGS")) {
            if (!coded && value_length) {
                coded = 1;
                uint32_t hash = 0; /* Java's String.hashCode, for ASCII */
                int ascii = 1;
                for (Py_ssize_t i = 0; i < value_length; i++) {
                    if (value[i] & 0x80) {
                        ascii = 0;
                        break;
                    }
                    hash = hash * 31u + value[i];
                }
                if (ascii) {
                    message->tags_code = (int32_t)hash;
                } else {
                    PyObject *raw = PyBytes_FromStringAndSize((const char *)value, value_length);
                    PyObject *code = raw ? PyObject_CallOneArg(tags_code_of, raw) : NULL;
                    Py_XDECREF(raw);
                    int overflow = 0;
                    long long number = code && PyLong_Check(code)
                                           ? PyLong_AsLongLongAndOverflow(code, &overflow)
                                           : 0;
                    int ok = code && PyLong_Check(code) && !overflow && !PyErr_Occurred();
                    Py_XDECREF(code);
                    PyErr_Clear();
                    if (!ok) return 0;
                    message->tags_code = number;
                }
            }
        } else if (is_name(at, name_length, "UNIQ_KEY")) {
            message->uniq = value_length ? value : NULL;
            message->uniq_length = value_length;
        } else if (is_name(at, name_length, "KEYS")) {
            message->keys = value_length ? value : NULL;
            message->keys_length = value_length;
        }
        at = pair_end + 1;
    }
    return 1;
}

/* the index keys of a message: UNIQ_KEY, then each token of KEYS split on spaces */
static Py_ssize_t key_count(const Message *message) {
    Py_ssize_t count = message->uniq ? 1 : 0;
    if (message->keys) {
        const uint8_t *p = message->keys, *end = p + message->keys_length;
        while (p < end) {
            const uint8_t *space = memchr(p, ' ', (size_t)(end - p));
            if (space == NULL) space = end;
            if (space > p) count++;
            p = space + 1;
        }
    }
    return count;
}

static Py_ssize_t key_hashes(const Message *message, uint32_t topic_crc, int32_t *hashes) {
    Py_ssize_t count = 0;
    if (message->uniq)
        hashes[count++] = (int32_t)(crc32_continue(topic_crc, message->uniq, message->uniq_length) &
                                    0x7FFFFFFFu);
    if (message->keys) {
        const uint8_t *p = message->keys, *end = p + message->keys_length;
        while (p < end) {
            const uint8_t *space = memchr(p, ' ', (size_t)(end - p));
            if (space == NULL) space = end;
            if (space > p)
                hashes[count++] =
                    (int32_t)(crc32_continue(topic_crc, p, space - p) & 0x7FFFFFFFu);
            p = space + 1;
        }
    }
    return count;
}

static void release(Message *messages, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_XDECREF(messages[i].body);
        Py_XDECREF(messages[i].properties);
        Py_XDECREF(messages[i].born_host);
    }
    PyMem_Free(messages);
}

/* 1 when ``message`` is one this kernel writes, its fields read into ``out``; 0 when not */
static int take(PyObject *message, PyObject *topic, int64_t queue_id, Py_ssize_t topic_length,
                Py_ssize_t max_body, PyObject *tags_code_of, Message *out) {
    PyObject *value = PyObject_GetAttr(message, s_topic);
    if (value == NULL) {
        PyErr_Clear();
        return 0;
    }
    int same_topic = value == topic || (PyUnicode_Check(value) &&
                                        PyUnicode_Compare(value, topic) == 0);
    PyErr_Clear();
    Py_DECREF(value);
    int64_t message_queue;
    if (!same_topic || !int_attribute(message, s_queue_id, 0, 0x7FFFFFFF, &message_queue) ||
        message_queue != queue_id)
        return 0;
    if ((out->body = bytes_attribute(message, s_body)) == NULL ||
        (out->properties = bytes_attribute(message, s_properties)) == NULL ||
        (out->born_host = bytes_attribute(message, s_born_host)) == NULL)
        return 0;
    Py_ssize_t body_length = PyBytes_GET_SIZE(out->body);
    Py_ssize_t properties_length = PyBytes_GET_SIZE(out->properties);
    if (body_length > max_body || properties_length > MAX_PROPERTIES ||
        PyBytes_GET_SIZE(out->born_host) != 8)
        return 0;
    if (!int_attribute(message, s_flag, INT32_MIN, INT32_MAX, &out->flag) ||
        !int_attribute(message, s_sys_flag, INT32_MIN, INT32_MAX, &out->sys_flag) ||
        (out->sys_flag & (TRANSACTION_PREPARED | HOSTS_V6)) ||
        !int_attribute(message, s_born_timestamp, INT64_MIN, INT64_MAX, &out->born_timestamp) ||
        !int_attribute(message, s_reconsume_times, INT32_MIN, INT32_MAX, &out->reconsume_times) ||
        !int_attribute(message, s_prepared_transaction_offset, INT64_MIN, INT64_MAX,
                       &out->prepared_offset))
        return 0;
    value = PyObject_GetAttr(message, s_tags_code);
    if (value == NULL) {
        PyErr_Clear();
        return 0;
    }
    int has_tags_code = value != Py_None;
    Py_DECREF(value);
    if (has_tags_code &&
        !int_attribute(message, s_tags_code, INT64_MIN, INT64_MAX, &out->tags_code))
        return 0;
    if (!read_properties(out, has_tags_code, tags_code_of)) return 0;
    out->size = RECORD_FRONT + body_length + 1 + topic_length + 2 + properties_length;
    return 1;
}

static void write_record(uint8_t *record, const Message *message, const uint8_t *topic,
                         Py_ssize_t topic_length, int64_t queue_id, int64_t queue_offset,
                         int64_t phys, int64_t store_time, const uint8_t *store_host) {
    const uint8_t *body = (const uint8_t *)PyBytes_AS_STRING(message->body);
    Py_ssize_t body_length = PyBytes_GET_SIZE(message->body);
    Py_ssize_t properties_length = PyBytes_GET_SIZE(message->properties);
    put64(record, 0); /* size and magic go last: until then this is no record */
    put32(record + 8, crc32_continue(0, body, body_length) & 0x7FFFFFFFu);
    put32(record + 12, (uint32_t)queue_id);
    put32(record + 16, (uint32_t)message->flag);
    put64(record + 20, (uint64_t)queue_offset);
    put64(record + 28, (uint64_t)phys);
    put32(record + 36, (uint32_t)message->sys_flag);
    put64(record + 40, (uint64_t)message->born_timestamp);
    memcpy(record + 48, PyBytes_AS_STRING(message->born_host), 8);
    put64(record + 56, (uint64_t)store_time);
    memcpy(record + 64, store_host, 8);
    put32(record + 72, (uint32_t)message->reconsume_times);
    put64(record + 76, (uint64_t)message->prepared_offset);
    put32(record + 84, (uint32_t)body_length);
    uint8_t *at = record + RECORD_FRONT;
    memcpy(at, body, (size_t)body_length);
    at += body_length;
    *at++ = (uint8_t)topic_length;
    memcpy(at, topic, (size_t)topic_length);
    at += topic_length;
    put16(at, (uint16_t)properties_length);
    memcpy(at + 2, PyBytes_AS_STRING(message->properties), (size_t)properties_length);
    __asm__ __volatile__("" ::: "memory"); /* the fields above are stored before the magic */
    put32(record, (uint32_t)message->size);
    put32(record + 4, (uint32_t)MAGIC_V1);
}

typedef struct {
    uint8_t *buffer;
    int64_t slot_num, index_num, begin_timestamp, end_timestamp, begin_phys, end_phys;
    int32_t slot_count, index_count;
} Index;

/* IndexFile.put for one record whose keys all fit: entries, then the header, then slots */
static void index_record(Index *index, const int32_t *hashes, Py_ssize_t count, int64_t phys,
                         int64_t store_time, int64_t *slot_ats) {
    int32_t first = index->index_count;
    if (index->begin_timestamp <= 0) {
        index->begin_timestamp = store_time;
        index->begin_phys = phys;
    }
    int64_t elapsed = store_time - index->begin_timestamp;
    int64_t time_diff = elapsed < 0 ? 0 : elapsed / 1000;
    if (time_diff > 0x7FFFFFFF) time_diff = 0x7FFFFFFF;
    int64_t entries_at = INDEX_HEADER + index->slot_num * INDEX_SLOT;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t slot_at = INDEX_HEADER + (int64_t)hashes[i] % index->slot_num * INDEX_SLOT;
        int32_t previous = -1;
        for (Py_ssize_t j = i - 1; j >= 0; j--) {
            if (slot_ats[j] == slot_at) { /* an earlier key of this record: chain to it */
                previous = first + (int32_t)j;
                break;
            }
        }
        if (previous < 0) {
            previous = get32(index->buffer + slot_at);
            if (previous <= 0 || previous >= first) {
                previous = 0;
                index->slot_count++;
            }
        }
        uint8_t *entry = index->buffer + entries_at + (int64_t)index->index_count * INDEX_ENTRY;
        put32(entry, (uint32_t)hashes[i]);
        put64(entry + 4, (uint64_t)phys);
        put32(entry + 12, (uint32_t)time_diff);
        put32(entry + 16, (uint32_t)previous);
        slot_ats[i] = slot_at;
        index->index_count++;
    }
    index->end_timestamp = store_time;
    index->end_phys = phys;
    uint8_t *header = index->buffer;
    put64(header, (uint64_t)index->begin_timestamp);
    put64(header + 8, (uint64_t)index->end_timestamp);
    put64(header + 16, (uint64_t)index->begin_phys);
    put64(header + 24, (uint64_t)index->end_phys);
    put32(header + 32, (uint32_t)index->slot_count);
    put32(header + 36, (uint32_t)index->index_count);
    __asm__ __volatile__("" ::: "memory"); /* a kill here orphans entries, cuts no chain */
    for (Py_ssize_t i = 0; i < count; i++)
        put32(index->buffer + slot_ats[i], (uint32_t)(first + (int32_t)i));
}

static int writable(PyObject *object, Py_buffer *view) {
    if (object == Py_None) {
        view->obj = NULL;
        return 1;
    }
    return PyObject_GetBuffer(object, view, PyBUF_WRITABLE) == 0;
}

static void release_view(Py_buffer *view) {
    if (view->obj) PyBuffer_Release(view);
}

/* the index file's header, when all ``keys`` more entries fit; 0 when they do not.
 * ``view`` is the part of the file with disk blocks (a write to a hole on a full disk is a
 * SIGBUS): entries past its end are the Python path's, which allocates more first. */
static int open_index(Index *index, const Py_buffer *view, int64_t slot_num, int64_t index_num,
                      Py_ssize_t keys) {
    index->buffer = view->buf;
    index->slot_num = slot_num;
    index->index_num = index_num;
    int64_t entries_at = INDEX_HEADER + slot_num * INDEX_SLOT;
    if (slot_num <= 0 || view->len < entries_at) return 0;
    int64_t allocated = (view->len - entries_at) / INDEX_ENTRY;
    if (allocated < index_num) index_num = allocated;
    index->begin_timestamp = get64(index->buffer);
    index->end_timestamp = get64(index->buffer + 8);
    index->begin_phys = get64(index->buffer + 16);
    index->end_phys = get64(index->buffer + 24);
    index->slot_count = get32(index->buffer + 32);
    index->index_count = get32(index->buffer + 36);
    if (index->index_count == 0) index->index_count = 1; /* entry 0 ends every chain */
    return index->index_count > 0 && index->index_count + keys <= index_num;
}

/* the fixed part of a queue's appends: one tuple, made once per queue */
enum {
    Q_TOPIC, Q_ENCODED_TOPIC, Q_QUEUE_ID, Q_TOPIC_CRC, Q_STORE_HOST, Q_MAX_BODY, Q_SLOT_NUM,
    Q_INDEX_NUM, Q_TAGS_CODE_OF, QUEUE_FIELDS
};

enum {
    A_QUEUE, A_MESSAGES, A_QUEUE_OFFSET, A_COMMIT_LOG, A_POSITION, A_FILE_START,
    A_STORE_TIME, A_CONSUME_QUEUE, A_ENTRY_POSITION, A_INDEX, ARGUMENTS
};

PyDoc_STRVAR(append_doc,
"append(queue, messages, queue_offset, commit_log, position, file_start, store_time,\n"
"       consume_queue, entry_position, index)\n"
"--\n\n"
"Write ``messages`` (a list, all of one queue) as records from ``position`` of the\n"
"CommitLog file mapping ``commit_log``, whose first byte is global offset ``file_start``,\n"
"with queue offsets from ``queue_offset``; their consume-queue entries from\n"
"``entry_position`` of the mapping ``consume_queue``; and their keys into the index file\n"
"mapping ``index`` (its part with disk blocks: keys past it are left to the Python\n"
"path). Either mapping may be None. ``queue`` is the tuple (topic,\n"
"encoded_topic, queue_id, topic_crc, store_host, max_body, slot_num, index_num,\n"
"tags_code_of): ``topic_crc`` is the CRC of ``topic#``, ``tags_code_of`` gives the tags\n"
"code of a TAGS value that is not ASCII.\n\n"
"Returns (CommitLog offsets, position after the last record, index entries added); or\n"
"None, with nothing written, when a message or the room left is not the usual case.");

static PyObject *append(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != ARGUMENTS) {
        PyErr_Format(PyExc_TypeError, "append() takes %d arguments (%zd given)", ARGUMENTS,
                     nargs);
        return NULL;
    }
    PyObject *queue = args[A_QUEUE], *messages = args[A_MESSAGES];
    if (!PyTuple_Check(queue) || PyTuple_GET_SIZE(queue) != QUEUE_FIELDS) {
        PyErr_Format(PyExc_TypeError, "append(): queue is a tuple of %d fields", QUEUE_FIELDS);
        return NULL;
    }
    PyObject *topic = PyTuple_GET_ITEM(queue, Q_TOPIC);
    PyObject *encoded_topic = PyTuple_GET_ITEM(queue, Q_ENCODED_TOPIC);
    PyObject *store_host = PyTuple_GET_ITEM(queue, Q_STORE_HOST);
    PyObject *tags_code_of = PyTuple_GET_ITEM(queue, Q_TAGS_CODE_OF);
    if (!PyList_Check(messages) || !PyUnicode_Check(topic) || !PyBytes_Check(encoded_topic) ||
        !PyBytes_Check(store_host) || !PyCallable_Check(tags_code_of)) {
        PyErr_SetString(PyExc_TypeError,
                        "append(): messages is a list, topic a str, encoded_topic and"
                        " store_host bytes, tags_code_of a callable");
        return NULL;
    }
    int64_t queue_id = PyLong_AsLongLong(PyTuple_GET_ITEM(queue, Q_QUEUE_ID));
    int64_t queue_offset = PyLong_AsLongLong(args[A_QUEUE_OFFSET]);
    Py_ssize_t position = PyLong_AsSsize_t(args[A_POSITION]);
    int64_t file_start = PyLong_AsLongLong(args[A_FILE_START]);
    int64_t store_time = PyLong_AsLongLong(args[A_STORE_TIME]);
    Py_ssize_t max_body = PyLong_AsSsize_t(PyTuple_GET_ITEM(queue, Q_MAX_BODY));
    Py_ssize_t entry_position = PyLong_AsSsize_t(args[A_ENTRY_POSITION]);
    int64_t slot_num = PyLong_AsLongLong(PyTuple_GET_ITEM(queue, Q_SLOT_NUM));
    int64_t index_num = PyLong_AsLongLong(PyTuple_GET_ITEM(queue, Q_INDEX_NUM));
    uint32_t topic_crc =
        (uint32_t)PyLong_AsUnsignedLongMask(PyTuple_GET_ITEM(queue, Q_TOPIC_CRC));
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(messages);
    Py_ssize_t topic_length = PyBytes_GET_SIZE(encoded_topic);
    if (count == 0 || topic_length == 0 || topic_length > MAX_V1_TOPIC ||
        PyBytes_GET_SIZE(store_host) != 8 || position < 0 || entry_position < 0)
        Py_RETURN_NONE;

    Py_buffer commit_log, consume_queue, index_view;
    consume_queue.obj = index_view.obj = NULL;
    if (PyObject_GetBuffer(args[A_COMMIT_LOG], &commit_log, PyBUF_WRITABLE) != 0) return NULL;
    PyObject *result = NULL;
    Message *taken = NULL;
    int32_t *hashes = NULL;
    int64_t *slot_ats = NULL;
    if (!writable(args[A_CONSUME_QUEUE], &consume_queue) ||
        !writable(args[A_INDEX], &index_view))
        goto done;
    taken = PyMem_Calloc((size_t)count, sizeof(Message));
    if (taken == NULL) {
        PyErr_NoMemory();
        goto done;
    }

    /* every message read and checked, and the room counted, before the first write */
    Py_ssize_t total = 0, keys_total = 0, most_keys = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!take(PyList_GET_ITEM(messages, i), topic, queue_id, topic_length, max_body,
                  tags_code_of, &taken[i]))
            goto not_usual;
        total += taken[i].size;
        if (index_view.obj) {
            Py_ssize_t keys = key_count(&taken[i]);
            keys_total += keys;
            if (keys > most_keys) most_keys = keys;
        }
    }
    if (position + total + BLANK_SIZE > commit_log.len) goto not_usual; /* the file rolls */
    if (consume_queue.obj && entry_position + count * CQ_ENTRY > consume_queue.len)
        goto not_usual; /* the queue's file rolls */
    Index index = {0};
    if (index_view.obj && keys_total) {
        if (!open_index(&index, &index_view, slot_num, index_num, keys_total))
            goto not_usual; /* a new index file is due */
        hashes = PyMem_Malloc((size_t)most_keys * sizeof(int32_t));
        slot_ats = PyMem_Malloc((size_t)most_keys * sizeof(int64_t));
        if (hashes == NULL || slot_ats == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    /* the answer is made before the first write: a failure past here cannot happen */
    PyObject *offsets = PyList_New(count);
    if (offsets == NULL) goto done;
    for (Py_ssize_t i = 0, at = position; i < count; at += taken[i].size, i++) {
        PyObject *offset = PyLong_FromLongLong(file_start + at);
        if (offset == NULL) {
            Py_DECREF(offsets);
            goto done;
        }
        PyList_SET_ITEM(offsets, i, offset);
    }
    PyObject *answer = Py_BuildValue("(Onn)", offsets, position + total, keys_total);
    Py_DECREF(offsets);
    if (answer == NULL) goto done;

    const uint8_t *topic_bytes = (const uint8_t *)PyBytes_AS_STRING(encoded_topic);
    const uint8_t *host = (const uint8_t *)PyBytes_AS_STRING(store_host);
    uint8_t *entry = consume_queue.obj ? (uint8_t *)consume_queue.buf + entry_position : NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Message *message = &taken[i];
        int64_t phys = file_start + position;
        write_record((uint8_t *)commit_log.buf + position, message, topic_bytes, topic_length,
                     queue_id, queue_offset + i, phys, store_time, host);
        if (entry) {
            put64(entry, (uint64_t)phys);
            put32(entry + 8, (uint32_t)message->size);
            put64(entry + 12, (uint64_t)message->tags_code);
            entry += CQ_ENTRY;
        }
        if (index.buffer && (message->uniq || message->keys)) {
            Py_ssize_t keys = key_hashes(message, topic_crc, hashes);
            if (keys) index_record(&index, hashes, keys, phys, store_time, slot_ats);
        }
        position += message->size;
    }
    result = answer;
    goto done;

not_usual:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(hashes);
    PyMem_Free(slot_ats);
    if (taken) release(taken, count);
    PyBuffer_Release(&commit_log);
    release_view(&consume_queue);
    release_view(&index_view);
    return result;
}

/* --- a record's DispatchRequest, read in place (record_requests.py is the reference) - */

#define MAGIC_V2 ((int32_t)0xDAA320AB)
#define BORNHOST_V6 0x10
#define STOREHOST_V6 0x20
#define SMALLEST_RECORD 94 /* the fixed fields and two IPv4 hosts */

typedef struct {
    const uint8_t *value; /* the last non-empty value of a name, as parse_properties keeps */
    Py_ssize_t length;
} Property;

static int all_ascii(const uint8_t *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] & 0x80) return 0;
    return 1;
}

/* TAGS, KEYS and UNIQ_KEY: split on 0x02, name up to the first 0x01, empty ones skipped */
static void wanted_properties(const uint8_t *at, const uint8_t *end, Property *tags,
                              Property *keys, Property *uniq) {
    for (;;) {
        const uint8_t *pair_end = memchr(at, 0x02, (size_t)(end - at));
        if (pair_end == NULL) pair_end = end;
        const uint8_t *split = memchr(at, 0x01, (size_t)(pair_end - at));
        if (split != NULL && split + 1 < pair_end) {
            Property found = {split + 1, pair_end - split - 1};
            Py_ssize_t name_length = split - at;
            if (is_name(at, name_length, "TAGS")) *tags = found;
            else if (is_name(at, name_length, "KEYS")) *keys = found;
            else if (is_name(at, name_length, "UNIQ_KEY")) *uniq = found;
        }
        if (pair_end == end) return;
        at = pair_end + 1;
    }
}

/* a str of UTF-8 bytes, or Py_None for none; NULL with an exception on failure */
static PyObject *text_or_none(const Property *property) {
    if (property->value == NULL) return Py_NewRef(Py_None);
    return PyUnicode_DecodeUTF8((const char *)property->value, property->length, NULL);
}

PyDoc_STRVAR(dispatch_request_doc,
"dispatch_request(buffer, position, check_crc, request_type, tags_code_of)\n"
"--\n\n"
"``request_type(topic, queue_id, commit_log_offset, size, tags_code, store_timestamp,\n"
"queue_offset, keys, uniq_key, sys_flag, prepared_transaction_offset)`` of the record at\n"
"``position`` of ``buffer``, its fields read in place; ``tags_code_of`` gives the tags\n"
"code of a TAGS value that is not ASCII. None when the bytes there are not a whole,\n"
"valid record (with ``check_crc``, its body CRC too): the Python reader says why.");

static PyObject *dispatch_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "dispatch_request() takes 5 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t position = PyLong_AsSsize_t(args[1]);
    if (position == -1 && PyErr_Occurred()) return NULL;
    int check_crc = PyObject_IsTrue(args[2]);
    if (check_crc < 0) return NULL;
    PyObject *request_type = args[3], *tags_code_of = args[4];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) != 0) return NULL;
    PyObject *result = NULL;
    const uint8_t *base = view.buf;
    if (position < 0 || view.len - position < 48) goto not_a_record;
    const uint8_t *record = base + position;
    int32_t size = get32(record), magic = get32(record + 4);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || size < SMALLEST_RECORD ||
        size > view.len - position)
        goto not_a_record;
    const uint8_t *end = record + size;
    int32_t sys_flag = get32(record + 36);
    const uint8_t *at = record + 48 + ((sys_flag & BORNHOST_V6) ? 20 : 8);
    int64_t store_timestamp = get64(at);
    at += 8 + ((sys_flag & STOREHOST_V6) ? 20 : 8);
    if (end - at < 16) goto not_a_record; /* reconsume times, prepared offset, body length */
    int64_t prepared = get64(at + 4);
    int32_t body_length = get32(at + 12);
    const uint8_t *body = at + 16;
    if (body_length < 0 || end - body < (Py_ssize_t)body_length + 1) goto not_a_record;
    at = body + body_length;
    Py_ssize_t topic_length;
    if (magic == MAGIC_V2) {
        if (end - at < 2) goto not_a_record;
        topic_length = (int16_t)((uint16_t)at[0] << 8 | at[1]);
        at += 2;
    } else {
        topic_length = *at++;
    }
    const uint8_t *topic = at;
    if (topic_length < 0 || end - at < topic_length + 2) goto not_a_record;
    at += topic_length;
    Py_ssize_t properties_length = (int16_t)((uint16_t)at[0] << 8 | at[1]);
    at += 2;
    if (properties_length < 0 || end - at != properties_length) goto not_a_record;
    if (check_crc &&
        (crc32_continue(0, body, body_length) & 0x7FFFFFFFu) != (uint32_t)get32(record + 8))
        goto not_a_record;
    /* decode_record refuses properties that are not UTF-8 anywhere, not only the wanted */
    if (!all_ascii(at, properties_length)) {
        PyObject *checked = PyUnicode_DecodeUTF8((const char *)at, properties_length, NULL);
        if (checked == NULL) {
            PyErr_Clear();
            goto not_a_record;
        }
        Py_DECREF(checked);
    }
    PyObject *topic_text = PyUnicode_DecodeUTF8((const char *)topic, topic_length, NULL);
    if (topic_text == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto done;
        PyErr_Clear();
        goto not_a_record;
    }
    Property tags = {NULL, 0}, keys = {NULL, 0}, uniq = {NULL, 0};
    if (properties_length) wanted_properties(at, end, &tags, &keys, &uniq);
    int64_t code = 0;
    if (tags.value != NULL) {
        if (all_ascii(tags.value, tags.length)) {
            uint32_t hash = 0; /* Java's String.hashCode: for ASCII, one code unit a byte */
            for (Py_ssize_t i = 0; i < tags.length; i++) hash = hash * 31u + tags.value[i];
            code = (int32_t)hash;
        } else {
            PyObject *raw = PyBytes_FromStringAndSize((const char *)tags.value, tags.length);
            PyObject *number = raw ? PyObject_CallOneArg(tags_code_of, raw) : NULL;
            Py_XDECREF(raw);
            code = number ? PyLong_AsLongLong(number) : -1;
            Py_XDECREF(number);
            if (code == -1 && PyErr_Occurred()) {
                Py_DECREF(topic_text);
                goto done;
            }
        }
    }
    PyObject *fields[11] = {topic_text,
                            PyLong_FromLong(get32(record + 12)),
                            PyLong_FromLongLong(get64(record + 28)),
                            PyLong_FromLong(size),
                            PyLong_FromLongLong(code),
                            PyLong_FromLongLong(store_timestamp),
                            PyLong_FromLongLong(get64(record + 20)),
                            text_or_none(&keys),
                            text_or_none(&uniq),
                            PyLong_FromLong(sys_flag),
                            PyLong_FromLongLong(prepared)};
    int made = 1;
    for (int i = 0; i < 11; i++) made &= fields[i] != NULL;
    if (made) result = PyObject_Vectorcall(request_type, fields, 11, NULL);
    for (int i = 0; i < 11; i++) Py_XDECREF(fields[i]);
    goto done;

not_a_record:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(crc32_doc, "crc32(data, value=0)\n--\n\nzlib.crc32, as this module computes it.");

static PyObject *crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32() takes data and an optional start value");
        return NULL;
    }
    uint32_t start = nargs == 2 ? (uint32_t)PyLong_AsUnsignedLongMask(args[1]) : 0;
    if (PyErr_Occurred()) return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) != 0) return NULL;
    uint32_t crc = crc32_continue(start, data.buf, data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"append", (PyCFunction)(void (*)(void))append, METH_FASTCALL, append_doc},
    {"crc32", (PyCFunction)(void (*)(void))crc32, METH_FASTCALL, crc32_doc},
    {"dispatch_request", (PyCFunction)(void (*)(void))dispatch_request, METH_FASTCALL,
     dispatch_request_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_append",
    "The mmap store's append, compiled (the store's Python path is the reference).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__append(void) {
    crc_init();
#ifdef HAVE_CARRYLESS
    __builtin_cpu_init();
    carryless = __builtin_cpu_supports("pclmul");
#endif
#define INTERN(name) if ((s_##name = PyUnicode_InternFromString(#name)) == NULL) return NULL
    INTERN(topic);
    INTERN(queue_id);
    INTERN(body);
    INTERN(properties);
    INTERN(flag);
    INTERN(sys_flag);
    INTERN(born_timestamp);
    INTERN(born_host);
    INTERN(reconsume_times);
    INTERN(prepared_transaction_offset);
    INTERN(tags_code);
#undef INTERN
    PyObject *module = PyModule_Create(&module_definition);
    /* the calling convention of append(): the store uses a build only if it matches */
    if (module != NULL && PyModule_AddIntConstant(module, "INTERFACE", 2) != 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
