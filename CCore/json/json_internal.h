/*
 * json/json_internal.h — the JSON layer (options.c, json_tape.c, json.c, mapping.c, jspec.c) as the layers above
 * may use it: parsing with limits, key paths, writers, mappings, what a request asks of its
 * response's JSON (cr_jspec) and a response's JSON state (cr_jresp).
 */
#ifndef COURIER_JSON_INTERNAL_H
#define COURIER_JSON_INTERNAL_H

#include "base/base.h"

/* Hidden like every internal declaration (see base/base.h). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

/* ==== JSON and mapping (json.c, mapping.c) ===================================================== */

#define CR_JSON_DEFAULT_DEPTH CR_DEFAULT_JSON_MAX_DEPTH /* courier_setting_default (base/base.h) */
#define CR_JSON_MAX_DEPTH 2048 /* jansson's own compile-time limit */
#define CR_JSON_DEFAULT_MAX_BYTES CR_DEFAULT_MAX_RESPONSE
#define CR_JSON_DEFAULT_PARALLEL_MIN ((int64_t)256 * 1024) /* split top-level arrays from this size */
#define CR_JSON_MAX_PARTS 4

/* options.c: options with defaults filled in and limits clamped; `in` may be NULL. */
CR_HIDDEN void cr_json_options_resolve(const courier_json_options *in, courier_json_options *out);
/* json.c */
/* Parses with resolved options. *out new (json_decref). COURIER_E_JSON, _TOO_LARGE, _NO_MEMORY. */
CR_HIDDEN int cr_json_parse(const void *data, size_t len, const courier_json_options *opts, json_t **out,
                            courier_error *err);
/* One key path component (object key or decimal array index), and a whole dotted path. Borrowed. */
CR_HIDDEN const json_t *cr_json_step(const json_t *v, const char *seg, size_t len);
CR_HIDDEN const json_t *cr_json_path(const json_t *v, const char *path, size_t len);
/* Shortest round-trip text of a finite double, always with '.' or an exponent. Length or -1. */
CR_HIDDEN int cr_json_format_real(double d, char *buf, size_t size);
/* Appends v's JSON text (COURIER_JSON_DUMP_* flags) to out. */
CR_HIDDEN int cr_json_dump(const json_t *v, unsigned flags, cr_buf *out);
/* The one JSON writer besides jansson's (cr_json_dump and the journal's records use it): v in
 * decimal at p (room for 21 bytes; returns the length; snprintf costs ~1,500 instructions a call);
 * v appended in decimal; s (len bytes of UTF-8) appended as a JSON string, with the
 * COURIER_JSON_DUMP_ASCII and _ESCAPE_SLASH flags and CR_JSON_PUT_CONTROL_U (every control
 * character as \u00XX, never \n and the like: the journal's records keep their bytes). The
 * appenders return 0, or -1 without memory. */
#define CR_JSON_PUT_CONTROL_U 0x100u
#define CR_JSON_CSTRING SIZE_MAX /* as cr_json_put_string's len: s is NUL-terminated */
CR_HIDDEN size_t cr_json_format_int(char *p, int64_t v);
CR_HIDDEN int cr_json_put_int(cr_buf *b, int64_t v);
CR_HIDDEN int cr_json_put_string(cr_buf *b, const char *s, size_t len, unsigned flags);

/* Numbers that fit neither int64_t (an integer beyond it) nor a double (a real beyond DBL_MAX) are
 * kept as their text (RFC 8259 allows them; a reader decides what it can read them as). In a
 * jansson document such a number is a string holding CR_JSON_BIGNUM_MARK and then the number's text:
 * 0xFF never starts a string that a parse or a builder makes (they are UTF-8), and jansson copies,
 * compares and frees it as any string. courier_json_typeof calls it REAL; everything that reads a
 * jansson string tells it apart with cr_json_bignum / cr_json_is_str. On a tape it is a REAL entry
 * flagged COURIER_JSON_TAPE_NUMBER_TEXT (payload: the nearest double; length: the text's offset). */
#define CR_JSON_BIGNUM_MARK '\xFF'
/* The text (and *len, may be NULL) of a number kept as text, or NULL when v is not one. */
static inline const char *cr_json_bignum(const json_t *v, size_t *len) {
    if (!json_is_string(v) || json_string_length(v) < 2 || json_string_value(v)[0] != CR_JSON_BIGNUM_MARK) return NULL;
    if (len) *len = json_string_length(v) - 1;
    return json_string_value(v) + 1;
}
/* A string that is a string (not a number kept as text). */
static inline int cr_json_is_str(const json_t *v) { return json_is_string(v) && !cr_json_bignum(v, NULL); }
/* json_tape.c: a new jansson value of a number kept as text (len bytes of JSON number text). NULL
 * without memory. */
CR_HIDDEN json_t *cr_json_bignum_new(const char *text, size_t len);
/* json_tape.c: the length of the JSON number text at s (its characters up to the first other byte). */
CR_HIDDEN size_t cr_json_number_len(const char *s);
/* json_tape.c: strtod in the C locale over n bytes of JSON number text, read in place (the text must
 * lie in a NUL-terminated buffer, followed by a byte that ends the number: a tape's text, a jansson
 * string; it is copied only if strtod would not stop at n, so readers never allocate). *status: 0,
 * 1 when the value is beyond a double (the result is then +-HUGE_VAL), -1 without memory (the
 * result is then 0). The double is returned, not written through a
 * pointer: parse_number's value stays in a register (through a pointer its fast path cost 2%). */
CR_HIDDEN double cr_json_strtod(const char *s, size_t n, int *status);
/* Reading a number as int64, uint64 or double, once for both documents: from its int64 (is_int),
 * its double (else), or its kept text (text not NULL). COURIER_OK, COURIER_E_NUMBER_RANGE (beyond
 * the type, or a fraction for the integer types), COURIER_E_NO_MEMORY (a long text). */
CR_HIDDEN int cr_json_number_read(const char *text, size_t text_len, int is_int, int64_t iv, double dv,
                                  int64_t *i64, uint64_t *u64, double *d);

/* json_tape.c: courier_json_tape_parse starting with CR_JSON_TAPE_SMALL entries (992 bytes, under
 * glibc's large-request size: a larger first block made malloc consolidate its fast bins at every
 * parse of a journal record, ~50 entries; docs/design/journal.md, "Where replay's time goes"), grown by
 * doubling when short. For small documents of a known shape. */
#define CR_JSON_TAPE_SMALL 62
CR_HIDDEN int cr_json_tape_parse_small(courier_json_tape **out, const void *data, size_t len,
                                       const courier_json_options *opts, courier_error *err);
/* json_tape.c: frees the tape but its text (strings unescaped in place and NUL-terminated, where
 * the string entries pointed), which it returns: new (free), text_len + 1 bytes; *len its length
 * (without the terminator). NULL for NULL. What a reader of a small document keeps, so the strings
 * it read can point into the text instead of being copied (the journal's records). */
CR_HIDDEN char *cr_json_tape_release_text(courier_json_tape *t, size_t *len);
/* json_tape.c: a tape of entries and text built elsewhere (takes both, freed on failure). NULL
 * without memory. */
CR_HIDDEN courier_json_tape *cr_json_tape_adopt(courier_json_tape_entry *entries, size_t count, char *text,
                                                size_t text_len);
/* A jansson value of the tape's value at index (members DEAD on the tape left out). *out new.
 * COURIER_E_INVALID_ARGUMENT (index beyond the tape), COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_json_from_tape(const courier_json_tape *t, size_t index, json_t **out);
/* Appends a JSON object as form text: name=value for every leaf, nested objects as name[key], arrays
 * as name[] (the seeds' AFNetworking convention), true/false for booleans, an empty value for null;
 * percent-encoded. COURIER_E_INVALID_ARGUMENT (not an object, or nested deeper than 32) or
 * COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_json_form_encode(const json_t *object, cr_buf *out);
/* The same walk, each leaf given to emit (name and value not encoded; a non-zero return stops it). */
typedef int (*cr_form_emit_fn)(void *ctx, const char *name, size_t name_len, const char *value, size_t value_len);
CR_HIDDEN int cr_json_form_each(const json_t *object, cr_form_emit_fn emit, void *ctx);

/* mapping.c */
/* Adds a reference and seals (no more changes). NULL in, NULL out. Released by the _free. */
CR_HIDDEN courier_mapping *cr_mapping_retain(const courier_mapping *m);
/* jspec.c: the same for an envelope. */
CR_HIDDEN courier_envelope *cr_envelope_retain(const courier_envelope *e);
/* A key path a mapping or an envelope may name: not empty, no empty segment, valid UTF-8. */
CR_HIDDEN int cr_json_path_valid(const char *p);
/* A whole string read as a JSON-style number (no spaces, inf, nan or hex): 0 with *iv (*is_int) or
 * *dv, else -1. */
CR_HIDDEN int cr_json_number_from_string(const char *s, size_t len, json_int_t *iv, double *dv, int *is_int);
/* A real with no fractional part that fits an integer: 1 with *out, else 0. */
CR_HIDDEN int cr_json_real_is_integral(double d, json_int_t *out);
/* A mapping error at key path `path` (from the document's root; NULL as mapping.c's frames take it):
 * fills *where (may be NULL) and err with "expected `expected`, found `found`" (courier_json_types;
 * NONE: absent). Returns COURIER_E_MAPPING. */
CR_HIDDEN int cr_mapping_type_error(courier_mapping_error *where, courier_error *err, const char *path, int expected,
                                    int found);
/* Applies m to `in`; `prefix` is in's key path in its document, for error paths. *out new. */
CR_HIDDEN int cr_mapping_apply(const courier_mapping *m, const json_t *in, const char *prefix, json_t **out,
                               courier_mapping_error *where, courier_error *err);
/* The same on the tape: m applied to the value at `index` of `in`; *out a new tape of the output. */
CR_HIDDEN int cr_mapping_apply_tape(const courier_mapping *m, const courier_json_tape *in, size_t index,
                                    const char *prefix, courier_json_tape **out, courier_mapping_error *where,
                                    courier_error *err);

typedef struct cr_result_spec {
    char *name;
    char *key_path; /* NULL: the envelope's data path, else the root */
    courier_mapping *mapping;
    unsigned flags; /* COURIER_RESULT_* */
} cr_result_spec;

/* What a request asks of its response's JSON. */
typedef struct cr_jspec {
    cr_ext ext; /* jspec.c's hooks (request.c copies and frees it through them) */
    char *key_path;
    courier_mapping *mapping;
    cr_result_spec *results;
    size_t nresults;
    int envelope_set; /* 1: `envelope` replaces the engine's (NULL: none) */
    courier_envelope *envelope;
    /* Response descriptors whose method and path pattern matched at send (catalog.c), in
     * registration order: the first whose statuses hold the response's status applies its key
     * path and mapping (serialize.c), to a success without a key path or mapping of the request's
     * own, and to an error body (the error model, delivered with the failure). */
    struct cr_desc_spec { int lo, hi; char *key_path; courier_mapping *mapping; } *descs;
    size_t ndescs;
} cr_jspec;


/* One result of a response, read on the tape: a value of the body's tape (no mapping), or a
 * mapping's output (its own tape, the value at 0). Its jansson value is made on first ask
 * (serialize.c, cr_jresp_value): found at `path` in the response's document, or built from the
 * output tape; set once by compare-and-swap, as the document is. */
typedef struct cr_jval {
    int present;               /* 0: absent (an optional result, or no envelope data) */
    courier_json_tape *tape;   /* the mapping's output (owned), or NULL: the value is in the body's tape */
    size_t index;              /* the value's index in the body's tape (tape NULL), else 0 */
    char *path;                /* tape NULL: its key path in the body (NULL: the root) */
    _Atomic(json_t *) json;    /* made on first ask: owned when tape is set, else borrowed from doc */
} cr_jval;

typedef struct cr_named {
    char *name;
    cr_jval value;
} cr_named;

/* What a request asks of its JSON, edited in *r (made on first use): the checks and the work of
 * courier_request_set_key_path, _set_mapping, _add_result and _set_envelope (request.c). */
CR_HIDDEN int cr_jspec_set_key_path(cr_jspec **r, const char *key_path);
CR_HIDDEN int cr_jspec_set_mapping(cr_jspec **r, const courier_mapping *m);
CR_HIDDEN int cr_jspec_add_result(cr_jspec **r, const char *name, const char *key_path, const courier_mapping *m,
                                  unsigned flags);
CR_HIDDEN int cr_jspec_set_envelope(cr_jspec **r, const courier_envelope *e);
/* Appends a response descriptor (key path copied, mapping retained); *r made on first use. */
CR_HIDDEN int cr_jspec_add_desc(cr_jspec **r, int lo, int hi, const char *key_path, const courier_mapping *mapping);

/* A response's JSON: the body parsed on the tape (at completion when the request asks for a key path,
 * a mapping, results or an envelope; else on demand), the jansson document (on demand, or for an
 * envelope's check callback), the results and the envelope's verdict. */
typedef struct cr_jresp {
    _Atomic(json_t *) doc;     /* set once, by whichever thread parses first */
    _Atomic(courier_json_tape *) tape; /* the body's tape: set once, likewise */
    int decodable;             /* the content type has a decoder */
    cr_callback *decoder;      /* a custom decoder (retained), or NULL for JSON */
    char *content_type;
    courier_json_options options;
    int applied;               /* a key path, mapping or envelope data path was applied */
    cr_jval data;              /* the default result */
    cr_named *results;
    size_t nresults;
    int has_env_code;
    int64_t env_code;
    char *env_message;
    int has_merr;
    courier_mapping_error merr;
} cr_jresp;

/* Frees a response's JSON state (NULL-safe; courier_response_free calls it). */
CR_HIDDEN void cr_jresp_free(cr_jresp *j);
/* Clears a result (its tape, jansson value and path). */
CR_HIDDEN void cr_jval_clear(cr_jval *v);
/* Whether an envelope has a check callback (which reads the jansson document). */
CR_HIDDEN int cr_envelope_has_check(const courier_envelope *e);
/* Applies the envelope (may be NULL) and the spec (may be NULL) to the body's tape, filling j. `doc`
 * is the body's jansson document, needed only when cr_envelope_has_check(env) (else NULL). */
CR_HIDDEN int cr_json_apply_spec(const cr_jspec *s, const courier_envelope *env, const courier_json_tape *tape,
                                 const json_t *doc, cr_jresp *j, courier_error *err);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_JSON_INTERNAL_H */
