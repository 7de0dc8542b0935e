/*
 * charset.c — text in other character sets than UTF-8 (HTHttp's stringEncoding), through the C
 * library's iconv: parameters converted from UTF-8 before they are percent-encoded, a response's
 * body converted to UTF-8 by the charset its Content-Type names. Conversions are strict: a
 * character the target cannot hold, or bytes that are not valid in the source, fail with
 * COURIER_E_CHARSET (never a silent '?' or a transliteration).
 */
#include "base/base.h"

#include <errno.h>
#include <iconv.h>
#include <strings.h>

bool cr_charset_is_utf8(const char *charset) {
    return !charset || strcasecmp(charset, "UTF-8") == 0 || strcasecmp(charset, "UTF8") == 0;
}

int cr_charset_check(const char *charset) {
    if (!charset || !*charset || strlen(charset) > 64) return COURIER_E_UNKNOWN_CHARSET;
    for (const char *p = charset; *p; p++) /* a name, not an iconv suffix ("//TRANSLIT") */
        if (*p == '/' || (unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) return COURIER_E_UNKNOWN_CHARSET;
    if (cr_charset_is_utf8(charset)) return COURIER_OK;
    iconv_t cd = iconv_open(charset, "UTF-8");
    if (cd == (iconv_t)-1) return COURIER_E_UNKNOWN_CHARSET;
    iconv_close(cd);
    return COURIER_OK;
}

/* Converts len bytes of s from `from` to `to`, appending to out. */
static int convert(cr_buf *out, const char *to, const char *from, const char *s, size_t len) {
    iconv_t cd = iconv_open(to, from);
    if (cd == (iconv_t)-1) return errno == EINVAL ? COURIER_E_UNKNOWN_CHARSET : COURIER_E_INTERNAL;
    int rc = COURIER_OK;
    char *in = (char *)s;
    size_t in_left = len;
    /* One pass with room for the common growth (4 bytes per input byte covers UTF-8 from any
     * single- or double-byte charset); E2BIG grows the buffer and goes on. The last call with a
     * NULL input flushes a stateful encoding's shift back to the initial state (ISO-2022-JP). */
    for (int flushing = 0;;) {
        if (cr_buf_reserve(out, (in_left ? in_left : 4) * 4 + 16)) {
            rc = COURIER_E_NO_MEMORY;
            break;
        }
        char *o = out->data + out->len;
        size_t o_left = out->cap - out->len - 1;
        size_t n = flushing ? iconv(cd, NULL, NULL, &o, &o_left) : iconv(cd, &in, &in_left, &o, &o_left);
        out->len = (size_t)(o - out->data);
        out->data[out->len] = '\0';
        if (n != (size_t)-1) {
            if (flushing) break;
            flushing = 1;
            continue;
        }
        if (errno == E2BIG) continue;
        rc = COURIER_E_CHARSET; /* EILSEQ (not representable / invalid), EINVAL (cut short) */
        break;
    }
    iconv_close(cd);
    return rc;
}

int cr_charset_from_utf8(cr_buf *out, const char *charset, const char *s, size_t len) {
    if (cr_charset_is_utf8(charset)) {
        if (!cr_utf8_valid(s, len)) return COURIER_E_CHARSET;
        return cr_buf_append(out, s, len) ? COURIER_E_NO_MEMORY : COURIER_OK;
    }
    return convert(out, charset, "UTF-8", s, len);
}

int cr_charset_to_utf8(cr_buf *out, const char *charset, const char *s, size_t len) {
    if (cr_charset_is_utf8(charset)) {
        if (!cr_utf8_valid(s, len)) return COURIER_E_CHARSET;
        return cr_buf_append(out, s, len) ? COURIER_E_NO_MEMORY : COURIER_OK;
    }
    return convert(out, "UTF-8", charset, s, len);
}

int cr_content_type_charset(const char *content_type, char *out, size_t size) {
    if (size) out[0] = '\0';
    if (!content_type) return 0;
    const char *p = strchr(content_type, ';');
    while (p) {
        p++;
        while (*p == ' ' || *p == '\t') p++;
        const char *eq = strchr(p, '=');
        const char *semi = strchr(p, ';');
        if (eq && (!semi || eq < semi)) {
            size_t klen = (size_t)(eq - p);
            while (klen && (p[klen - 1] == ' ' || p[klen - 1] == '\t')) klen--;
            if (klen == 7 && strncasecmp(p, "charset", 7) == 0) {
                const char *v = eq + 1;
                while (*v == ' ' || *v == '\t') v++;
                size_t vlen;
                if (*v == '"') {
                    v++;
                    const char *q = strchr(v, '"');
                    vlen = q ? (size_t)(q - v) : strlen(v);
                } else {
                    vlen = semi ? (size_t)(semi - v) : strlen(v);
                    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
                }
                if (vlen + 1 > size) return -1;
                memcpy(out, v, vlen);
                out[vlen] = '\0';
                return vlen ? 1 : 0;
            }
        }
        p = semi;
    }
    return 0;
}
