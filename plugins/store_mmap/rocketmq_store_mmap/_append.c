/* The mmap store's append, compiled: one call writes a run of messages of one queue as
 * CommitLog records, their consume-queue entries and their index entries.
 *
 * It takes only the usual case (V1 records with IPv4 hosts, everything fitting the
 * current files) and answers None, having written nothing, for anything else; the
 * store's Python path then does the same work, and is the reference this code is
 * tested against byte for byte (tests/test_append_kernel.py). Layouts: docs/spec/STORE.md
 * and docs/spec/MESSAGE.md; the index rules are IndexFile.put's in index.py.
 *
 * append_one is a single put whole (MmapStore.append): the store's checks before the
 * writing and its bookkeeping after it, as store.py's _put_compiled and _append_compiled
 * do them, held to the Python path by the same tests.
 *
 * replica_dispatch is a slave's side: the consume-queue and index entries of records its
 * master's bytes completed, as store.py's _dispatch_replicated writes them (the same
 * tests hold two slaves of one master to each other, one dispatching in Python).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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
    const uint8_t *wait;                     /* the first WAIT value, or NULL */
    Py_ssize_t wait_length;
    Py_ssize_t size;                         /* of its record */
} Message;

/* --- attributes, read and written in place for a __slots__ class -------------------- */

/* An attribute by name. For a type whose attribute is a plain slot (a member descriptor,
 * as ``__slots__`` and ``dataclass(slots=True)`` make) it is read and written at its
 * offset in the object, as the descriptor itself would; for any other object through
 * getattr/setattr. The offset is looked up once per type, and again once the type
 * changes (its version tag, which CPython resets on any change to it or its bases). */
typedef struct {
    const char *text;
    PyObject *name;        /* interned at import */
    PyTypeObject *type;    /* the type ``offset`` is for (a strong reference), or NULL */
    unsigned int version;  /* its tp_version_tag then; 0: look up again each time */
    Py_ssize_t offset;     /* -1: not a writable object slot of ``type`` */
} Field;

static void field_resolve(Field *field, PyTypeObject *type) {
    Py_XSETREF(field->type, (PyTypeObject *)Py_NewRef((PyObject *)type));
    field->offset = -1;
    PyObject *descriptor = _PyType_Lookup(type, field->name); /* borrowed, raises nothing */
    field->version = type->tp_version_tag; /* valid from the lookup on, until a change */
    if (descriptor != NULL && Py_IS_TYPE(descriptor, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY))
            field->offset = member->offset;
    }
}

/* a new reference, or NULL (nothing raised) when the object has no such attribute */
static inline int field_current(const Field *field, PyTypeObject *type) {
    return type == field->type && field->version != 0 && type->tp_version_tag == field->version;
}

static inline PyObject *get_field(Field *field, PyObject *object) {
    if (!field_current(field, Py_TYPE(object))) field_resolve(field, Py_TYPE(object));
    if (field->offset >= 0) return Py_XNewRef(*(PyObject **)((char *)object + field->offset));
    PyObject *value = PyObject_GetAttr(object, field->name);
    if (value == NULL) PyErr_Clear();
    return value;
}

/* steals ``value``; -1 with an exception on failure */
static inline int set_field(Field *field, PyObject *object, PyObject *value) {
    if (value == NULL) return -1;
    if (!field_current(field, Py_TYPE(object))) field_resolve(field, Py_TYPE(object));
    if (field->offset >= 0) {
        Py_XSETREF(*(PyObject **)((char *)object + field->offset), value);
        return 0;
    }
    int failed = PyObject_SetAttr(object, field->name, value);
    Py_DECREF(value);
    return failed;
}

#define FIELD(name) static Field f_##name = {#name, NULL, NULL, 0, -1}
FIELD(topic);
FIELD(queue_id);
FIELD(body);
FIELD(properties);
FIELD(flag);
FIELD(sys_flag);
FIELD(born_timestamp);
FIELD(born_host);
FIELD(reconsume_times);
FIELD(prepared_transaction_offset);
FIELD(tags_code);

/* an int attribute within [low, high]; 0 when it is not one (nothing raised) */
static int int_attribute(PyObject *object, Field *name, int64_t low, int64_t high,
                         int64_t *out) {
    PyObject *value = get_field(name, object);
    if (value == NULL) return 0;
    int overflow = 0;
    long long number = PyLong_Check(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
    int ok = PyLong_Check(value) && !overflow && !(number == -1 && PyErr_Occurred()) &&
             number >= low && number <= high;
    if (!ok && PyErr_Occurred()) PyErr_Clear();
    Py_DECREF(value);
    if (ok) *out = number;
    return ok;
}

static PyObject *bytes_attribute(PyObject *object, Field *name) {
    PyObject *value = get_field(name, object);
    if (value == NULL) return NULL;
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
    message->uniq = message->keys = message->wait = NULL;
    message->wait_length = 0;
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
        } else if (split && message->wait == NULL && is_name(at, name_length, "WAIT")) {
            message->wait = value; /* the first, as rules.waits_for_flush reads it */
            message->wait_length = value_length;
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
}

/* 1 when ``message`` is one this kernel writes, its fields read into ``out``; 0 when not */
static int take(PyObject *message, PyObject *topic, int64_t queue_id, Py_ssize_t topic_length,
                Py_ssize_t max_body, PyObject *tags_code_of, Message *out) {
    PyObject *value = get_field(&f_topic, message);
    if (value == NULL) return 0;
    int same_topic = value == topic || (PyUnicode_Check(value) &&
                                        PyUnicode_Compare(value, topic) == 0);
    PyErr_Clear();
    Py_DECREF(value);
    int64_t message_queue;
    if (!same_topic || !int_attribute(message, &f_queue_id, 0, 0x7FFFFFFF, &message_queue) ||
        message_queue != queue_id)
        return 0;
    if ((out->body = bytes_attribute(message, &f_body)) == NULL ||
        (out->properties = bytes_attribute(message, &f_properties)) == NULL ||
        (out->born_host = bytes_attribute(message, &f_born_host)) == NULL)
        return 0;
    Py_ssize_t body_length = PyBytes_GET_SIZE(out->body);
    Py_ssize_t properties_length = PyBytes_GET_SIZE(out->properties);
    if (body_length > max_body || properties_length > MAX_PROPERTIES ||
        PyBytes_GET_SIZE(out->born_host) != 8)
        return 0;
    if (!int_attribute(message, &f_flag, INT32_MIN, INT32_MAX, &out->flag) ||
        !int_attribute(message, &f_sys_flag, INT32_MIN, INT32_MAX, &out->sys_flag) ||
        (out->sys_flag & (TRANSACTION_PREPARED | HOSTS_V6)) ||
        !int_attribute(message, &f_born_timestamp, INT64_MIN, INT64_MAX, &out->born_timestamp) ||
        !int_attribute(message, &f_reconsume_times, INT32_MIN, INT32_MAX, &out->reconsume_times) ||
        !int_attribute(message, &f_prepared_transaction_offset, INT64_MIN, INT64_MAX,
                       &out->prepared_offset))
        return 0;
    value = get_field(&f_tags_code, message);
    if (value == NULL) return 0;
    int has_tags_code = value != Py_None;
    Py_DECREF(value);
    if (has_tags_code &&
        !int_attribute(message, &f_tags_code, INT64_MIN, INT64_MAX, &out->tags_code))
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

#define SMALL_KEYS 16 /* a message with at most this many keys needs no allocation */

/* A run of messages of one queue, read and checked and the room for it counted before
 * the first byte is written: writing it cannot fail. ``run_release`` after, always. */
typedef struct {
    Message *taken;
    Message one; /* ``taken`` for a single message */
    Py_ssize_t count, total, keys_total;
    Py_buffer commit_log, consume_queue, index_view;
    Index index;
    int32_t *hashes, small_hashes[SMALL_KEYS];
    int64_t *slot_ats, small_slot_ats[SMALL_KEYS];
    PyObject *encoded_topic, *store_host; /* borrowed from the queue tuple */
    int64_t queue_id, queue_offset, file_start, store_time;
    uint32_t topic_crc;
    Py_ssize_t position, entry_position;
} Run;

/* 1: ready to write; 0: not the usual case (nothing taken); -1: an exception. The
 * messages are ``list``'s items, or ``single`` when ``list`` is NULL. */
static int run_prepare(Run *run, PyObject *queue, PyObject *list, PyObject *single,
                       Py_ssize_t count, int64_t queue_offset, PyObject *commit_log,
                       Py_ssize_t position, int64_t file_start, int64_t store_time,
                       PyObject *consume_queue, Py_ssize_t entry_position, PyObject *index) {
    memset(run, 0, sizeof(*run));
    if (!PyTuple_Check(queue) || PyTuple_GET_SIZE(queue) != QUEUE_FIELDS) {
        PyErr_Format(PyExc_TypeError, "append(): queue is a tuple of %d fields", QUEUE_FIELDS);
        return -1;
    }
    PyObject *topic = PyTuple_GET_ITEM(queue, Q_TOPIC);
    PyObject *encoded_topic = run->encoded_topic = PyTuple_GET_ITEM(queue, Q_ENCODED_TOPIC);
    PyObject *store_host = run->store_host = PyTuple_GET_ITEM(queue, Q_STORE_HOST);
    PyObject *tags_code_of = PyTuple_GET_ITEM(queue, Q_TAGS_CODE_OF);
    if ((list != NULL && !PyList_Check(list)) || !PyUnicode_Check(topic) ||
        !PyBytes_Check(encoded_topic) || !PyBytes_Check(store_host) ||
        !PyCallable_Check(tags_code_of)) {
        PyErr_SetString(PyExc_TypeError,
                        "append(): messages is a list, topic a str, encoded_topic and"
                        " store_host bytes, tags_code_of a callable");
        return -1;
    }
    int64_t queue_id = run->queue_id = PyLong_AsLongLong(PyTuple_GET_ITEM(queue, Q_QUEUE_ID));
    Py_ssize_t max_body = PyLong_AsSsize_t(PyTuple_GET_ITEM(queue, Q_MAX_BODY));
    int64_t slot_num = PyLong_AsLongLong(PyTuple_GET_ITEM(queue, Q_SLOT_NUM));
    int64_t index_num = PyLong_AsLongLong(PyTuple_GET_ITEM(queue, Q_INDEX_NUM));
    run->topic_crc = (uint32_t)PyLong_AsUnsignedLongMask(PyTuple_GET_ITEM(queue, Q_TOPIC_CRC));
    if (PyErr_Occurred()) return -1;
    run->queue_offset = queue_offset;
    run->file_start = file_start;
    run->store_time = store_time;
    run->position = position;
    run->entry_position = entry_position;
    Py_ssize_t topic_length = PyBytes_GET_SIZE(encoded_topic);
    if (count == 0 || topic_length == 0 || topic_length > MAX_V1_TOPIC ||
        PyBytes_GET_SIZE(store_host) != 8 || position < 0 || entry_position < 0)
        return 0;
    if (PyObject_GetBuffer(commit_log, &run->commit_log, PyBUF_WRITABLE) != 0) return -1;
    if (!writable(consume_queue, &run->consume_queue) || !writable(index, &run->index_view))
        return -1;
    if (count == 1) {
        run->taken = &run->one;
    } else if ((run->taken = PyMem_Calloc((size_t)count, sizeof(Message))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t most_keys = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (list != NULL && i >= PyList_GET_SIZE(list)) return 0; /* changed meanwhile */
        PyObject *message = list != NULL ? PyList_GET_ITEM(list, i) : single;
        run->count = i + 1; /* taken so far: what run_release lets go of */
        if (!take(message, topic, queue_id, topic_length, max_body, tags_code_of,
                  &run->taken[i]))
            return 0;
        run->total += run->taken[i].size;
        if (run->index_view.obj) {
            Py_ssize_t keys = key_count(&run->taken[i]);
            run->keys_total += keys;
            if (keys > most_keys) most_keys = keys;
        }
    }
    if (position + run->total + BLANK_SIZE > run->commit_log.len) return 0; /* the file rolls */
    if (run->consume_queue.obj && entry_position + count * CQ_ENTRY > run->consume_queue.len)
        return 0; /* the queue's file rolls */
    if (run->index_view.obj && run->keys_total) {
        if (!open_index(&run->index, &run->index_view, slot_num, index_num, run->keys_total))
            return 0; /* a new index file is due */
        if (most_keys <= SMALL_KEYS) {
            run->hashes = run->small_hashes;
            run->slot_ats = run->small_slot_ats;
        } else {
            run->hashes = PyMem_Malloc((size_t)most_keys * sizeof(int32_t));
            run->slot_ats = PyMem_Malloc((size_t)most_keys * sizeof(int64_t));
            if (run->hashes == NULL || run->slot_ats == NULL) {
                PyErr_NoMemory();
                return -1;
            }
        }
    }
    return 1;
}

/* Ask for the index slots the run's keys land in before writing its records: each is a
 * random 4-byte slot of a table of megabytes, most often a cache and TLB miss, which the
 * CPU then takes on all at once, under the records' copying, instead of one by one. */
static void prefetch_slots(Run *run) {
    if (!run->index.buffer || run->count < 2) return; /* one record: nothing to overlap */
    for (Py_ssize_t i = 0; i < run->count; i++) {
        const Message *message = &run->taken[i];
        if (!message->uniq && !message->keys) continue;
        Py_ssize_t keys = key_hashes(message, run->topic_crc, run->hashes);
        for (Py_ssize_t k = 0; k < keys; k++)
            __builtin_prefetch(run->index.buffer + INDEX_HEADER +
                                   (int64_t)run->hashes[k] % run->index.slot_num * INDEX_SLOT,
                               1);
    }
}

/* records, consume-queue entries and index entries of a prepared run */
static void run_write(Run *run) {
    prefetch_slots(run);
    const uint8_t *topic_bytes = (const uint8_t *)PyBytes_AS_STRING(run->encoded_topic);
    Py_ssize_t topic_length = PyBytes_GET_SIZE(run->encoded_topic);
    const uint8_t *host = (const uint8_t *)PyBytes_AS_STRING(run->store_host);
    uint8_t *entry = run->consume_queue.obj
                         ? (uint8_t *)run->consume_queue.buf + run->entry_position
                         : NULL;
    Py_ssize_t position = run->position;
    for (Py_ssize_t i = 0; i < run->count; i++) {
        Message *message = &run->taken[i];
        int64_t phys = run->file_start + position;
        write_record((uint8_t *)run->commit_log.buf + position, message, topic_bytes,
                     topic_length, run->queue_id, run->queue_offset + i, phys, run->store_time,
                     host);
        if (entry) {
            put64(entry, (uint64_t)phys);
            put32(entry + 8, (uint32_t)message->size);
            put64(entry + 12, (uint64_t)message->tags_code);
            entry += CQ_ENTRY;
        }
        if (run->index.buffer && (message->uniq || message->keys)) {
            Py_ssize_t keys = key_hashes(message, run->topic_crc, run->hashes);
            if (keys)
                index_record(&run->index, run->hashes, keys, phys, run->store_time,
                             run->slot_ats);
        }
        position += message->size;
    }
}

static void run_release(Run *run) {
    if (run->hashes != run->small_hashes) PyMem_Free(run->hashes);
    if (run->slot_ats != run->small_slot_ats) PyMem_Free(run->slot_ats);
    if (run->taken) {
        release(run->taken, run->count);
        if (run->taken != &run->one) PyMem_Free(run->taken);
    }
    release_view(&run->commit_log);
    release_view(&run->consume_queue);
    release_view(&run->index_view);
}

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
    PyObject *messages = args[A_MESSAGES];
    Py_ssize_t count = PyList_Check(messages) ? PyList_GET_SIZE(messages) : 0;
    int64_t queue_offset = PyLong_AsLongLong(args[A_QUEUE_OFFSET]);
    Py_ssize_t position = PyLong_AsSsize_t(args[A_POSITION]);
    int64_t file_start = PyLong_AsLongLong(args[A_FILE_START]);
    int64_t store_time = PyLong_AsLongLong(args[A_STORE_TIME]);
    Py_ssize_t entry_position = PyLong_AsSsize_t(args[A_ENTRY_POSITION]);
    if (PyErr_Occurred()) return NULL;
    Run run;
    int ready = run_prepare(&run, args[A_QUEUE], messages, NULL, count, queue_offset,
                            args[A_COMMIT_LOG], position, file_start, store_time,
                            args[A_CONSUME_QUEUE], entry_position, args[A_INDEX]);
    PyObject *answer = NULL;
    if (ready <= 0) {
        if (ready == 0) answer = Py_NewRef(Py_None);
        goto done;
    }
    /* the answer is made before the first write: a failure past here cannot happen */
    PyObject *offsets = PyList_New(count);
    if (offsets == NULL) goto done;
    for (Py_ssize_t i = 0, at = position; i < count; at += run.taken[i].size, i++) {
        PyObject *offset = PyLong_FromLongLong(file_start + at);
        if (offset == NULL) {
            Py_DECREF(offsets);
            goto done;
        }
        PyList_SET_ITEM(offsets, i, offset);
    }
    answer = Py_BuildValue("(Onn)", offsets, position + run.total, run.keys_total);
    Py_DECREF(offsets);
    if (answer != NULL) run_write(&run);
done:
    run_release(&run);
    return answer;
}

/* --- one put, whole: the store's checks before the kernel and its bookkeeping after -- */

/* the store's attributes append_one reads and writes (store.py is the reference) */
#define NAMED(variable, name) static Field f_##variable = {name, NULL, NULL, 0, -1}
NAMED(refusing, "refusing");
NAMED(clock, "clock");
NAMED(last, "last");
NAMED(log_list, "files");     /* the CommitLog's MappedFileQueue.files: a list */
NAMED(queue_files, "files");  /* ConsumeQueue.files: a MappedFileQueue */
NAMED(queue_list, "files");   /* its list */
NAMED(index_list, "files");   /* IndexService.files: a list */
NAMED(allocated_view, "allocated_view");
NAMED(room, "room");
NAMED(dirty, "dirty");
NAMED(buffer, "buffer");
NAMED(wrote, "wrote");
NAMED(start, "start");
NAMED(touched, "touched");
NAMED(allocated, "allocated");
NAMED(used, "used");
NAMED(next_offset, "next_offset");
NAMED(append_context, "append_context");
NAMED(puts, "_puts");
/* an index file's and the index service's, for a replica's dispatch */
NAMED(slot_num, "slot_num");
NAMED(index_num, "index_num");
NAMED(indexed_below, "indexed_below");
/* PutResult's fields, in their order */
NAMED(status, "status");
NAMED(commit_log_offset, "commit_log_offset");
NAMED(queue_offset, "queue_offset");
NAMED(commit_log_offsets, "commit_log_offsets");
NAMED(store_timestamp, "store_timestamp");
NAMED(remark, "remark");
NAMED(store_host, "store_host");
NAMED(flush_to, "flush_to");
#undef NAMED

static PyObject *s_append_context, *s_fill_ahead, *s_top_up, *s_next, *s_wrote_compiled;

static Field *all_fields[] = {
    &f_topic, &f_queue_id, &f_body, &f_properties, &f_flag, &f_sys_flag, &f_born_timestamp,
    &f_born_host, &f_reconsume_times, &f_prepared_transaction_offset, &f_tags_code,
    &f_refusing, &f_clock, &f_last, &f_log_list, &f_queue_files, &f_queue_list, &f_index_list,
    &f_allocated_view, &f_room, &f_dirty, &f_buffer, &f_wrote, &f_start, &f_touched,
    &f_allocated, &f_used, &f_next_offset, &f_append_context, &f_puts, &f_status,
    &f_commit_log_offset, &f_queue_offset, &f_commit_log_offsets, &f_store_timestamp,
    &f_remark, &f_store_host, &f_flush_to, &f_slot_num, &f_index_num, &f_indexed_below,
};

/* the third argument of append_one: what of the store stays while it is open, and the
 * constants it needs (store.py's _append_one_state) */
enum {
    S_PUT_RESULT, S_PUT_OK, S_STORE_CLOCK, S_TOUCH_STEP, S_TOUCH_LEAD, S_INDEX_LOW_WATER, S_DISK,
    S_QUEUES, S_LOG_FILES, S_INDEX, S_WAITS, S_WRITES_POSITIONS, S_WRITES_INDEX, S_OTHERS,
    STATE_FIELDS
};

#define HELD 48

typedef struct {
    PyObject *objects[HELD];
    int count;
} Held;

/* ``object`` (a new reference, or NULL) kept until ``let_go`` */
static inline PyObject *hold(Held *held, PyObject *object) {
    if (object != NULL && held->count == HELD) { /* more than append_one ever holds */
        Py_DECREF(object);
        PyErr_SetString(PyExc_SystemError, "append_one(): too many references held");
        return NULL;
    }
    if (object != NULL) held->objects[held->count++] = object;
    return object;
}

static void let_go(Held *held) {
    while (held->count > 0) Py_DECREF(held->objects[--held->count]);
}

/* an int attribute as int64; 0 when there is none or it is not an int (nothing raised) */
static int int_field(Field *field, PyObject *object, int64_t *out) {
    PyObject *value = get_field(field, object);
    if (value == NULL) return 0;
    int overflow = 0;
    long long number = PyLong_Check(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
    int ok = PyLong_Check(value) && !overflow && !(number == -1 && PyErr_Occurred());
    if (!ok && PyErr_Occurred()) PyErr_Clear();
    Py_DECREF(value);
    if (ok) *out = number;
    return ok;
}

static PyObject *last_item(PyObject *list) {
    if (list == NULL || !PyList_Check(list) || PyList_GET_SIZE(list) == 0) return NULL;
    return Py_NewRef(PyList_GET_ITEM(list, PyList_GET_SIZE(list) - 1));
}

static int64_t now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* PUT_OK for one record: an object of PutResult's type made without __init__ (a
 * dataclass that only assigns its fields), its fields set as __init__ would */
static PyObject *put_result(PyObject *type, PyObject *ok, int64_t phys, int64_t queue_offset,
                            int64_t store_time, PyObject *store_host, int64_t flush_to) {
    Field *fields[] = {&f_status,          &f_commit_log_offset, &f_queue_offset,
                       &f_commit_log_offsets, &f_store_timestamp, &f_remark,
                       &f_store_host,      &f_flush_to};
    PyObject *offset = PyLong_FromLongLong(phys);
    PyObject *offsets = offset ? PyList_New(1) : NULL;
    if (offsets) PyList_SET_ITEM(offsets, 0, Py_NewRef(offset));
    PyObject *values[] = {Py_NewRef(ok),
                          offset,
                          PyLong_FromLongLong(queue_offset),
                          offsets,
                          PyLong_FromLongLong(store_time),
                          PyUnicode_FromStringAndSize(NULL, 0),
                          Py_NewRef(store_host),
                          PyLong_FromLongLong(flush_to)};
    const int count = (int)(sizeof(values) / sizeof(values[0]));
    PyTypeObject *result_type = (PyTypeObject *)type;
    PyObject *result = result_type->tp_alloc(result_type, 0);
    int i = 0;
    for (; result != NULL && i < count; i++) {
        if (set_field(fields[i], result, values[i]) != 0) { /* steals values[i] */
            Py_CLEAR(result);
            i++;
            break;
        }
    }
    for (; i < count; i++) Py_XDECREF(values[i]); /* those not given to the result */
    return result;
}

PyDoc_STRVAR(append_one_doc,
"append_one(store, state, message)\n"
"--\n\n"
"``MmapStore.append(message)`` for the usual put, whole: the store's checks, the\n"
"kernel's writing and the bookkeeping after it (write positions, queue offset, index\n"
"room, clock, put count); then, when due, the writer's pre-touch, the index top-up and\n"
"the other dispatchers, through the store's Python methods. ``state`` is (PutResult,\n"
"PutStatus.PUT_OK, StoreClock, WRITER_TOUCH_STEP, WRITER_TOUCH_LEAD, INDEX_LOW_WATER,\n"
"the store's disk, _queues, commitlog.files, index, policy.waits, _writes_positions,\n"
"_writes_index, _other_dispatchers).\n\n"
"Returns the PutResult; or None, with nothing written or taken, when the put is not the\n"
"usual case: then the store's Python code does it.");

static PyObject *append_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != STATE_FIELDS ||
        !PyType_Check(PyTuple_GET_ITEM(args[1], S_PUT_RESULT))) {
        PyErr_Format(PyExc_TypeError,
                     "append_one() takes the store, a state tuple of %d fields and a message",
                     STATE_FIELDS);
        return NULL;
    }
    /* the state before the message: functools.partial(append_one, store, state) is the
     * store's usual_append */
    PyObject *store = args[0], *state = args[1], *message = args[2];
    Held held = {.count = 0};
    PyObject *result = NULL;
    Run run;
    int prepared = 0;

    /* the checks _put_compiled and _append_compiled make, in their order */
    PyObject *refusing = hold(&held, get_field(&f_refusing, PyTuple_GET_ITEM(state, S_DISK)));
    if (refusing != Py_None) goto not_usual; /* the Python path refuses the put */
    PyObject *clock = hold(&held, get_field(&f_clock, store));
    if (clock == NULL) goto not_usual;
    int64_t store_time;
    if (Py_TYPE(clock) == (PyTypeObject *)PyTuple_GET_ITEM(state, S_STORE_CLOCK)) {
        int64_t last;
        if (!int_field(&f_last, clock, &last)) goto not_usual;
        store_time = now_ms(); /* StoreClock.next(), whose time.time_ns() this is */
        if (last > store_time) store_time = last;
    } else { /* a clock of its own (tests choose the times) */
        PyObject *next = hold(&held, PyObject_CallMethodNoArgs(clock, s_next));
        if (next == NULL) goto done;
        store_time = PyLong_AsLongLong(next);
        if (store_time == -1 && PyErr_Occurred()) goto done;
    }
    PyObject *topic = hold(&held, get_field(&f_topic, message));
    PyObject *queue_id = hold(&held, get_field(&f_queue_id, message));
    PyObject *queues = PyTuple_GET_ITEM(state, S_QUEUES);
    if (topic == NULL || queue_id == NULL || !PyDict_Check(queues))
        goto not_usual;
    PyObject *key = hold(&held, PyTuple_Pack(2, topic, queue_id));
    if (key == NULL) goto done;
    PyObject *queue = hold(&held, Py_XNewRef(PyDict_GetItemWithError(queues, key)));
    if (queue == NULL) {
        PyErr_Clear(); /* an unhashable queue id: the Python path says what is wrong */
        goto not_usual;
    }
    PyObject *logs = hold(&held, get_field(&f_log_list, PyTuple_GET_ITEM(state, S_LOG_FILES)));
    PyObject *mapped = hold(&held, last_item(logs));
    if (mapped == NULL) goto not_usual;
    int64_t queue_offset, wrote, file_start;
    if (!int_field(&f_next_offset, queue, &queue_offset) ||
        !int_field(&f_wrote, mapped, &wrote) || !int_field(&f_start, mapped, &file_start))
        goto not_usual;
    PyObject *log_buffer = hold(&held, get_field(&f_buffer, mapped));
    if (log_buffer == NULL || log_buffer == Py_None) goto not_usual;
    PyObject *entries = NULL, *entries_buffer = Py_None;
    int64_t entry_position = 0;
    PyObject *writes_positions = PyTuple_GET_ITEM(state, S_WRITES_POSITIONS);
    if (writes_positions == Py_True) {
        PyObject *queue_files = hold(&held, get_field(&f_queue_files, queue));
        PyObject *files = queue_files ? hold(&held, get_field(&f_queue_list, queue_files)) : NULL;
        entries = hold(&held, last_item(files));
        int64_t entries_start, allocated;
        if (entries == NULL || !int_field(&f_start, entries, &entries_start) ||
            !int_field(&f_wrote, entries, &entry_position) ||
            !int_field(&f_allocated, entries, &allocated) ||
            entries_start + entry_position != queue_offset * CQ_ENTRY)
            goto not_usual;
        entries_buffer = hold(&held, get_field(&f_buffer, entries));
        /* unmapped while idle, or disk blocks due: the batch path maps or allocates */
        if (entries_buffer == NULL || entries_buffer == Py_None ||
            entry_position + CQ_ENTRY > allocated)
            goto not_usual;
    } else if (writes_positions != Py_False) {
        goto not_usual;
    }
    PyObject *index_file = NULL, *index_view = Py_None;
    PyObject *writes_index = PyTuple_GET_ITEM(state, S_WRITES_INDEX);
    if (writes_index == Py_True) {
        PyObject *files = hold(&held, get_field(&f_index_list, PyTuple_GET_ITEM(state, S_INDEX)));
        index_file = hold(&held, last_item(files));
        if (index_file == NULL) goto not_usual;
        index_view = hold(&held, get_field(&f_allocated_view, index_file));
        if (index_view == NULL) goto not_usual;
    } else if (writes_index != Py_False) {
        goto not_usual;
    }
    PyObject *context = hold(&held, get_field(&f_append_context, queue));
    if (context == NULL) goto not_usual;
    if (context == Py_None) { /* made once per queue, by the store */
        context = hold(&held, PyObject_CallMethodOneArg(store, s_append_context, queue));
        if (context == NULL) goto done;
    }
    int ready = run_prepare(&run, context, NULL, message, 1, queue_offset, log_buffer,
                            (Py_ssize_t)wrote, file_start, store_time, entries_buffer,
                            (Py_ssize_t)entry_position, index_view);
    prepared = 1;
    if (ready <= 0) {
        if (ready == 0) goto not_usual;
        goto done;
    }

    /* everything the bookkeeping sets, made before the first write */
    int64_t phys = file_start + wrote, position = wrote + run.total, end = file_start + position;
    int64_t flush_to = -1;
    int policy_waits = PyObject_IsTrue(PyTuple_GET_ITEM(state, S_WAITS));
    if (policy_waits < 0) goto done;
    const Message *taken = &run.taken[0];
    /* rules.waits_for_store: no WAIT, or "true" in any case (Java's parseBoolean) */
    if (policy_waits && (taken->wait == NULL || (taken->wait_length == 4 &&
                                                 strncasecmp((const char *)taken->wait,
                                                             "true", 4) == 0)))
        flush_to = end;
    int64_t puts, room = 0;
    if (!int_field(&f_puts, store, &puts)) goto not_usual;
    if (run.keys_total && !int_field(&f_room, index_file, &room)) goto not_usual;
    result = put_result(PyTuple_GET_ITEM(state, S_PUT_RESULT),
                        PyTuple_GET_ITEM(state, S_PUT_OK), phys, queue_offset, store_time,
                        run.store_host, flush_to);
    PyObject *new_wrote = hold(&held, PyLong_FromLongLong(position));
    PyObject *new_next = hold(&held, PyLong_FromLongLong(queue_offset + 1));
    PyObject *new_entries = hold(&held, PyLong_FromLongLong(entry_position + CQ_ENTRY));
    PyObject *new_last = hold(&held, PyLong_FromLongLong(store_time));
    PyObject *new_puts = hold(&held, PyLong_FromLongLong(puts + 1));
    PyObject *new_room = hold(&held, PyLong_FromLongLong(room - run.keys_total));
    if (result == NULL || new_wrote == NULL || new_next == NULL || new_entries == NULL ||
        new_last == NULL || new_puts == NULL || new_room == NULL)
        goto failed;

    run_write(&run);
    /* _append_compiled's and _put_compiled's bookkeeping */
    if (set_field(&f_wrote, mapped, Py_NewRef(new_wrote)) ||
        set_field(&f_next_offset, queue, Py_NewRef(new_next)) ||
        (entries && (set_field(&f_used, entries, Py_NewRef(Py_True)) ||
                     set_field(&f_wrote, entries, Py_NewRef(new_entries)))) ||
        (run.keys_total && (set_field(&f_dirty, index_file, Py_NewRef(Py_True)) ||
                            set_field(&f_room, index_file, Py_NewRef(new_room)))) ||
        set_field(&f_last, clock, Py_NewRef(new_last)) ||
        set_field(&f_puts, store, Py_NewRef(new_puts)))
        goto failed;
    Py_ssize_t size = run.total, keys_total = run.keys_total;
    run_release(&run); /* the views first: a top-up replaces the index file's view */
    prepared = 0;

    /* then what is due now and then, in Python */
    int64_t touched, lead = PyLong_AsLongLong(PyTuple_GET_ITEM(state, S_TOUCH_LEAD));
    if (lead == -1 && PyErr_Occurred()) goto failed;
    if (int_field(&f_touched, mapped, &touched) && position + lead > touched) {
        /* the background pre-touch fell behind: the writer's own, before the next put
         * reaches pages nobody made ready */
        PyObject *done_touch = PyObject_CallMethodOneArg(
            mapped, s_fill_ahead, PyTuple_GET_ITEM(state, S_TOUCH_STEP));
        if (done_touch == NULL) goto failed;
        Py_DECREF(done_touch);
    }
    if (keys_total) {
        int64_t low_water = PyLong_AsLongLong(PyTuple_GET_ITEM(state, S_INDEX_LOW_WATER));
        if (low_water == -1 && PyErr_Occurred()) goto failed;
        if (room - keys_total < low_water) {
            PyObject *done_top_up = PyObject_CallMethodNoArgs(index_file, s_top_up);
            if (done_top_up == NULL) goto failed;
            Py_DECREF(done_top_up);
        }
    }
    PyObject *others = PyTuple_GET_ITEM(state, S_OTHERS);
    if (PyList_Check(others)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(others); i++) {
            PyObject *pair = PyList_GET_ITEM(others, i);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) continue;
            PyObject *wants = PyTuple_GET_ITEM(pair, 1);
            int wanted = 1;
            if (wants != Py_None) {
                PyObject *call[2] = {topic, queue_id};
                PyObject *answer = PyObject_Vectorcall(wants, call, 2, NULL);
                wanted = answer ? PyObject_IsTrue(answer) : -1;
                Py_XDECREF(answer);
                if (wanted < 0) goto failed;
            }
            if (wanted) { /* every dispatcher that wants it hears of it there */
                PyObject *told = PyObject_CallMethod(store, "_dispatch_one", "OLnLL", message,
                                                     (long long)phys, size,
                                                     (long long)store_time,
                                                     (long long)queue_offset);
                if (told == NULL) goto failed;
                Py_DECREF(told);
                break;
            }
        }
    }
    goto done;

failed:
    Py_CLEAR(result);
    goto done;
not_usual:
    result = Py_NewRef(Py_None);
done:
    if (prepared) run_release(&run);
    let_go(&held);
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

/* A record's fields that a dispatch needs, read in place */
typedef struct {
    int32_t size, queue_id, sys_flag;
    int64_t queue_offset, phys, store_timestamp, prepared;
    const uint8_t *topic, *properties;
    Py_ssize_t topic_length, properties_length;
    Property tags, keys, uniq;
} Record;

/* 1 when the bytes at ``position`` are a whole, valid record (with ``check_crc``, its body
 * CRC too), its fields read into ``out``; 0 when not (decode_record says why). Properties
 * are not checked for UTF-8 here. */
static int read_record(const uint8_t *base, Py_ssize_t length, Py_ssize_t position,
                       int check_crc, Record *out) {
    if (position < 0 || length - position < 48) return 0;
    const uint8_t *record = base + position;
    int32_t size = get32(record), magic = get32(record + 4);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || size < SMALLEST_RECORD ||
        size > length - position)
        return 0;
    const uint8_t *end = record + size;
    int32_t sys_flag = get32(record + 36);
    const uint8_t *at = record + 48 + ((sys_flag & BORNHOST_V6) ? 20 : 8);
    int64_t store_timestamp = get64(at);
    at += 8 + ((sys_flag & STOREHOST_V6) ? 20 : 8);
    if (end - at < 16) return 0; /* reconsume times, prepared offset, body length */
    out->prepared = get64(at + 4);
    int32_t body_length = get32(at + 12);
    const uint8_t *body = at + 16;
    if (body_length < 0 || end - body < (Py_ssize_t)body_length + 1) return 0;
    at = body + body_length;
    Py_ssize_t topic_length;
    if (magic == MAGIC_V2) {
        if (end - at < 2) return 0;
        topic_length = (int16_t)((uint16_t)at[0] << 8 | at[1]);
        at += 2;
    } else {
        topic_length = *at++;
    }
    const uint8_t *topic = at;
    if (topic_length < 0 || end - at < topic_length + 2) return 0;
    at += topic_length;
    Py_ssize_t properties_length = (int16_t)((uint16_t)at[0] << 8 | at[1]);
    at += 2;
    if (properties_length < 0 || end - at != properties_length) return 0;
    if (check_crc &&
        (crc32_continue(0, body, body_length) & 0x7FFFFFFFu) != (uint32_t)get32(record + 8))
        return 0;
    out->size = size;
    out->queue_id = get32(record + 12);
    out->queue_offset = get64(record + 20);
    out->phys = get64(record + 28);
    out->sys_flag = sys_flag;
    out->store_timestamp = store_timestamp;
    out->topic = topic;
    out->topic_length = topic_length;
    out->properties = at;
    out->properties_length = properties_length;
    out->tags = out->keys = out->uniq = (Property){NULL, 0};
    if (properties_length) wanted_properties(at, end, &out->tags, &out->keys, &out->uniq);
    return 1;
}

/* Java's String.hashCode of an ASCII TAGS value: one code unit a byte */
static int32_t ascii_tags_code(const Property *tags) {
    uint32_t hash = 0;
    for (Py_ssize_t i = 0; i < tags->length; i++) hash = hash * 31u + tags->value[i];
    return (int32_t)hash;
}

/* ``request_type(topic, queue_id, commit_log_offset, size, tags_code, store_timestamp,
 * queue_offset, keys, uniq_key, sys_flag, prepared_transaction_offset)``; takes over
 * ``topic_text`` (a new reference) */
static PyObject *request_of(PyObject *request_type, PyObject *topic_text, const Record *record,
                            int64_t tags_code) {
    PyObject *fields[11] = {topic_text,
                            PyLong_FromLong(record->queue_id),
                            PyLong_FromLongLong(record->phys),
                            PyLong_FromLong(record->size),
                            PyLong_FromLongLong(tags_code),
                            PyLong_FromLongLong(record->store_timestamp),
                            PyLong_FromLongLong(record->queue_offset),
                            text_or_none(&record->keys),
                            text_or_none(&record->uniq),
                            PyLong_FromLong(record->sys_flag),
                            PyLong_FromLongLong(record->prepared)};
    PyObject *result = NULL;
    int made = 1;
    for (int i = 0; i < 11; i++) made &= fields[i] != NULL;
    if (made) result = PyObject_Vectorcall(request_type, fields, 11, NULL);
    for (int i = 0; i < 11; i++) Py_XDECREF(fields[i]);
    return result;
}

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
    Record record;
    if (!read_record(view.buf, view.len, position, check_crc, &record)) goto not_a_record;
    /* decode_record refuses properties that are not UTF-8 anywhere, not only the wanted */
    if (!all_ascii(record.properties, record.properties_length)) {
        PyObject *checked = PyUnicode_DecodeUTF8((const char *)record.properties,
                                                 record.properties_length, NULL);
        if (checked == NULL) {
            PyErr_Clear();
            goto not_a_record;
        }
        Py_DECREF(checked);
    }
    PyObject *topic_text =
        PyUnicode_DecodeUTF8((const char *)record.topic, record.topic_length, NULL);
    if (topic_text == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto done;
        PyErr_Clear();
        goto not_a_record;
    }
    int64_t code = 0;
    if (record.tags.value != NULL) {
        if (all_ascii(record.tags.value, record.tags.length)) {
            code = ascii_tags_code(&record.tags);
        } else {
            PyObject *raw = PyBytes_FromStringAndSize((const char *)record.tags.value,
                                                      record.tags.length);
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
    result = request_of(request_type, topic_text, &record, code);
    goto done;

not_a_record:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

/* --- a replica's records, dispatched in place (store.py's _dispatch_replicated) ------ */

#define TRANSACTION_MASK 0xC
#define TRANSACTION_COMMIT 0x8

PyDoc_STRVAR(replica_dispatch_doc,
"replica_dispatch(store, buffer, file_start, positions, start, state, request_type, progress)\n"
"--\n\n"
"``MmapStore._dispatch_replicated`` for the records at the CommitLog offsets\n"
"``positions[start:]``, in ``buffer``, the CommitLog file that starts at ``file_start``,\n"
"while each is the usual case: a whole record that says it is where it is, with ASCII\n"
"properties, no transaction half or rollback, of a loaded queue whose consume-queue file\n"
"takes its entry next, with at most 16 keys that fit the newest index file. Returns how\n"
"many it dispatched: the record after those is the Python dispatch's. ``state`` is\n"
"append_one's. Every other dispatcher that wants a record is called with\n"
"``request_type(...)`` as dispatch_request makes it, ``progress[0]`` being the record's\n"
"number in ``positions`` meanwhile (what an exception from one of them is about).");

/* the newest file of a consume queue (a new reference), or NULL */
static PyObject *queue_last_file(PyObject *queue) {
    PyObject *queue_files = get_field(&f_queue_files, queue);
    PyObject *files = queue_files ? get_field(&f_queue_list, queue_files) : NULL;
    PyObject *last = last_item(files);
    Py_XDECREF(files);
    Py_XDECREF(queue_files);
    return last;
}

static PyObject *replica_dispatch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8 || !PyList_Check(args[3]) || !PyTuple_Check(args[5]) ||
        PyTuple_GET_SIZE(args[5]) != STATE_FIELDS || !PyList_Check(args[7]) ||
        PyList_GET_SIZE(args[7]) != 1) {
        PyErr_SetString(PyExc_TypeError,
                        "replica_dispatch() takes the store, a buffer, a file start, a list of"
                        " positions, where to start, append_one's state, the request type and"
                        " a list of one item");
        return NULL;
    }
    PyObject *store = args[0], *positions = args[3], *state = args[5];
    PyObject *request_type = args[6], *progress = args[7];
    int64_t file_start = PyLong_AsLongLong(args[2]);
    if (file_start == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[4]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    if (start < 0) {
        PyErr_SetString(PyExc_ValueError, "replica_dispatch(): start is negative");
        return NULL;
    }
    PyObject *queues = PyTuple_GET_ITEM(state, S_QUEUES);
    PyObject *others = PyTuple_GET_ITEM(state, S_OTHERS);
    PyObject *index = PyTuple_GET_ITEM(state, S_INDEX);
    int64_t indexed_below;
    if (PyTuple_GET_ITEM(state, S_WRITES_POSITIONS) != Py_True ||
        PyTuple_GET_ITEM(state, S_WRITES_INDEX) != Py_True || !PyDict_Check(queues) ||
        !PyList_Check(others) || !int_field(&f_indexed_below, index, &indexed_below))
        return PyLong_FromLong(0); /* not the usual store: the Python dispatch, each record */
    PyObject *clock = get_field(&f_clock, store);
    if (clock == NULL) {
        PyErr_Clear();
        return PyLong_FromLong(0);
    }
    Py_buffer log;
    if (PyObject_GetBuffer(args[1], &log, PyBUF_SIMPLE) != 0) {
        Py_DECREF(clock);
        return NULL;
    }
    /* the previous record's queue: a run of records is mostly one queue's */
    PyObject *topic_text = NULL, *queue_id = NULL, *queue = NULL;
    const uint8_t *queue_topic = NULL;
    Py_ssize_t queue_topic_length = -1;
    int failed = 0;
    Py_ssize_t done = start, count = PyList_GET_SIZE(positions);
    for (; done < count; done++) {
        /* before any Python code runs: what an exception from here on is about */
        PyObject *number = PyLong_FromSsize_t(done);
        if (number == NULL || PyList_SetItem(progress, 0, number) != 0) {
            failed = 1;
            break;
        }
        int64_t offset = PyLong_AsLongLong(PyList_GET_ITEM(positions, done));
        if (offset == -1 && PyErr_Occurred()) {
            failed = 1;
            break;
        }
        Record record;
        if (!read_record(log.buf, log.len, (Py_ssize_t)(offset - file_start), 0, &record) ||
            record.phys != offset || !all_ascii(record.properties, record.properties_length))
            break; /* the Python dispatch says what is wrong, or does the unusual */
        int kind = record.sys_flag & TRANSACTION_MASK;
        if (kind != 0 && kind != TRANSACTION_COMMIT) break;
        if (queue == NULL || record.topic_length != queue_topic_length ||
            memcmp(record.topic, queue_topic, (size_t)record.topic_length) != 0 ||
            PyLong_AsLong(queue_id) != record.queue_id) {
            Py_CLEAR(topic_text);
            Py_CLEAR(queue_id);
            Py_CLEAR(queue);
            topic_text =
                PyUnicode_DecodeUTF8((const char *)record.topic, record.topic_length, NULL);
            if (topic_text == NULL) {
                if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                    PyErr_Clear(); /* the Python dispatch refuses it */
                else
                    failed = 1;
                break;
            }
            queue_id = PyLong_FromLong(record.queue_id);
            PyObject *key = queue_id ? PyTuple_Pack(2, topic_text, queue_id) : NULL;
            if (key == NULL) {
                failed = 1;
                break;
            }
            queue = Py_XNewRef(PyDict_GetItemWithError(queues, key));
            Py_DECREF(key);
            if (queue == NULL) {
                if (PyErr_Occurred()) PyErr_Clear(); /* an odd key: the Python dispatch's */
                break;                               /* not loaded: made by the Python one */
            }
            queue_topic = record.topic;
            queue_topic_length = record.topic_length;
        }
        /* its consume-queue entry: next in the queue's newest file, which has room */
        PyObject *entries = queue_last_file(queue);
        int64_t entries_start, entry_position, allocated, next_offset, last;
        if (entries == NULL || !int_field(&f_start, entries, &entries_start) ||
            !int_field(&f_wrote, entries, &entry_position) ||
            !int_field(&f_allocated, entries, &allocated) ||
            (entries_start + entry_position) % CQ_ENTRY != 0 ||
            (entries_start + entry_position) / CQ_ENTRY != record.queue_offset ||
            entry_position + CQ_ENTRY > allocated ||
            !int_field(&f_next_offset, queue, &next_offset) || !int_field(&f_last, clock, &last)) {
            Py_XDECREF(entries);
            break;
        }
        PyObject *entries_buffer = get_field(&f_buffer, entries);
        Py_buffer queue_view = {.obj = NULL};
        if (entries_buffer == NULL || entries_buffer == Py_None ||
            PyObject_GetBuffer(entries_buffer, &queue_view, PyBUF_WRITABLE) != 0 ||
            queue_view.len < entry_position + CQ_ENTRY) {
            PyErr_Clear();
            release_view(&queue_view);
            Py_XDECREF(entries_buffer);
            Py_DECREF(entries);
            break;
        }
        /* its index entries: all in the newest file, where it has disk blocks */
        Message keys;
        memset(&keys, 0, sizeof keys);
        keys.uniq = record.uniq.value;
        keys.uniq_length = record.uniq.length;
        keys.keys = record.keys.value;
        keys.keys_length = record.keys.length;
        Py_ssize_t key_total = record.phys >= indexed_below ? key_count(&keys) : 0;
        PyObject *index_file = NULL;
        Py_buffer index_view = {.obj = NULL};
        Index opened;
        int32_t hashes[SMALL_KEYS];
        int64_t slot_ats[SMALL_KEYS];
        if (key_total) {
            PyObject *files = get_field(&f_index_list, index);
            index_file = last_item(files);
            Py_XDECREF(files);
            PyObject *view = index_file ? get_field(&f_allocated_view, index_file) : NULL;
            int64_t slot_num, index_num;
            int fits = view != NULL && key_total <= SMALL_KEYS &&
                       int_field(&f_slot_num, index_file, &slot_num) &&
                       int_field(&f_index_num, index_file, &index_num) &&
                       PyObject_GetBuffer(view, &index_view, PyBUF_WRITABLE) == 0 &&
                       slot_num > 0 && slot_num <= (index_view.len - INDEX_HEADER) / INDEX_SLOT &&
                       open_index(&opened, &index_view, slot_num, index_num, key_total);
            Py_XDECREF(view);
            if (!fits) {
                PyErr_Clear();
                release_view(&index_view);
                Py_XDECREF(index_file);
                release_view(&queue_view);
                Py_DECREF(entries_buffer);
                Py_DECREF(entries);
                break;
            }
        }
        /* the new values first: nothing can fail once the first byte is written */
        PyObject *new_wrote = PyLong_FromLongLong(entry_position + CQ_ENTRY);
        PyObject *new_next = PyLong_FromLongLong(
            next_offset > record.queue_offset + 1 ? next_offset : record.queue_offset + 1);
        PyObject *new_last = PyLong_FromLongLong(
            last > record.store_timestamp ? last : record.store_timestamp);
        int written = new_wrote && new_next && new_last;
        if (written) {
            uint8_t *entry = (uint8_t *)queue_view.buf + entry_position;
            put64(entry, (uint64_t)record.phys);
            put32(entry + 8, (uint32_t)record.size);
            put64(entry + 12, (uint64_t)(record.tags.value ? ascii_tags_code(&record.tags) : 0));
            if (key_total) {
                uint32_t topic_crc = crc32_continue(
                    crc32_continue(0, record.topic, record.topic_length), (const uint8_t *)"#", 1);
                key_hashes(&keys, topic_crc, hashes);
                index_record(&opened, hashes, key_total, record.phys, record.store_timestamp,
                             slot_ats);
            }
        }
        release_view(&index_view); /* before wrote_compiled: a top-up replaces the view */
        release_view(&queue_view);
        Py_DECREF(entries_buffer);
        if (written) {
            written = !(set_field(&f_wrote, entries, Py_NewRef(new_wrote)) ||
                        set_field(&f_used, entries, Py_NewRef(Py_True)));
        }
        Py_XDECREF(new_wrote);
        Py_DECREF(entries);
        if (written && key_total) {
            PyObject *took = PyObject_CallMethod(index_file, "wrote_compiled", "n", key_total);
            written = took != NULL;
            Py_XDECREF(took);
        }
        Py_XDECREF(index_file);
        if (!written) {
            Py_XDECREF(new_next);
            Py_XDECREF(new_last);
            failed = 1;
            break;
        }
        /* then every other dispatcher that wants it */
        PyObject *request = NULL;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(others) && !failed; i++) {
            PyObject *pair = Py_NewRef(PyList_GET_ITEM(others, i)); /* held while called */
            int wanted = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2;
            PyObject *wants = wanted ? PyTuple_GET_ITEM(pair, 1) : Py_None;
            if (wanted && wants != Py_None) {
                PyObject *call[2] = {topic_text, queue_id};
                PyObject *answer = PyObject_Vectorcall(wants, call, 2, NULL);
                wanted = answer ? PyObject_IsTrue(answer) : -1;
                Py_XDECREF(answer);
            }
            if (wanted > 0 && request == NULL) {
                int64_t code = record.tags.value ? ascii_tags_code(&record.tags) : 0;
                request = request_of(request_type, Py_NewRef(topic_text), &record, code);
                wanted = request ? 1 : -1;
            }
            if (wanted > 0) {
                PyObject *answer = PyObject_CallOneArg(PyTuple_GET_ITEM(pair, 0), request);
                wanted = answer ? 1 : -1;
                Py_XDECREF(answer);
            }
            Py_DECREF(pair);
            if (wanted < 0) failed = 1;
        }
        Py_XDECREF(request);
        /* the queue's next offset and the clock last, as _dispatch_replicated sets them */
        if (!failed && (set_field(&f_next_offset, queue, Py_NewRef(new_next)) ||
                        set_field(&f_last, clock, Py_NewRef(new_last))))
            failed = 1;
        Py_XDECREF(new_next);
        Py_XDECREF(new_last);
        if (failed) break;
    }
    Py_XDECREF(topic_text);
    Py_XDECREF(queue_id);
    Py_XDECREF(queue);
    Py_DECREF(clock);
    PyBuffer_Release(&log);
    if (failed) return NULL;
    return PyLong_FromSsize_t(done - start);
}

/* --- a read: records of a queue's entries (store.py's MmapStore.get) ----------------- */

#define BLANK_ENTRY_SIZE 0x7FFFFFFF /* a consume-queue entry that holds no record */

PyDoc_STRVAR(gather_doc,
"gather(entries, position, scan_left, total, examined, files, tags, max_count, max_bytes,\n"
"       records, queue_offsets)\n"
"--\n\n"
"MmapStore.get's loop over ``entries`` (packed consume-queue entries, the first at queue\n"
"offset ``position``): each record whose tags match ``tags`` (a frozenset of int32 tag\n"
"codes, or None for all) is copied out of its CommitLog file (``files.find``) and appended\n"
"to ``records``, its queue offset to ``queue_offsets``, until ``max_count`` records,\n"
"``max_bytes`` (past the first record), ``scan_left`` entries or the entries end.\n"
"Returns (position, scan_left, total, examined) as the loop leaves them.");

static PyObject *gather(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 11 || !PyList_Check(args[9]) || !PyList_Check(args[10]) ||
        (args[6] != Py_None && !PyFrozenSet_Check(args[6]))) {
        PyErr_SetString(PyExc_TypeError,
                        "gather() takes the entries, position, scan_left, total, examined, the"
                        " files, tags (a frozenset or None), max_count, max_bytes and two lists");
        return NULL;
    }
    int64_t position = PyLong_AsLongLong(args[1]);
    int64_t scan_left = position == -1 && PyErr_Occurred() ? 0 : PyLong_AsLongLong(args[2]);
    int64_t total = PyErr_Occurred() ? 0 : PyLong_AsLongLong(args[3]);
    int64_t examined = PyErr_Occurred() ? 0 : PyLong_AsLongLong(args[4]);
    int64_t max_count = PyErr_Occurred() ? 0 : PyLong_AsLongLong(args[7]);
    int64_t max_bytes = PyErr_Occurred() ? 0 : PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred()) return NULL;
    PyObject *files = args[5], *tags = args[6], *records = args[9], *queue_offsets = args[10];
    Py_buffer entries;
    if (PyObject_GetBuffer(args[0], &entries, PyBUF_SIMPLE) != 0) return NULL;
    Py_buffer log = {.obj = NULL}; /* the CommitLog file of the last record read */
    int64_t low = 0, high = 0;
    int failed = 0;
    const uint8_t *entry = entries.buf, *end = entry + entries.len / CQ_ENTRY * CQ_ENTRY;
    for (; entry < end; entry += CQ_ENTRY) {
        int64_t phys = get64(entry), code = get64(entry + 12);
        int32_t size = get32(entry + 8);
        position++;
        scan_left--;
        if (size == BLANK_ENTRY_SIZE) continue;
        examined = phys;
        if (tags != Py_None) { /* tag_matches: the code as an int32 */
            PyObject *tag = PyLong_FromLong((int32_t)(uint32_t)(uint64_t)code);
            int matches = tag ? PySet_Contains(tags, tag) : -1;
            Py_XDECREF(tag);
            if (matches < 0) {
                failed = 1;
                break;
            }
            if (!matches) continue;
        }
        Py_ssize_t count = PyList_GET_SIZE(records);
        if (count && total + size > max_bytes) {
            position--;
            scan_left = 0;
            break;
        }
        if (phys < low || phys + size > high) {
            release_view(&log);
            log.obj = NULL;
            low = high = 0;
            PyObject *mapped = PyObject_CallMethod(files, "find", "L", (long long)phys);
            if (mapped == NULL) {
                failed = 1;
                break;
            }
            if (mapped == Py_None) { /* removed by retention while queued */
                Py_DECREF(mapped);
                continue;
            }
            int64_t start, wrote;
            PyObject *buffer = NULL;
            int ok = int_field(&f_start, mapped, &start) && int_field(&f_wrote, mapped, &wrote) &&
                     (buffer = get_field(&f_buffer, mapped)) != NULL && buffer != Py_None &&
                     PyObject_GetBuffer(buffer, &log, PyBUF_SIMPLE) == 0;
            Py_XDECREF(buffer);
            Py_DECREF(mapped);
            if (!ok) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_RuntimeError, "gather(): a CommitLog file is not mapped");
                log.obj = NULL;
                failed = 1;
                break;
            }
            low = start;
            high = start + (wrote < log.len ? wrote : log.len);
            if (phys + size > high) continue;
        }
        /* a negative size (a corrupt entry) reads as nothing, as a reversed slice does */
        PyObject *record = PyBytes_FromStringAndSize((const char *)log.buf + (phys - low),
                                                     size < 0 ? 0 : (Py_ssize_t)size);
        PyObject *queue_offset = record ? PyLong_FromLongLong(position - 1) : NULL;
        int appended = queue_offset != NULL && PyList_Append(records, record) == 0 &&
                       PyList_Append(queue_offsets, queue_offset) == 0;
        Py_XDECREF(record);
        Py_XDECREF(queue_offset);
        if (!appended) {
            failed = 1;
            break;
        }
        total += size;
        if (count + 1 >= max_count) {
            scan_left = 0;
            break;
        }
    }
    release_view(&log);
    PyBuffer_Release(&entries);
    if (failed) return NULL;
    return Py_BuildValue("(LLLL)", (long long)position, (long long)scan_left, (long long)total,
                         (long long)examined);
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

PyDoc_STRVAR(index_keys_doc,
"index_keys(view, slot_num, index_num, topic_crc, keys, uniq_key, phys, store_timestamp)\n"
"--\n\n"
"IndexFile.put for one record whose keys (``keys`` split on spaces, and ``uniq_key``;\n"
"bytes or None) hash from ``topic_crc``: how many entries it wrote, or -1 when they do\n"
"not all fit in ``view``, the part of the file with disk blocks (nothing written then:\n"
"the Python path allocates more first). What a replica's dispatch indexes with.");

static PyObject *index_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "index_keys() takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    int64_t slot_num = PyLong_AsLongLong(args[1]);
    if (slot_num == -1 && PyErr_Occurred()) return NULL;
    int64_t index_num = PyLong_AsLongLong(args[2]);
    if (index_num == -1 && PyErr_Occurred()) return NULL;
    uint32_t topic_crc = (uint32_t)PyLong_AsUnsignedLongMask(args[3]);
    if (topic_crc == (uint32_t)-1 && PyErr_Occurred()) return NULL;
    int64_t phys = PyLong_AsLongLong(args[6]);
    if (phys == -1 && PyErr_Occurred()) return NULL;
    int64_t store_time = PyLong_AsLongLong(args[7]);
    if (store_time == -1 && PyErr_Occurred()) return NULL;
    Message message;
    memset(&message, 0, sizeof message);
    PyObject *keys = args[4], *uniq = args[5];
    if (keys != Py_None) {
        if (!PyBytes_Check(keys)) return PyErr_Format(PyExc_TypeError, "keys must be bytes or None");
        message.keys = PyBytes_GET_SIZE(keys) ? (const uint8_t *)PyBytes_AS_STRING(keys) : NULL;
        message.keys_length = PyBytes_GET_SIZE(keys);
    }
    if (uniq != Py_None) {
        if (!PyBytes_Check(uniq))
            return PyErr_Format(PyExc_TypeError, "uniq_key must be bytes or None");
        message.uniq = PyBytes_GET_SIZE(uniq) ? (const uint8_t *)PyBytes_AS_STRING(uniq) : NULL;
        message.uniq_length = PyBytes_GET_SIZE(uniq);
    }
    Py_ssize_t count = key_count(&message);
    if (count == 0) return PyLong_FromLong(0);
    int32_t small_hashes[SMALL_KEYS], *hashes = small_hashes;
    int64_t small_slot_ats[SMALL_KEYS], *slot_ats = small_slot_ats;
    if (count > SMALL_KEYS) {
        hashes = PyMem_Malloc((size_t)count * sizeof *hashes);
        slot_ats = PyMem_Malloc((size_t)count * sizeof *slot_ats);
        if (hashes == NULL || slot_ats == NULL) {
            PyMem_Free(hashes);
            PyMem_Free(slot_ats);
            return PyErr_NoMemory();
        }
    }
    Py_buffer view;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) != 0) goto done;
    Index index;
    /* slots past the view (or a slot count whose table size overflows) fit nothing */
    int fits = slot_num > 0 && slot_num <= (view.len - INDEX_HEADER) / INDEX_SLOT &&
               open_index(&index, &view, slot_num, index_num, count);
    if (fits) {
        key_hashes(&message, topic_crc, hashes);
        index_record(&index, hashes, count, phys, store_time, slot_ats);
        result = PyLong_FromSsize_t(count);
    } else {
        result = PyLong_FromLong(-1);
    }
    PyBuffer_Release(&view);
done:
    if (hashes != small_hashes) {
        PyMem_Free(hashes);
        PyMem_Free(slot_ats);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"append", (PyCFunction)(void (*)(void))append, METH_FASTCALL, append_doc},
    {"append_one", (PyCFunction)(void (*)(void))append_one, METH_FASTCALL, append_one_doc},
    {"crc32", (PyCFunction)(void (*)(void))crc32, METH_FASTCALL, crc32_doc},
    {"index_keys", (PyCFunction)(void (*)(void))index_keys, METH_FASTCALL, index_keys_doc},
    {"dispatch_request", (PyCFunction)(void (*)(void))dispatch_request, METH_FASTCALL,
     dispatch_request_doc},
    {"replica_dispatch", (PyCFunction)(void (*)(void))replica_dispatch, METH_FASTCALL,
     replica_dispatch_doc},
    {"gather", (PyCFunction)(void (*)(void))gather, METH_FASTCALL, gather_doc},
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
    for (size_t i = 0; i < sizeof(all_fields) / sizeof(all_fields[0]); i++)
        if ((all_fields[i]->name = PyUnicode_InternFromString(all_fields[i]->text)) == NULL)
            return NULL;
#define INTERN(name, text) if ((s_##name = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(append_context, "_append_context");
    INTERN(fill_ahead, "fill_ahead");
    INTERN(top_up, "top_up");
    INTERN(next, "next");
    INTERN(wrote_compiled, "wrote_compiled");
#undef INTERN
    PyObject *module = PyModule_Create(&module_definition);
    /* the calling conventions of append() and append_one(): a build is used only if they match */
    if (module != NULL && PyModule_AddIntConstant(module, "INTERFACE", 5) != 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
