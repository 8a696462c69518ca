/* Frames with JSON headers into RemotingCommands, compiled (codec.FrameDecoder.feed
 * calls it; docs/spec/REMOTING.md sections 2 and 5).
 *
 * ``decode_frames`` decodes the complete frames at the start of a buffer for as long as
 * each is the usual kind: a JSON header (parsed by orjson, the parser the Python code
 * uses) whose code, opaque, flag and version are integers, whose language is a name,
 * whose remark is text or absent and whose extFields hold text, integers, booleans or
 * nulls. It stops, without an error, at the first frame that is anything else (a
 * binary header, a length to refuse, a header to refuse or to read another way, an
 * unfinished frame): the Python code, the reference this is tested against
 * (tests/test_codec.py), decodes or refuses that one and calls again.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

static PyObject *s_code, *s_opaque, *s_flag, *s_version, *s_language, *s_remark, *s_ext_fields,
    *s_true, *s_false, *empty_bytes, *zero;

/* slots of RemotingCommand, in the order the descriptors are passed */
enum { D_CODE, D_OPAQUE, D_FLAG, D_VERSION, D_LANGUAGE, D_REMARK, D_EXT_FIELDS, D_BODY,
       D_SERIALIZE_TYPE, SLOT_COUNT };

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* an exact int of the header, or ``fallback`` when absent; NULL when it must be read
 * another way (a numeric string, a bool, anything else) */
static PyObject *header_int(PyObject *header, PyObject *name, PyObject *fallback) {
    PyObject *value = PyDict_GetItemWithError(header, name);
    if (value == NULL) return PyErr_Occurred() ? NULL : fallback;
    return PyLong_CheckExact(value) ? value : NULL;
}

/* extFields with every value as text, as codec._stringify_values makes them: the same
 * dict when it holds only text; NULL (no error) when a value must be read another way */
static PyObject *text_fields(PyObject *fields) {
    Py_ssize_t position = 0;
    PyObject *key, *value;
    int all_text = 1;
    while (PyDict_Next(fields, &position, &key, &value)) {
        if (!PyUnicode_CheckExact(value)) {
            all_text = 0;
            break;
        }
    }
    if (all_text) return Py_NewRef(fields);
    PyObject *result = PyDict_New();
    if (result == NULL) return NULL;
    position = 0;
    while (PyDict_Next(fields, &position, &key, &value)) {
        PyObject *text;
        if (value == Py_None) continue; /* null: absent, as Java reads it */
        if (PyUnicode_CheckExact(value)) text = Py_NewRef(value);
        else if (value == Py_True) text = Py_NewRef(s_true);
        else if (value == Py_False) text = Py_NewRef(s_false);
        else if (PyLong_CheckExact(value)) text = PyObject_Str(value);
        else { /* a float, a list, an object: the Python code writes those */
            Py_DECREF(result);
            return NULL;
        }
        if (text == NULL || PyDict_SetItem(result, key, text) < 0) {
            Py_XDECREF(text);
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(text);
    }
    return result;
}

static int set_slot(PyObject *descriptors, int slot, PyObject *command, PyObject *value) {
    PyObject *descriptor = PyTuple_GET_ITEM(descriptors, slot);
    return Py_TYPE(descriptor)->tp_descr_set(descriptor, command, value);
}

/* The command of one frame's JSON header and body; NULL with no error set: the Python
 * code's frame. */
static PyObject *command_of(PyObject *loads, PyObject *command_type, PyObject *descriptors,
                            PyObject *languages, PyObject *other_language,
                            PyObject *json_type, const char *header_at, Py_ssize_t header_length,
                            const char *body_at, Py_ssize_t body_length) {
    PyObject *header_text = PyBytes_FromStringAndSize(header_at, header_length);
    if (header_text == NULL) return NULL;
    PyObject *header = PyObject_CallOneArg(loads, header_text);
    Py_DECREF(header_text);
    if (header == NULL) { /* not JSON: the Python code says why */
        PyErr_Clear();
        return NULL;
    }
    PyObject *command = NULL, *fields = NULL, *body = NULL;
    if (!PyDict_CheckExact(header)) goto other_way;
    PyObject *code = header_int(header, s_code, NULL);
    PyObject *opaque = header_int(header, s_opaque, NULL);
    PyObject *flag = header_int(header, s_flag, zero);
    PyObject *version = header_int(header, s_version, zero);
    if (code == NULL || opaque == NULL || flag == NULL || version == NULL) goto other_way;
    int overflow;
    long long opaque_value = PyLong_AsLongLongAndOverflow(opaque, &overflow);
    if (overflow || opaque_value < INT32_MIN || opaque_value > INT32_MAX) goto other_way;
    PyObject *language_name = PyDict_GetItemWithError(header, s_language);
    if (language_name == NULL || !PyUnicode_CheckExact(language_name)) goto other_way;
    PyObject *language = PyDict_GetItemWithError(languages, language_name);
    if (language == NULL) {
        if (PyErr_Occurred()) goto other_way;
        language = other_language;
    }
    PyObject *remark = PyDict_GetItemWithError(header, s_remark);
    if (remark == NULL) {
        if (PyErr_Occurred()) goto other_way;
        remark = Py_None;
    } else if (remark != Py_None && !PyUnicode_CheckExact(remark)) {
        goto other_way;
    }
    PyObject *given = PyDict_GetItemWithError(header, s_ext_fields);
    if (given == NULL || given == Py_None) {
        if (PyErr_Occurred()) goto other_way;
        fields = PyDict_New();
    } else if (PyDict_CheckExact(given)) {
        fields = text_fields(given);
    } else {
        goto other_way;
    }
    if (fields == NULL) goto other_way;
    body = body_length > 0 ? PyBytes_FromStringAndSize(body_at, body_length)
                           : Py_NewRef(empty_bytes);
    if (body == NULL) goto other_way;
    /* object.__new__(RemotingCommand): decoding fills every slot itself */
    command = ((PyTypeObject *)command_type)->tp_alloc((PyTypeObject *)command_type, 0);
    if (command == NULL) goto other_way;
    if (set_slot(descriptors, D_CODE, command, code) ||
        set_slot(descriptors, D_OPAQUE, command, opaque) ||
        set_slot(descriptors, D_FLAG, command, flag) ||
        set_slot(descriptors, D_VERSION, command, version) ||
        set_slot(descriptors, D_LANGUAGE, command, language) ||
        set_slot(descriptors, D_REMARK, command, remark) ||
        set_slot(descriptors, D_EXT_FIELDS, command, fields) ||
        set_slot(descriptors, D_BODY, command, body) ||
        set_slot(descriptors, D_SERIALIZE_TYPE, command, json_type))
        Py_CLEAR(command);
other_way:
    if (command == NULL) PyErr_Clear();
    Py_XDECREF(fields);
    Py_XDECREF(body);
    Py_DECREF(header);
    return command;
}

PyDoc_STRVAR(decode_frames_doc,
"decode_frames(source, position, max_length, loads, command_type, descriptors,\n"
"              languages, other_language, json_type, /)\n--\n\n"
"(commands, position): the commands of the usual frames of ``source`` from\n"
"``position`` on, and where the first frame left to the Python code begins (or the\n"
"end of what was decoded). ``max_length``: the longest frame length accepted (after\n"
"the length field); ``loads``: orjson.loads; ``descriptors``: RemotingCommand's slot\n"
"descriptors (code, opaque, flag, version, language, remark, ext_fields, body,\n"
"serialize_type); ``languages``: language name -> code, ``other_language`` for others;\n"
"``json_type``: the serialize type the commands are given (JSON).");

static PyObject *decode_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 || !PyType_Check(args[4]) || !PyTuple_CheckExact(args[5]) ||
        PyTuple_GET_SIZE(args[5]) != SLOT_COUNT || !PyDict_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_frames(source, position, max_length, loads, command_type,"
                        " descriptors: tuple of 9, languages: dict, other_language, json_type)");
        return NULL;
    }
    for (int i = 0; i < SLOT_COUNT; i++) {
        if (Py_TYPE(PyTuple_GET_ITEM(args[5], i))->tp_descr_set == NULL) {
            PyErr_SetString(PyExc_TypeError, "decode_frames: descriptors must be settable");
            return NULL;
        }
    }
    Py_ssize_t position = PyLong_AsSsize_t(args[1]);
    if (position == -1 && PyErr_Occurred()) return NULL;
    int overflow;
    long long max_length = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (max_length == -1 && PyErr_Occurred()) return NULL;
    if (overflow > 0) max_length = LLONG_MAX; /* no frame is that long */
    Py_buffer source;
    if (PyObject_GetBuffer(args[0], &source, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *commands = PyList_New(0);
    if (commands == NULL) goto failed;
    const unsigned char *data = source.buf;
    Py_ssize_t end = source.len;
    if (position < 0 || position > end) {
        PyErr_SetString(PyExc_ValueError, "decode_frames: position outside the source");
        goto failed;
    }
    while (end - position >= 8) {
        uint32_t length = be32(data + position), type_and_length = be32(data + position + 4);
        if (length < 4 || (long long)length > max_length) break; /* refused by Python */
        if ((uint64_t)length > (uint64_t)(end - position - 4)) break; /* unfinished */
        Py_ssize_t frame_end = position + 4 + (Py_ssize_t)length;
        Py_ssize_t header_start = position + 8;
        Py_ssize_t body_start = header_start + (Py_ssize_t)(type_and_length & 0xFFFFFF);
        if (body_start > frame_end || type_and_length >> 24 != 0) break; /* refused, binary */
        PyObject *command = command_of(
            args[3], args[4], args[5], args[6], args[7], args[8], (const char *)data + header_start,
            body_start - header_start, (const char *)data + body_start, frame_end - body_start);
        if (command == NULL) break;
        int appended = PyList_Append(commands, command);
        Py_DECREF(command);
        if (appended < 0) goto failed;
        position = frame_end;
    }
    PyBuffer_Release(&source);
    PyObject *at = PyLong_FromSsize_t(position);
    if (at == NULL) {
        Py_DECREF(commands);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, commands, at);
    Py_DECREF(commands);
    Py_DECREF(at);
    return result;
failed:
    Py_XDECREF(commands);
    PyBuffer_Release(&source);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode_frames", (PyCFunction)(void (*)(void))decode_frames, METH_FASTCALL,
     decode_frames_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_frames", "Frames with JSON headers into RemotingCommands, compiled.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__frames(void) {
    s_code = PyUnicode_InternFromString("code");
    s_opaque = PyUnicode_InternFromString("opaque");
    s_flag = PyUnicode_InternFromString("flag");
    s_version = PyUnicode_InternFromString("version");
    s_language = PyUnicode_InternFromString("language");
    s_remark = PyUnicode_InternFromString("remark");
    s_ext_fields = PyUnicode_InternFromString("extFields");
    s_true = PyUnicode_InternFromString("true");
    s_false = PyUnicode_InternFromString("false");
    empty_bytes = PyBytes_FromStringAndSize(NULL, 0);
    zero = PyLong_FromLong(0);
    if (!s_code || !s_opaque || !s_flag || !s_version || !s_language || !s_remark ||
        !s_ext_fields || !s_true || !s_false || !empty_bytes || !zero)
        return NULL;
    return PyModule_Create(&module_definition);
}
