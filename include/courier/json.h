/*
 * courier/json.h — JSON documents: parsing, reading, building, serializing, tapes.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_JSON_H
#define COURIER_INC_JSON_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* JSON documents                                                                              */
/* ========================================================================================== */

/* A JSON value. A document is a tree of values; every value inside it is borrowed from the
 * document's owner: a response (valid until the response is freed) or the caller (a value
 * returned as new by courier_json_parse, courier_json_new_*, courier_json_copy,
 * courier_mapping_apply: release it with courier_json_free). Values reachable from a response are
 * immutable and may be read from any thread at once; a value the caller builds is used by one
 * thread at a time. No function here allocates to read. */
typedef struct courier_json courier_json;
/* A position in an object's members (courier_json_iter_*). Borrowed like the object. */
typedef struct courier_json_iter courier_json_iter;

typedef enum courier_json_type {
    COURIER_JSON_NONE = 0,    /* no value: a NULL handle, an absent key or index */
    COURIER_JSON_OBJECT = 1,
    COURIER_JSON_ARRAY = 2,
    COURIER_JSON_STRING = 3,
    COURIER_JSON_INTEGER = 4, /* a number without fraction or exponent that fits int64_t */
    COURIER_JSON_REAL = 5,    /* any other number: a double, or (beyond int64 and double) its text */
    COURIER_JSON_BOOL = 6,
    COURIER_JSON_NULL = 7,
    COURIER_JSON_NUMBER = 8,  /* only as a mapping's expected type: integer or real */
    COURIER_JSON_ANY = 9      /* only as a mapping's expected type: any value, null included */
} courier_json_type;

/* Static English name of a courier_json_type ("string", "nothing"...). Never NULL. Any thread. */
COURIER_API const char *courier_json_type_name(int type);

/* Parse options. Set `size`, initialize with courier_json_options_init, then change fields:
 *   courier_json_options o = {sizeof o}; courier_json_options_init(&o); o.max_depth = 64;
 * The struct only grows at its end; the fields beyond a caller's size are read as their defaults. */
#define COURIER_JSON_ALLOW_DUPLICATE_KEYS 0x1u /* the last of duplicate keys wins (default: an error) */
#define COURIER_JSON_ALLOW_NUL 0x2u            /* allow \u0000 in strings (read them with lengths) */
typedef struct courier_json_options {
    size_t size;       /* sizeof(courier_json_options), set by the caller */
    int max_depth;     /* deepest nesting of arrays and objects, 1..2048 (default 512) */
    int64_t max_bytes; /* largest text accepted (default 64 MiB) */
    unsigned flags;    /* COURIER_JSON_ALLOW_* (default 0) */
    /* With max_threads other than 1, a top-level array of at least parallel_min_bytes (default
     * 256 KiB; 0: never) is parsed in parts on up to max_threads threads (0: one per processor, at
     * most 4), started and joined inside the call; the document is the same. Default 1 (one
     * thread): splitting pays only when processors are idle. */
    int max_threads;
    int64_t parallel_min_bytes;
} courier_json_options;
/* Fills *options with the defaults, writing only the fields that end within options->size (which
 * it keeps). Errors: COURIER_E_INVALID_ARGUMENT (NULL, a size smaller than the first version's). */
COURIER_API int courier_json_options_init(courier_json_options *options);

/* Parses JSON text (UTF-8, any value at the top, as RFC 8259; a UTF-8 byte order mark before it is
 * ignored). `options` may be NULL (defaults). *out is new: release it with courier_json_free. Any
 * thread; a large top-level array may be parsed with helper threads that end before this returns
 * (see max_threads).
 * Numbers: every number RFC 8259 allows is accepted. An integer (no fraction, no exponent) that
 * fits int64_t is an INTEGER; any other number is a REAL: a double, or, when it fits neither
 * int64_t nor a double (18446744073709551615, -9223372036854775809, 1e400), its text, kept exactly
 * (courier_json_number_text; courier_json_read_uint64 / _read_double read it, and say
 * COURIER_E_NUMBER_RANGE when it does not fit). Reals below a double's range read as 0; digits
 * beyond a double's precision are rounded (only out-of-range numbers keep their text).
 * Errors: COURIER_E_JSON (malformed text, invalid UTF-8, nesting deeper than max_depth, a
 * duplicate key, \u0000 without ALLOW_NUL; the message names line, column and the byte offset of
 * the offending byte, the same as courier_json_tape_parse's for the same text), COURIER_E_TOO_LARGE
 * (more than max_bytes), COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. Never crashes on any input. */
COURIER_API int courier_json_parse(courier_json **out, const void *data, size_t len,
                                   const courier_json_options *options, courier_error *err);
/* Releases a value the caller owns (see courier_json). Accepts NULL. Never call it on a value
 * borrowed from a response or from inside another value. */
COURIER_API void courier_json_free(courier_json *value);

/* The value's courier_json_type; COURIER_JSON_NONE for NULL. */
COURIER_API int courier_json_typeof(const courier_json *value);
/* Number of elements of an array or members of an object; 0 for anything else. */
COURIER_API size_t courier_json_size(const courier_json *value);
/* The index-th element of an array; NULL when out of range or not an array. Borrowed. */
COURIER_API const courier_json *courier_json_at(const courier_json *array, size_t index);
/* The member named key (NUL-terminated, or key_len bytes) of an object; NULL when absent or not an
 * object. Borrowed. */
COURIER_API const courier_json *courier_json_get(const courier_json *object, const char *key);
COURIER_API const courier_json *courier_json_getn(const courier_json *object, const char *key, size_t key_len);
/* The member named key, looked up first at *hint: a position in this object's members (NULL, or
 * one given by courier_json_iter_first/_next or an earlier call on the same object). When the key
 * is there, *hint moves to the next member, so reading members in document order costs one
 * comparison each and no hashing; otherwise this is courier_json_getn and *hint stays. Borrowed. */
COURIER_API const courier_json *courier_json_get_hinted(const courier_json *object, const char *key, size_t key_len,
                                                        const courier_json_iter **hint);
/* The value at a key path: components separated by '.', each an object key or, in an array, a
 * decimal index: "data", "data.items", "data.items.0.name". NULL or "" is the value itself. NULL
 * when any component is absent. Keys that contain '.' cannot be named. Borrowed. */
COURIER_API const courier_json *courier_json_path(const courier_json *value, const char *key_path);
/* A string's bytes (UTF-8, NUL-terminated; *len, may be NULL, counts them without the NUL). NULL
 * (and *len 0) when not a string. Borrowed. */
COURIER_API const char *courier_json_string(const courier_json *value, size_t *len);
/* An integer's value; 0 when not an integer. */
COURIER_API int64_t courier_json_integer(const courier_json *value);
/* A number's value as a double (integers converted; a number kept as text: its nearest double,
 * +-HUGE_VAL beyond a double's range); 0 when not a number. */
COURIER_API double courier_json_real(const courier_json *value);
/* The text of a number kept as text (one that fits neither int64_t nor a double: see
 * courier_json_parse), exactly as the document wrote it, and its length in *len (may be NULL); not
 * NUL-terminated. NULL (and *len 0) for any other value, numbers that fit included. Borrowed. */
COURIER_API const char *courier_json_number_text(const courier_json *value, size_t *len);
/* A number read as int64_t, uint64_t or double, with the range checked: an INTEGER as it is, a
 * REAL without fraction into the integer types when it fits, a number kept as text from its digits
 * (exactly: 18446744073709551615 reads as a uint64_t). Any thread. Errors: COURIER_E_NUMBER_RANGE
 * (beyond the type's range, a fraction read as an integer, a number beyond a double read as one;
 * *out unchanged, except that _read_double leaves +-HUGE_VAL), COURIER_E_INVALID_ARGUMENT (NULL out,
 * not a number). */
COURIER_API int courier_json_read_int64(int64_t *out, const courier_json *value);
COURIER_API int courier_json_read_uint64(uint64_t *out, const courier_json *value);
COURIER_API int courier_json_read_double(double *out, const courier_json *value);
/* 1 for true; 0 for false and anything else. */
COURIER_API int courier_json_bool(const courier_json *value);
/* 1 when both are equal JSON (objects regardless of member order), or both NULL. */
COURIER_API int courier_json_equal(const courier_json *a, const courier_json *b);

/* Iterates an object's members in document order:
 *   for (const courier_json_iter *it = courier_json_iter_first(o); it; it = courier_json_iter_next(o, it))
 * NULL when the object is empty or not an object. Borrowed like the object. */
COURIER_API const courier_json_iter *courier_json_iter_first(const courier_json *object);
COURIER_API const courier_json_iter *courier_json_iter_next(const courier_json *object, const courier_json_iter *it);
/* The member's key (NUL-terminated; *len may be NULL) and value. Borrowed. */
COURIER_API const char *courier_json_iter_key(const courier_json_iter *it, size_t *len);
COURIER_API const courier_json *courier_json_iter_value(const courier_json_iter *it);

/* Building values. Each *out is new (courier_json_free) until handed to a function that takes it.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY; strings and keys must be UTF-8
 * (COURIER_E_INVALID_ENCODING; embedded NULs are allowed in strings), reals finite. */
COURIER_API int courier_json_new_object(courier_json **out);
COURIER_API int courier_json_new_array(courier_json **out);
COURIER_API int courier_json_new_string(courier_json **out, const char *s, size_t len);
COURIER_API int courier_json_new_integer(courier_json **out, int64_t value);
COURIER_API int courier_json_new_real(courier_json **out, double value);
COURIER_API int courier_json_new_bool(courier_json **out, int value);
COURIER_API int courier_json_new_null(courier_json **out);
/* Sets object[key] (replacing a member of that name; new keys go last). Takes `value`, also when it
 * fails. The object must be one the caller built (not borrowed from a response). */
COURIER_API int courier_json_object_set(courier_json *object, const char *key, size_t key_len, courier_json *value);
/* Appends to an array. Takes `value`, also when it fails. */
COURIER_API int courier_json_array_append(courier_json *array, courier_json *value);
/* A deep copy that the caller owns and may change. *out new. */
COURIER_API int courier_json_copy(courier_json **out, const courier_json *value);

/* Serializing. Flags: */
#define COURIER_JSON_DUMP_INDENT 0x1u       /* two-space indentation and newlines (default: compact) */
#define COURIER_JSON_DUMP_SORT_KEYS 0x2u    /* members sorted by key (default: document order) */
#define COURIER_JSON_DUMP_ASCII 0x4u        /* \uXXXX for every non-ASCII character */
#define COURIER_JSON_DUMP_ESCAPE_SLASH 0x8u /* "\/" for '/' */
/* Writes a value as JSON text: UTF-8, reals in the shortest form that reads back the same (always
 * with '.' or an exponent). *out is new: release it with courier_free; *out_len (may be NULL) gets its
 * length; the text is NUL-terminated. Any thread. Errors: COURIER_E_INVALID_ARGUMENT,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_json_dump(char **out, size_t *out_len, const courier_json *value, unsigned flags,
                                  courier_error *err);

/* JSON tapes: a document as one flat, read-only array of entries, for decoders that read a value
 * once in document order (Swift's ModelDecoder). Parsing builds no objects and no hash tables:
 * one array of 16-byte entries and one copy of the text, in which strings are unescaped in place.
 * Layout: a value is one entry; an array is its entry then its elements' entries; an object is its
 * entry then, per member, the key (a STRING entry) and the value's entries. The root is entry 0.
 * The entries and the text are immutable and may be read from any thread at once; they are
 * borrowed from the tape (valid until courier_json_tape_free). */
typedef struct courier_json_tape courier_json_tape;
#define COURIER_JSON_TAPE_TRUE 0x1u /* flags: a BOOL entry that is true */
#define COURIER_JSON_TAPE_DEAD 0x2u /* flags: a member key shadowed by a later duplicate (only with
                                       COURIER_JSON_ALLOW_DUPLICATE_KEYS; the last wins) */
#define COURIER_JSON_TAPE_NUMBER_TEXT 0x4u /* flags: a REAL kept as its text (it fits neither int64_t
                                              nor a double): payload is its nearest double (+-infinity
                                              beyond a double's range), length the offset of its text
                                              in courier_json_tape_text (read it with
                                              courier_json_tape_number_text) */
typedef struct courier_json_tape_entry {
    uint8_t type;     /* courier_json_type (OBJECT..NULL); object keys are STRING entries */
    uint8_t flags;    /* COURIER_JSON_TAPE_* */
    uint16_t reserved;
    uint32_t length;  /* STRING: bytes; ARRAY: elements; OBJECT: members (DEAD ones not counted) */
    uint64_t payload; /* STRING: offset of its bytes in courier_json_tape_text (NUL-terminated);
                         ARRAY, OBJECT: the index just past the last entry of the contents;
                         INTEGER: the int64_t's bits; REAL: the double's bits (the nearest one
                         with COURIER_JSON_TAPE_NUMBER_TEXT); otherwise 0 */
} courier_json_tape_entry;
/* Parses JSON text into a tape with the same rules, limits and error codes as courier_json_parse
 * (max_threads is ignored: one thread). `data` is borrowed for the call; `options` may be NULL (the
 * defaults). *out is new: release it with courier_json_tape_free. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL data with a length, NULL out), COURIER_E_JSON (as
 * courier_json_parse; err says line, column and byte), COURIER_E_TOO_LARGE (more than max_bytes,
 * or than 4 GiB - 1), COURIER_E_NO_MEMORY. Never crashes on any input. */
COURIER_API int courier_json_tape_parse(courier_json_tape **out, const void *data, size_t len,
                                        const courier_json_options *options, courier_error *err);
/* A tape of a value (borrowed for the call; its strings are copied). *out is new
 * (courier_json_tape_free). Any thread that may read the value.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL), COURIER_E_TOO_LARGE, COURIER_E_NO_MEMORY. */
COURIER_API int courier_json_tape_from_value(courier_json_tape **out, const courier_json *value, courier_error *err);
/* Releases a tape and everything borrowed from it. Accepts NULL. Any thread, once no other thread
 * reads it. */
COURIER_API void courier_json_tape_free(courier_json_tape *tape);
/* The entries (borrowed) and, in *count (may be NULL), how many. NULL for a NULL tape. Any thread. */
COURIER_API const courier_json_tape_entry *courier_json_tape_entries(const courier_json_tape *tape, size_t *count);
/* The base of STRING entries' offsets (borrowed). NULL for a NULL tape. Any thread. */
COURIER_API const uint8_t *courier_json_tape_text(const courier_json_tape *tape);
/* courier_json_number_text on a tape: the text of the number at `index` when it is kept as text
 * (COURIER_JSON_TAPE_NUMBER_TEXT), borrowed from the tape, not NUL-terminated, *len (may be NULL)
 * its length; NULL (and *len 0) otherwise, or for an index beyond the tape. Any thread. */
COURIER_API const char *courier_json_tape_number_text(const courier_json_tape *tape, size_t index, size_t *len);
/* courier_json_read_int64/_uint64/_double on a tape: the number at `index`, with the same rules and
 * errors (COURIER_E_INVALID_ARGUMENT also for an index beyond the tape). Any thread. */
COURIER_API int courier_json_tape_read_int64(int64_t *out, const courier_json_tape *tape, size_t index);
COURIER_API int courier_json_tape_read_uint64(uint64_t *out, const courier_json_tape *tape, size_t index);
COURIER_API int courier_json_tape_read_double(double *out, const courier_json_tape *tape, size_t index);
/* The index just past the value at `index` (its next sibling's). `index` must be below the count
 * (no error is reported: the tape is not checked). Any thread. */
COURIER_API size_t courier_json_tape_skip(const courier_json_tape *tape, size_t index);
/* The index of the value of member `key` of the object at `index`, or 0 when there is none (or the
 * entry is not an object). `hint` (may be NULL) is 0 or what an earlier call on the same object
 * left in it: the search starts there (members read in document order cost one comparison each)
 * and wraps around; on success *hint is set past the member found. Any thread. */
COURIER_API size_t courier_json_tape_get(const courier_json_tape *tape, size_t index, const char *key, size_t key_len,
                                         size_t *hint);
/* Writes the tape's value at `index` as JSON text, as courier_json_dump writes the same value
 * (COURIER_JSON_DUMP_* flags; members in the tape's order, DEAD ones left out). The tape is
 * borrowed for the call. *out is new: release it with courier_free; *out_len (may be NULL) gets
 * its length; the text is NUL-terminated. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL tape or
 * out, index beyond the tape), COURIER_E_NO_MEMORY. */
COURIER_API int courier_json_tape_dump(char **out, size_t *out_len, const courier_json_tape *tape, size_t index,
                                       unsigned flags, courier_error *err);
/* Finds the value at a key path below the value at `index` (as courier_json_path: dotted object
 * keys and array indexes; "" or NULL is the value itself): 1 with its index in *out, or 0 when
 * there is none. Any thread. */
COURIER_API int courier_json_tape_path(size_t *out, const courier_json_tape *tape, size_t index, const char *key_path);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_JSON_H */
