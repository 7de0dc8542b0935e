/*
 * json_tape.c — JSON parsed into a flat tape (courier_json_tape_*): the input of Swift's
 * ModelDecoder, which reads each value once in document order and needs neither jansson's
 * objects nor its hash tables.
 *
 * The parser is strict RFC 8259 with jansson's rules as courier_json_parse applies them (the fuzz
 * target checks that both accept the same texts and agree on every value): any value at the top,
 * whitespace only between tokens, no leading zeros, integers without fraction or exponent that fit
 * int64_t, reals that fit a double (underflow gives 0), any other number kept as its text (a REAL
 * entry flagged COURIER_JSON_TAPE_NUMBER_TEXT), a UTF-8 byte order mark before the text ignored, valid
 * UTF-8 only, no control characters in strings, \u escapes with paired surrogates, \u0000 only with
 * COURIER_JSON_ALLOW_NUL (and never in keys), duplicate keys an error unless allowed (then the last wins), a depth limit
 * checked before the next level is entered, a size limit checked first.
 *
 * The text is copied once; strings are unescaped in place in the copy (an escape never grows)
 * and NUL-terminated there, so a string entry is an offset and a length. Numbers are converted
 * while parsing: integers exactly, reals by Clinger's fast path when the digits and the exponent
 * allow an exact result, else by strtod_l in the C locale.
 */
#include "json/json_internal.h"

#include <errno.h>
#include <locale.h>
#ifdef __APPLE__
#include <xlocale.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct courier_json_tape {
    courier_json_tape_entry *entries;
    size_t count, cap;
    char *text; /* the text, strings unescaped in place and NUL-terminated */
    size_t text_len;
};

typedef courier_json_tape_entry entry;

/* ---- building ------------------------------------------------------------------------------------ */

static int grow(courier_json_tape *t) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    entry *e = realloc(t->entries, cap * sizeof *e);
    if (!e) return -1;
    t->entries = e;
    t->cap = cap;
    return 0;
}

/* Appends an entry; returns its index or SIZE_MAX without memory. */
static inline size_t emit(courier_json_tape *t, int type, uint8_t flags, uint32_t length, uint64_t payload) {
    if (t->count == t->cap && grow(t)) return SIZE_MAX;
    entry *e = &t->entries[t->count];
    e->type = (uint8_t)type;
    e->flags = flags;
    e->reserved = 0;
    e->length = length;
    e->payload = payload;
    return t->count++;
}

void courier_json_tape_free(courier_json_tape *t) {
    if (!t) return;
    free(t->entries);
    free(t->text);
    free(t);
}

char *cr_json_tape_release_text(courier_json_tape *t, size_t *len) {
    if (!t) return NULL;
    char *text = t->text;
    if (len) *len = t->text_len;
    free(t->entries);
    free(t);
    return text;
}

/* A tape of entries and text built elsewhere (the mapping's output): takes both (freed here when
 * this fails). NULL without memory. */
courier_json_tape *cr_json_tape_adopt(courier_json_tape_entry *entries, size_t count, char *text, size_t text_len) {
    courier_json_tape *t = calloc(1, sizeof *t);
    if (!t) {
        free(entries);
        free(text);
        return NULL;
    }
    t->entries = entries;
    t->count = t->cap = count;
    t->text = text;
    t->text_len = text_len;
    return t;
}

/* ---- the parser ------------------------------------------------------------------------------------ */

typedef struct parser {
    courier_json_tape *t;
    char *s;          /* the text (the tape's copy) */
    size_t len, pos;
    unsigned flags;   /* COURIER_JSON_ALLOW_* */
    int max_depth;
    const char *data; /* the caller's text, for error positions */
    courier_error *err;
} parser;

/* Character classes inside strings: 0 plain, 1 '"', 2 '\\', 3 control, 4 non-ASCII. */
static const unsigned char string_class[256] = {
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
};

/* Fails with the position of byte `at` as line, column (in bytes, from 1) and byte offset. */
static int fail_at(parser *p, size_t at, const char *what) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->data[i] == '\n') {
            line++;
            column = 1;
        } else {
            column++;
        }
    }
    return cr_fail(p->err, COURIER_E_JSON, "invalid JSON at line %zu, column %zu (byte %zu): %s", line, column, at,
                   what);
}

static int no_memory(parser *p) { return cr_fail(p->err, COURIER_E_NO_MEMORY, NULL); }

static inline void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = (unsigned char)p->s[p->pos];
        /* Above ' ': not white space, in one comparison (most calls find none: compact text). */
        if (c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t')) break;
        p->pos++;
    }
}

/* The length of the valid UTF-8 sequence at s[0..avail), or 0 (jansson's and cr_utf8_valid's rules:
 * no overlong forms, no surrogates, nothing above U+10FFFF). */
static size_t utf8_sequence(const unsigned char *s, size_t avail) {
    unsigned c = s[0], cp;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07;
    else return 0;
    if (avail <= n) return 0;
    for (size_t k = 1; k <= n; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    return n + 1;
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* Whether any of the 8 bytes of x is '"', '\\', a control character (< 0x20) or non-ASCII: a byte
 * that string_class does not call plain. (SWAR: "has a zero byte" is exact as a yes or no.) Nonzero
 * when one is: the high bit of each byte flagged, the lowest flagged being the first such byte
 * (a false flag, from a borrow, only ever lies above a true one). */
static inline uint64_t special8(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x) & high;
}

/* The string whose opening quote is at p->pos: unescaped in place, appended as a STRING entry. */
static int parse_string(parser *p) {
    char *s = p->s;
    size_t len = p->len, start = p->pos + 1, i = start, w;
    const unsigned char *u = (const unsigned char *)s;
    /* The common case: no escapes, so nothing moves. Plain bytes are skipped 8 at a time (a byte at
     * a time they were a third of a journal record's parse), then one at a time up to the first
     * byte that is not plain. */
    for (;;) {
        for (uint64_t x, m; i + 8 <= len; i += 8) {
            memcpy(&x, u + i, 8);
            if ((m = special8(x))) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                i += (size_t)__builtin_ctzll(m) >> 3; /* to the first byte that is not plain */
#endif
                break;
            }
        }
        while (i < len && string_class[u[i]] == 0) i++;
        if (i >= len) return fail_at(p, p->pos, "unterminated string");
        unsigned cls = string_class[u[i]];
        if (cls == 1) {
            w = i;
            goto done;
        }
        if (cls == 4) {
            size_t n = utf8_sequence(u + i, len - i);
            if (!n) return fail_at(p, i, "invalid UTF-8 in string");
            i += n;
            continue;
        }
        if (cls == 3) return fail_at(p, i, "control character in string");
        break; /* a backslash */
    }
    /* From the first escape on, bytes move left: w writes, i reads. */
    w = i;
    for (;;) {
        while (i < len && string_class[u[i]] == 0) s[w++] = s[i++];
        if (i >= len) return fail_at(p, p->pos, "unterminated string");
        unsigned cls = string_class[u[i]];
        if (cls == 1) break;
        if (cls == 3) return fail_at(p, i, "control character in string");
        if (cls == 4) {
            size_t n = utf8_sequence(u + i, len - i);
            if (!n) return fail_at(p, i, "invalid UTF-8 in string");
            memmove(s + w, s + i, n);
            w += n;
            i += n;
            continue;
        }
        /* An escape. */
        if (i + 1 >= len) return fail_at(p, p->pos, "unterminated string");
        char e = s[i + 1];
        switch (e) {
        case '"': s[w++] = '"'; i += 2; continue;
        case '\\': s[w++] = '\\'; i += 2; continue;
        case '/': s[w++] = '/'; i += 2; continue;
        case 'b': s[w++] = '\b'; i += 2; continue;
        case 'f': s[w++] = '\f'; i += 2; continue;
        case 'n': s[w++] = '\n'; i += 2; continue;
        case 'r': s[w++] = '\r'; i += 2; continue;
        case 't': s[w++] = '\t'; i += 2; continue;
        case 'u': break;
        default: return fail_at(p, i, "invalid escape");
        }
        unsigned cp, lo;
        if (i + 6 > len || hex4(s + i + 2, &cp)) return fail_at(p, i, "invalid escape");
        size_t at = i;
        i += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail_at(p, at, "invalid Unicode: a lone low surrogate");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i + 6 > len || s[i] != '\\' || s[i + 1] != 'u' || hex4(s + i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return fail_at(p, at, "invalid Unicode: a high surrogate without its low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        }
        if (cp == 0 && !(p->flags & COURIER_JSON_ALLOW_NUL))
            return fail_at(p, at, "\\u0000 is not allowed without COURIER_JSON_ALLOW_NUL");
        if (cp < 0x80) {
            s[w++] = (char)cp;
        } else if (cp < 0x800) {
            s[w++] = (char)(0xC0 | (cp >> 6));
            s[w++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            s[w++] = (char)(0xE0 | (cp >> 12));
            s[w++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            s[w++] = (char)(0x80 | (cp & 0x3F));
        } else {
            s[w++] = (char)(0xF0 | (cp >> 18));
            s[w++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            s[w++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            s[w++] = (char)(0x80 | (cp & 0x3F));
        }
    }
done:
    /* w <= i: the terminator overwrites the closing quote or bytes already read. */
    s[w] = '\0';
    p->pos = i + 1;
    if (emit(p->t, COURIER_JSON_STRING, 0, (uint32_t)(w - start), start) == SIZE_MAX) return no_memory(p);
    return COURIER_OK;
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* cr_json_strtod, inlined into parse_number (called there, its fast path lost 1.5%). */
static inline double strtod_c(const char *s, size_t n, int *status) {
    pthread_once(&c_locale_once, make_c_locale);
    /* In place: the text is a valid JSON number followed by a byte that ends it (a delimiter or the
     * buffer's NUL), so strtod stops at n; copied only if it does not (never for such text). */
    char *end = NULL;
    errno = 0;
    double d = c_locale ? strtod_l(s, &end, c_locale) : strtod(s, &end);
    if (end == s + n) {
        *status = errno == ERANGE && isinf(d) ? 1 : 0;
        return d;
    }
    char small[64], *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf) {
        *status = -1;
        return 0.0;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    d = c_locale ? strtod_l(buf, NULL, c_locale) : strtod(buf, NULL);
    *status = errno == ERANGE && isinf(d) ? 1 : 0;
    if (buf != small) free(buf);
    return d;
}

double cr_json_strtod(const char *s, size_t n, int *status) { return strtod_c(s, n, status); }

size_t cr_json_number_len(const char *s) { return strspn(s, "+-0123456789.eE"); }

json_t *cr_json_bignum_new(const char *text, size_t len) {
    char small[64], *buf = len + 1 <= sizeof small ? small : malloc(len + 1);
    if (!buf) return NULL;
    buf[0] = CR_JSON_BIGNUM_MARK;
    memcpy(buf + 1, text, len);
    json_t *v = json_stringn_nocheck(buf, len + 1);
    if (buf != small) free(buf);
    return v;
}

/* A number that fits neither int64_t nor a double (text at start..p->pos): kept as its text, a REAL
 * entry whose payload is the nearest double (+-infinity beyond a double) and whose length is the
 * text's offset (the copy is the caller's text, so the number's bytes are there unchanged). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline, cold)) /* rare: kept out of parse_number, whose code was 4% slower inlined */
#endif
static int emit_number_text(parser *p, size_t start) {
    int status;
    double d = cr_json_strtod(p->s + start, p->pos - start, &status);
    if (status < 0) return no_memory(p);
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    if (emit(p->t, COURIER_JSON_REAL, COURIER_JSON_TAPE_NUMBER_TEXT, (uint32_t)start, bits) == SIZE_MAX)
        return no_memory(p);
    return COURIER_OK;
}

/* Exact powers of ten (Clinger's fast path needs them exact: up to 10^22). */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int parse_number(parser *p) {
    const char *s = p->s;
    size_t len = p->len, start = p->pos, i = start;
    int negative = 0, real = 0;
    if (s[i] == '-') {
        negative = 1;
        i++;
    }
    if (i >= len || s[i] < '0' || s[i] > '9') return fail_at(p, start, "invalid number");
    uint64_t mantissa = 0;
    int digits = 0;        /* significant digits in mantissa (leading zeros not counted) */
    int dropped = 0;       /* significant digits beyond 19 that did not fit */
    int64_t exponent = 0;  /* decimal exponent applied to mantissa */
    if (s[i] == '0') {
        i++;
        if (i < len && s[i] >= '0' && s[i] <= '9') return fail_at(p, start, "invalid number: a leading zero");
    } else {
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (digits < 19) {
                mantissa = mantissa * 10 + (uint64_t)(s[i] - '0');
                digits++;
            } else {
                dropped++;
                exponent++;
            }
            i++;
        }
    }
    if (i < len && s[i] == '.') {
        real = 1;
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9') return fail_at(p, start, "invalid number: no digit after '.'");
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (digits < 19) {
                if (mantissa || s[i] != '0') {
                    mantissa = mantissa * 10 + (uint64_t)(s[i] - '0');
                    digits++;
                } else if (!mantissa) {
                    /* a leading zero of the fraction: only the exponent moves */
                }
                exponent--;
            } else {
                dropped++;
            }
            i++;
        }
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        real = 1;
        i++;
        int eneg = 0;
        if (i < len && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        if (i >= len || s[i] < '0' || s[i] > '9') return fail_at(p, start, "invalid number: no digit in the exponent");
        int64_t e = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (e < 100000000) e = e * 10 + (s[i] - '0');
            i++;
        }
        exponent += eneg ? -e : e;
    }
    p->pos = i;
    if (!real) {
        /* An integer: exactly, or kept as text beyond int64_t. */
        if (dropped || mantissa > (uint64_t)INT64_MAX + (uint64_t)negative) return emit_number_text(p, start);
        int64_t v = negative ? (int64_t)(0 - mantissa) : (int64_t)mantissa;
        if (emit(p->t, COURIER_JSON_INTEGER, 0, 0, (uint64_t)v) == SIZE_MAX) return no_memory(p);
        return COURIER_OK;
    }
    double d;
    if (!dropped && mantissa <= (UINT64_C(1) << 53) && exponent >= -22 && exponent <= 22) {
        d = (double)mantissa;
        d = exponent < 0 ? d / pow10_exact[-exponent] : d * pow10_exact[exponent];
        if (negative) d = -d;
    } else if (mantissa == 0 && !dropped) {
        d = negative ? -0.0 : 0.0;
    } else {
        /* The exact reading: strtod in the C locale over a NUL-terminated copy of the token; kept
         * as text beyond a double. */
        int status;
        d = strtod_c(s + start, i - start, &status);
        if (status) return status < 0 ? no_memory(p) : emit_number_text(p, start);
    }
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    if (emit(p->t, COURIER_JSON_REAL, 0, 0, bits) == SIZE_MAX) return no_memory(p);
    return COURIER_OK;
}

/* Key order for the duplicate check of large objects. */
typedef struct key_ref {
    const char *s;
    uint32_t len;
    size_t index;
} key_ref;

static int key_ref_cmp(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    int c = memcmp(x->s, y->s, x->len);
    if (c) return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Duplicate keys of the object at `obj` (just closed): an error, or with ALLOW_DUPLICATE_KEYS the
 * earlier members are marked DEAD (the last wins, as jansson). Small objects compare pairwise,
 * large ones sort their keys. */
static int check_duplicates(parser *p, size_t obj) {
    courier_json_tape *t = p->t;
    entry *e = t->entries;
    uint32_t n = e[obj].length;
    if (n < 2) return COURIER_OK;
    enum { SMALL = 16 };
    size_t small[SMALL];
    key_ref *refs = NULL;
    if (n <= SMALL) {
        size_t k = obj + 1;
        for (uint32_t m = 0; m < n; m++) {
            small[m] = k;
            size_t v = k + 1;
            k = e[v].type == COURIER_JSON_OBJECT || e[v].type == COURIER_JSON_ARRAY ? (size_t)e[v].payload : v + 1;
        }
        /* A key is compared with the earlier ones only when one of them may equal it: a bit per key
         * from its length and its first and last bytes (equal keys set the same bit). A journal
         * record's 16 keys were 120 comparisons at every parse. */
        uint64_t seen = 0;
        for (uint32_t a = 0; a < n; a++) {
            const entry *ka = &e[small[a]];
            const unsigned char *ks = (const unsigned char *)t->text + ka->payload;
            unsigned h = ka->length ? ka->length * 31u + ks[0] * 7u + ks[ka->length - 1] : 0;
            uint64_t bit = 1ull << (h & 63);
            bool maybe = (seen & bit) != 0;
            seen |= bit;
            if (!maybe) continue;
            for (uint32_t b = 0; b < a; b++) {
                entry *kb = &e[small[b]];
                if (kb->length != ka->length || (kb->flags & COURIER_JSON_TAPE_DEAD) ||
                    memcmp(t->text + kb->payload, t->text + ka->payload, ka->length) != 0)
                    continue;
                if (!(p->flags & COURIER_JSON_ALLOW_DUPLICATE_KEYS))
                    return fail_at(p, (size_t)ka->payload - 1, "duplicate object key");
                kb->flags |= COURIER_JSON_TAPE_DEAD;
                e[obj].length--;
            }
        }
        return COURIER_OK;
    }
    refs = malloc(n * sizeof *refs);
    if (!refs) return no_memory(p);
    size_t k = obj + 1;
    for (uint32_t m = 0; m < n; m++) {
        refs[m] = (key_ref){t->text + e[k].payload, e[k].length, k};
        size_t v = k + 1;
        k = e[v].type == COURIER_JSON_OBJECT || e[v].type == COURIER_JSON_ARRAY ? (size_t)e[v].payload : v + 1;
    }
    qsort(refs, n, sizeof *refs, key_ref_cmp);
    size_t first_dup = SIZE_MAX;
    uint32_t dead = 0;
    for (uint32_t m = 1; m < n; m++) {
        if (refs[m].len != refs[m - 1].len || memcmp(refs[m].s, refs[m - 1].s, refs[m].len) != 0) continue;
        if (refs[m].index < first_dup) first_dup = refs[m].index; /* the second occurrence, in text order */
        e[refs[m - 1].index].flags |= COURIER_JSON_TAPE_DEAD;
        dead++;
    }
    free(refs);
    if (first_dup != SIZE_MAX && !(p->flags & COURIER_JSON_ALLOW_DUPLICATE_KEYS)) {
        /* Report the first key that repeats an earlier one in text order. */
        return fail_at(p, (size_t)e[first_dup].payload - 1, "duplicate object key");
    }
    e[obj].length -= dead;
    return COURIER_OK;
}

/* A key and its ':' at p->pos (after whitespace). */
static int parse_key(parser *p) {
    if (p->pos >= p->len || p->s[p->pos] != '"') return fail_at(p, p->pos, "string or '}' expected");
    size_t at = p->pos;
    int rc = parse_string(p);
    if (rc) return rc;
    const entry *k = &p->t->entries[p->t->count - 1];
    if ((p->flags & COURIER_JSON_ALLOW_NUL) && memchr(p->s + k->payload, '\0', k->length))
        return fail_at(p, at, "NUL byte in object key not supported");
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != ':') return fail_at(p, p->pos, "':' expected");
    p->pos++;
    return COURIER_OK;
}

static int parse_document(parser *p) {
    courier_json_tape *t = p->t;
    size_t stack_small[64], *stack = stack_small;
    int depth = 0, rc = COURIER_OK;
    if (p->max_depth > 64 && !(stack = malloc((size_t)p->max_depth * sizeof *stack))) return no_memory(p);
    for (;;) {
        /* A value at p->pos. */
        skip_ws(p);
        if (p->pos >= p->len) {
            rc = fail_at(p, p->pos, "a value expected, found the end of the text");
            goto out;
        }
        char c = p->s[p->pos];
        if (c == '{' || c == '[') {
            if (depth >= p->max_depth) {
                rc = cr_fail(p->err, COURIER_E_JSON, "JSON nesting deeper than %d at byte %zu", p->max_depth, p->pos);
                goto out;
            }
            size_t idx = emit(t, c == '{' ? COURIER_JSON_OBJECT : COURIER_JSON_ARRAY, 0, 0, 0);
            if (idx == SIZE_MAX) {
                rc = no_memory(p);
                goto out;
            }
            stack[depth++] = idx;
            p->pos++;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == (c == '{' ? '}' : ']')) {
                p->pos++;
                t->entries[idx].payload = t->count;
                depth--;
                /* an empty container: a complete value */
            } else {
                if (c == '{' && (rc = parse_key(p))) goto out;
                continue;
            }
        } else if (c == '"') {
            if ((rc = parse_string(p))) goto out;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            if ((rc = parse_number(p))) goto out;
        } else if (c == 't' || c == 'f' || c == 'n') {
            const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
            size_t n = strlen(word);
            if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) {
                rc = fail_at(p, p->pos, "invalid token");
                goto out;
            }
            p->pos += n;
            if (emit(t, c == 'n' ? COURIER_JSON_NULL : COURIER_JSON_BOOL, c == 't' ? COURIER_JSON_TAPE_TRUE : 0, 0,
                     0) == SIZE_MAX) {
                rc = no_memory(p);
                goto out;
            }
        } else {
            rc = fail_at(p, p->pos, "invalid token");
            goto out;
        }
        /* A value is complete: count it in its container, then a ',' or the container's end. */
        for (;;) {
            skip_ws(p);
            if (depth == 0) {
                if (p->pos < p->len) rc = fail_at(p, p->pos, "end of text expected");
                goto out;
            }
            size_t top = stack[depth - 1];
            int object = t->entries[top].type == COURIER_JSON_OBJECT;
            t->entries[top].length++;
            if (p->pos >= p->len) {
                rc = fail_at(p, p->pos, object ? "',' or '}' expected, found the end of the text"
                                               : "',' or ']' expected, found the end of the text");
                goto out;
            }
            char d = p->s[p->pos];
            if (d == ',') {
                p->pos++;
                if (object) {
                    skip_ws(p);
                    if ((rc = parse_key(p))) goto out;
                }
                break;
            }
            if (d != (object ? '}' : ']')) {
                rc = fail_at(p, p->pos, object ? "',' or '}' expected" : "',' or ']' expected");
                goto out;
            }
            p->pos++;
            t->entries[top].payload = t->count;
            depth--;
            if (object && (rc = check_duplicates(p, top))) goto out;
        }
    }
out:
    if (stack != stack_small) free(stack);
    return rc;
}

static int tape_parse(courier_json_tape **out, const void *data, size_t len, const courier_json_options *opts,
                      courier_error *err, size_t entries);

int courier_json_tape_parse(courier_json_tape **out, const void *data, size_t len, const courier_json_options *opts,
                            courier_error *err) {
    /* About one entry per 8 bytes of typical documents; grown by doubling when short. */
    return tape_parse(out, data, len, opts, err, len / 8 + 16);
}

_Static_assert(CR_JSON_TAPE_SMALL * sizeof(entry) <= 1000, "a small tape's first block is under 1,008 bytes (glibc)");

int cr_json_tape_parse_small(courier_json_tape **out, const void *data, size_t len, const courier_json_options *opts,
                             courier_error *err) {
    return tape_parse(out, data, len, opts, err, CR_JSON_TAPE_SMALL);
}

static int tape_parse(courier_json_tape **out, const void *data, size_t len, const courier_json_options *opts,
                      courier_error *err, size_t entries) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!data && len) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "JSON data is NULL");
    courier_json_options o;
    cr_json_options_resolve(opts, &o);
    if ((int64_t)len > o.max_bytes)
        return cr_fail(err, COURIER_E_TOO_LARGE, "JSON text of %zu bytes is larger than the limit of %lld bytes", len,
                       (long long)o.max_bytes);
    if (len > UINT32_MAX - 1)
        return cr_fail(err, COURIER_E_TOO_LARGE, "JSON text of %zu bytes is larger than a tape holds", len);
    courier_json_tape *t = calloc(1, sizeof *t);
    if (!t || !(t->text = malloc(len + 1))) {
        free(t);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    if (len) memcpy(t->text, data, len);
    t->text[len] = '\0';
    t->text_len = len;
    t->cap = entries;
    if (!(t->entries = malloc(t->cap * sizeof *t->entries))) {
        courier_json_tape_free(t);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    parser p = {.t = t, .s = t->text, .len = len, .flags = o.flags, .max_depth = o.max_depth, .data = data, .err = err};
    /* A UTF-8 byte order mark before the text is ignored (RFC 8259 8.1 allows it); positions stay
     * the caller's byte offsets. */
    if (len >= 3 && memcmp(t->text, "\xEF\xBB\xBF", 3) == 0) p.pos = 3;
    int rc = parse_document(&p);
    if (rc != COURIER_OK) {
        courier_json_tape_free(t);
        return rc;
    }
    *out = t;
    return COURIER_OK;
}

/* ---- a tape of a jansson value ------------------------------------------------------------------------- */

static int from_value(courier_json_tape *t, cr_buf *text, const json_t *v) {
    size_t idx;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if ((idx = emit(t, COURIER_JSON_OBJECT, 0, (uint32_t)json_object_size(v), 0)) == SIZE_MAX) return -1;
        for (void *it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it)) {
            size_t klen = json_object_iter_key_len(it);
            if (klen > UINT32_MAX || emit(t, COURIER_JSON_STRING, 0, (uint32_t)klen, text->len) == SIZE_MAX ||
                cr_buf_append(text, json_object_iter_key(it), klen) || cr_buf_append_char(text, '\0') ||
                from_value(t, text, json_object_iter_value(it)))
                return -1;
        }
        t->entries[idx].payload = t->count;
        return 0;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (n > UINT32_MAX || (idx = emit(t, COURIER_JSON_ARRAY, 0, (uint32_t)n, 0)) == SIZE_MAX) return -1;
        for (size_t i = 0; i < n; i++)
            if (from_value(t, text, json_array_get(v, i))) return -1;
        t->entries[idx].payload = t->count;
        return 0;
    }
    case JSON_STRING: {
        size_t n = json_string_length(v);
        const char *num = cr_json_bignum(v, &n);
        if (num) { /* a number kept as text: its text (NUL-terminated) and its nearest double */
            int status;
            double d = cr_json_strtod(num, n, &status);
            uint64_t bits;
            size_t at = text->len;
            if (at > UINT32_MAX || status < 0) return -1;
            memcpy(&bits, &d, sizeof bits);
            if (emit(t, COURIER_JSON_REAL, COURIER_JSON_TAPE_NUMBER_TEXT, (uint32_t)at, bits) == SIZE_MAX ||
                cr_buf_append(text, num, n) || cr_buf_append_char(text, '\0'))
                return -1;
            return 0;
        }
        if (n > UINT32_MAX || emit(t, COURIER_JSON_STRING, 0, (uint32_t)n, text->len) == SIZE_MAX ||
            cr_buf_append(text, json_string_value(v), n) || cr_buf_append_char(text, '\0'))
            return -1;
        return 0;
    }
    case JSON_INTEGER:
        return emit(t, COURIER_JSON_INTEGER, 0, 0, (uint64_t)(int64_t)json_integer_value(v)) == SIZE_MAX ? -1 : 0;
    case JSON_REAL: {
        double d = json_real_value(v);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return emit(t, COURIER_JSON_REAL, 0, 0, bits) == SIZE_MAX ? -1 : 0;
    }
    case JSON_TRUE: return emit(t, COURIER_JSON_BOOL, COURIER_JSON_TAPE_TRUE, 0, 0) == SIZE_MAX ? -1 : 0;
    case JSON_FALSE: return emit(t, COURIER_JSON_BOOL, 0, 0, 0) == SIZE_MAX ? -1 : 0;
    case JSON_NULL: return emit(t, COURIER_JSON_NULL, 0, 0, 0) == SIZE_MAX ? -1 : 0;
    }
    return -1;
}

int courier_json_tape_from_value(courier_json_tape **out, const courier_json *value, courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!value) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "value is NULL");
    courier_json_tape *t = calloc(1, sizeof *t);
    if (!t) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    cr_buf text = {0};
    if (from_value(t, &text, (const json_t *)value) || cr_buf_reserve(&text, 1)) {
        cr_buf_free(&text);
        courier_json_tape_free(t);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    t->text = cr_buf_take(&text, &t->text_len);
    if (!t->text) {
        courier_json_tape_free(t);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    *out = t;
    return COURIER_OK;
}

/* ---- reading ---------------------------------------------------------------------------------------------- */

const courier_json_tape_entry *courier_json_tape_entries(const courier_json_tape *t, size_t *count) {
    if (count) *count = t ? t->count : 0;
    return t ? t->entries : NULL;
}

const uint8_t *courier_json_tape_text(const courier_json_tape *t) { return t ? (const uint8_t *)t->text : NULL; }

const char *courier_json_tape_number_text(const courier_json_tape *t, size_t index, size_t *len) {
    if (len) *len = 0;
    if (!t || index >= t->count || !(t->entries[index].flags & COURIER_JSON_TAPE_NUMBER_TEXT) ||
        t->entries[index].type != COURIER_JSON_REAL)
        return NULL;
    const char *s = t->text + t->entries[index].length;
    if (len) *len = cr_json_number_len(s);
    return s;
}

/* The number at index read as one of the types (one of the outs set). */
static int tape_read(const courier_json_tape *t, size_t index, int64_t *i64, uint64_t *u64, double *d) {
    if (!t || index >= t->count) return COURIER_E_INVALID_ARGUMENT;
    const entry *x = &t->entries[index];
    if (x->type == COURIER_JSON_INTEGER) return cr_json_number_read(NULL, 0, 1, (int64_t)x->payload, 0, i64, u64, d);
    if (x->type != COURIER_JSON_REAL) return COURIER_E_INVALID_ARGUMENT;
    size_t n = 0;
    const char *num = courier_json_tape_number_text(t, index, &n);
    double v;
    memcpy(&v, &x->payload, sizeof v);
    return cr_json_number_read(num, n, 0, 0, v, i64, u64, d);
}

int courier_json_tape_read_int64(int64_t *out, const courier_json_tape *t, size_t index) {
    return out ? tape_read(t, index, out, NULL, NULL) : COURIER_E_INVALID_ARGUMENT;
}

int courier_json_tape_read_uint64(uint64_t *out, const courier_json_tape *t, size_t index) {
    return out ? tape_read(t, index, NULL, out, NULL) : COURIER_E_INVALID_ARGUMENT;
}

int courier_json_tape_read_double(double *out, const courier_json_tape *t, size_t index) {
    return out ? tape_read(t, index, NULL, NULL, out) : COURIER_E_INVALID_ARGUMENT;
}

/* Integers exactly, reals without fraction when they fit, text-kept numbers from their digits (an
 * integer beyond int64 may fit uint64; a real beyond a double fits nothing but its nearest double,
 * which is infinite, so not even a double). */
int cr_json_number_read(const char *text, size_t text_len, int is_int, int64_t iv, double dv, int64_t *i64,
                        uint64_t *u64, double *d) {
    if (text) {
        int integer = !memchr(text, '.', text_len) && !memchr(text, 'e', text_len) && !memchr(text, 'E', text_len);
        if (d) {
            int status;
            *d = cr_json_strtod(text, text_len, &status);
            return status < 0 ? COURIER_E_NO_MEMORY : status ? COURIER_E_NUMBER_RANGE : COURIER_OK;
        }
        if (i64 || !integer || text_len == 0 || text[0] == '-') return COURIER_E_NUMBER_RANGE; /* beyond int64 */
        uint64_t v = 0;
        for (size_t k = 0; k < text_len; k++) {
            unsigned digit = (unsigned)(text[k] - '0');
            if (digit > 9 || v > (UINT64_MAX - digit) / 10) return COURIER_E_NUMBER_RANGE;
            v = v * 10 + digit;
        }
        *u64 = v;
        return COURIER_OK;
    }
    if (is_int) {
        if (d) *d = (double)iv;
        if (i64) *i64 = iv;
        if (u64) {
            if (iv < 0) return COURIER_E_NUMBER_RANGE;
            *u64 = (uint64_t)iv;
        }
        return COURIER_OK;
    }
    if (d) {
        *d = dv;
        return isfinite(dv) ? COURIER_OK : COURIER_E_NUMBER_RANGE;
    }
    if (dv != dv || trunc(dv) != dv) return COURIER_E_NUMBER_RANGE;
    if (i64) {
        if (!(dv >= -9223372036854775808.0 && dv < 9223372036854775808.0)) return COURIER_E_NUMBER_RANGE;
        *i64 = (int64_t)dv;
    } else {
        if (!(dv >= 0 && dv < 18446744073709551616.0)) return COURIER_E_NUMBER_RANGE;
        *u64 = (uint64_t)dv;
    }
    return COURIER_OK;
}

static inline size_t skip(const entry *e, size_t i) {
    return e[i].type == COURIER_JSON_OBJECT || e[i].type == COURIER_JSON_ARRAY ? (size_t)e[i].payload : i + 1;
}

size_t courier_json_tape_skip(const courier_json_tape *t, size_t index) {
    if (!t || index >= t->count) return index + 1;
    return skip(t->entries, index);
}

size_t courier_json_tape_get(const courier_json_tape *t, size_t index, const char *key, size_t key_len, size_t *hint) {
    if (!t || index >= t->count || t->entries[index].type != COURIER_JSON_OBJECT || (!key && key_len)) return 0;
    const entry *e = t->entries;
    size_t first = index + 1, end = (size_t)e[index].payload;
    size_t from = hint && *hint > index && *hint < end ? *hint : first;
    for (int pass = 0; pass < 2; pass++) {
        size_t k = pass ? first : from, stop = pass ? from : end;
        while (k < stop) {
            size_t v = k + 1, next = skip(e, v);
            if (e[k].length == key_len && !(e[k].flags & COURIER_JSON_TAPE_DEAD) &&
                (key_len == 0 || memcmp(t->text + e[k].payload, key, key_len) == 0)) {
                if (hint) *hint = next;
                return v;
            }
            k = next;
        }
    }
    return 0;
}

int courier_json_tape_path(size_t *out, const courier_json_tape *t, size_t index, const char *path) {
    if (!t || index >= t->count || !out) return 0;
    if (!path) {
        *out = index;
        return 1;
    }
    const entry *e = t->entries;
    size_t len = strlen(path), i = 0, v = index;
    while (i < len) {
        const char *dot = memchr(path + i, '.', len - i);
        size_t end = dot ? (size_t)(dot - path) : len, seg = end - i;
        if (e[v].type == COURIER_JSON_OBJECT) {
            v = courier_json_tape_get(t, v, path + i, seg, NULL);
        } else if (e[v].type == COURIER_JSON_ARRAY) {
            size_t n = 0;
            if (seg == 0 || seg > 19) return 0;
            for (size_t k = i; k < end; k++) {
                if (path[k] < '0' || path[k] > '9') return 0;
                n = n * 10 + (size_t)(path[k] - '0');
            }
            if (n >= e[v].length) return 0;
            size_t k = v + 1;
            while (n--) k = skip(e, k);
            v = k;
        } else {
            return 0;
        }
        if (!v) return 0;
        i = end + 1;
        if (dot && i == len) return 0; /* a trailing dot names an empty key that cannot be written */
    }
    *out = v;
    return 1;
}

/* ---- a jansson value of a tape ----------------------------------------------------------------------------- */

int cr_json_from_tape(const courier_json_tape *t, size_t index, json_t **out) {
    *out = NULL;
    if (!t || index >= t->count) return COURIER_E_INVALID_ARGUMENT;
    const entry *e = t->entries;
    size_t end = skip(e, index), depth = 0, cap = 32, i = index;
    struct open { json_t *c; size_t end; int object; } small[32], *st = small;
    json_t *root = NULL;
    for (;;) {
        while (depth && i == st[depth - 1].end) depth--;
        if (i >= end) break;
        json_t *parent = depth ? st[depth - 1].c : NULL;
        const char *key = NULL;
        size_t klen = 0;
        if (parent && st[depth - 1].object) {
            if (e[i].flags & COURIER_JSON_TAPE_DEAD) { /* shadowed by a later duplicate: left out */
                i = skip(e, i + 1);
                continue;
            }
            key = t->text + e[i].payload;
            klen = e[i].length;
            i++;
        }
        const entry *x = &e[i];
        json_t *v = NULL;
        switch (x->type) {
        case COURIER_JSON_OBJECT: v = json_object(); break;
        case COURIER_JSON_ARRAY: v = json_array(); break;
        case COURIER_JSON_STRING: v = json_stringn_nocheck(t->text + x->payload, x->length); break;
        case COURIER_JSON_INTEGER: v = json_integer((json_int_t)(int64_t)x->payload); break;
        case COURIER_JSON_REAL: {
            if (x->flags & COURIER_JSON_TAPE_NUMBER_TEXT) {
                const char *num = t->text + x->length;
                v = cr_json_bignum_new(num, cr_json_number_len(num));
                break;
            }
            double d;
            memcpy(&d, &x->payload, sizeof d);
            v = json_real(d);
            break;
        }
        case COURIER_JSON_BOOL: v = json_boolean(x->flags & COURIER_JSON_TAPE_TRUE); break;
        default: v = json_null(); break;
        }
        if (!v) goto oom;
        int container = x->type == COURIER_JSON_OBJECT || x->type == COURIER_JSON_ARRAY;
        if (container && depth == cap) {
            struct open *p = st == small ? malloc(2 * cap * sizeof *p) : realloc(st, 2 * cap * sizeof *p);
            if (!p) {
                json_decref(v);
                goto oom;
            }
            if (st == small) memcpy(p, small, sizeof small);
            st = p;
            cap *= 2;
        }
        if (!parent) root = v;
        else if (key ? json_object_setn_new_nocheck(parent, key, klen, v) : json_array_append_new(parent, v))
            goto oom; /* the _new setters release v when they fail */
        if (container) st[depth++] = (struct open){v, (size_t)x->payload, x->type == COURIER_JSON_OBJECT};
        i++;
    }
    if (st != small) free(st);
    *out = root;
    return COURIER_OK;
oom:
    if (st != small) free(st);
    if (root) json_decref(root);
    return COURIER_E_NO_MEMORY;
}
