/*
 * route.c — paths built from objects and matched against patterns (RestKit's RKRoute and
 * RKPathMatcher, as HTHttp uses them), the API version segment (HLNetworking's apiVersion), and
 * the statuses a request accepts (YTKNetwork's statusCodeValidator). The bottom of http/: it calls
 * no other file of the layer (a request from an object, which fills a route into the request, is
 * request.c's courier_request_set_object).
 *
 * A pattern is a path with parameters: ':' then [A-Za-z0-9_.]+ (a key path into the object); a
 * backslash makes the next character literal. Filling takes each parameter's value from the object,
 * percent-encoded; matching checks a path against a pattern, a parameter taking one or more
 * characters up to the next '/' or the pattern's next literal character.
 */
#include "http/http.h"

/* ---- accepted statuses ------------------------------------------------------------------------------ */

bool cr_status_accepted(const cr_status_set *s, int status) {
    if (!s || s->n == 0) return status < 400;
    for (int i = 0; i < s->n; i++)
        if (status >= s->lo[i] && status <= s->hi[i]) return true;
    return false;
}

int courier_request_add_status_codes(courier_request *r, int lo, int hi) {
    if (!r || lo < 100 || hi > 599 || lo > hi || r->status_codes.n >= CR_STATUS_RANGES)
        return COURIER_E_INVALID_ARGUMENT;
    r->status_codes.lo[r->status_codes.n] = lo;
    r->status_codes.hi[r->status_codes.n] = hi;
    r->status_codes.n++;
    return COURIER_OK;
}

/* ---- the API version segment ------------------------------------------------------------------------ */

static bool version_valid(const char *v) {
    size_t n = strlen(v);
    if (n > CR_API_VERSION_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#' || c == '%' || c == '\\') return false;
    }
    return v[0] != '/' && (n == 0 || v[n - 1] != '/');
}

int courier_config_set_api_version(courier_config *c, const char *version, int review) {
    if (!c || (version && !version_valid(version))) return COURIER_E_INVALID_ARGUMENT;
    snprintf(c->api_version, sizeof c->api_version, "%s", version ? version : "");
    c->api_review = review != 0;
    return COURIER_OK;
}

int courier_request_set_api_version(courier_request *r, const char *version) {
    if (!r || (version && !version_valid(version))) return COURIER_E_INVALID_ARGUMENT;
    r->api_version_set = version != NULL;
    snprintf(r->api_version, sizeof r->api_version, "%s", version ? version : "");
    return COURIER_OK;
}

const char *cr_api_version_of(const courier_config *cfg, const courier_request *r, char buf[CR_API_VERSION_MAX + 2]) {
    const char *v = r->api_version_set ? r->api_version : cfg->api_version;
    if (!v[0]) return NULL;
    snprintf(buf, CR_API_VERSION_MAX + 2, "%s%s", v, cfg->api_review ? "r" : "");
    return buf;
}

int cr_join_url(cr_buf *out, const char *base, const char *version, const char *path) {
    size_t blen = strlen(base);
    while (blen && base[blen - 1] == '/') blen--;
    while (*path == '/') path++;
    size_t vlen = version ? strlen(version) : 0, plen = strlen(path);
    /* One reservation, then copies: every request with a relative path (and every cache key of
     * one) is joined here. */
    if (cr_buf_reserve(out, blen + (version ? vlen + 1 : 0) + 1 + plen)) return COURIER_E_NO_MEMORY;
    char *p = out->data + out->len;
    memcpy(p, base, blen);
    p += blen;
    if (version) {
        *p++ = '/';
        memcpy(p, version, vlen);
        p += vlen;
    }
    *p++ = '/';
    memcpy(p, path, plen);
    p += plen;
    *p = '\0';
    out->len = (size_t)(p - out->data);
    return COURIER_OK;
}

/* ---- patterns ------------------------------------------------------------------------------------------ */

static bool param_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

/* The parameter starting after the ':' at p: its length (0: not a parameter, a literal ':'). A key
 * path does not end with a '.', so "/:id." keeps its dot literal. */
static size_t param_len(const char *p) {
    size_t n = 0;
    while (param_char(p[n])) n++;
    while (n && p[n - 1] == '.') n--;
    return n;
}

bool cr_route_pattern_valid(const char *pattern) {
    if (!pattern || !*pattern) return false;
    for (const char *p = pattern; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == 0x7f || c == ' ' || c == '?' || c == '#') return false;
        if (c == '\\' && !*++p) return false;
    }
    return true;
}

/* Appends a scalar's text percent-encoded; COURIER_E_ROUTE_PARAMETER for other types. */
static int append_scalar(cr_buf *out, const json_t *v) {
    char num[40];
    int n;
    switch (json_typeof(v)) {
    case JSON_STRING: {
        size_t len = 0;
        const char *big = cr_json_bignum(v, &len); /* a number kept as text: that text */
        return big ? cr_percent_encode(out, big, len) : cr_percent_encode(out, json_string_value(v), json_string_length(v));
    }
    case JSON_INTEGER:
        n = snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return cr_buf_append(out, num, (size_t)n);
    case JSON_REAL:
        n = cr_json_format_real(json_real_value(v), num, sizeof num);
        return n > 0 ? cr_buf_append(out, num, (size_t)n) : COURIER_E_ROUTE_PARAMETER;
    case JSON_TRUE: return cr_buf_append_str(out, "true");
    case JSON_FALSE: return cr_buf_append_str(out, "false");
    default: return COURIER_E_ROUTE_PARAMETER;
    }
}

int cr_route_fill(const char *pattern, const json_t *object, cr_buf *out, json_t *used, courier_error *err) {
    /* An absolute URL's scheme and authority are literal (":8080" is a port, not a parameter). */
    const char *start = pattern;
    size_t scheme = cr_url_scheme_len(pattern);
    if (scheme) {
        const char *slash = strchr(pattern + scheme, '/');
        start = slash ? slash : pattern + strlen(pattern);
        if (cr_buf_append(out, pattern, (size_t)(start - pattern))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    for (const char *p = start; *p; p++) {
        if (*p == '\\') {
            p++;
            if (cr_buf_append_char(out, *p)) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            continue;
        }
        size_t n = *p == ':' ? param_len(p + 1) : 0;
        if (!n) {
            if (cr_buf_append_char(out, *p)) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            continue;
        }
        const char *name = p + 1;
        const json_t *v = object ? cr_json_path(object, name, n) : NULL;
        if (!v && !object)
            return cr_fail(err, COURIER_E_ROUTE_PARAMETER, "route parameter ':%.*s' has no value: give an object",
                           (int)n, name);
        if (!v)
            return cr_fail(err, COURIER_E_ROUTE_PARAMETER, "route parameter ':%.*s' is not in the object", (int)n,
                           name);
        int rc = append_scalar(out, v);
        if (rc == COURIER_E_ROUTE_PARAMETER)
            return cr_fail(err, rc, "route parameter ':%.*s' is a %s, not a string, number or boolean", (int)n, name,
                           courier_json_type_name(courier_json_typeof((const courier_json *)v)));
        if (rc) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        /* A top-level member used whole is not sent again. */
        if (used && !memchr(name, '.', n) && json_object_setn_new(used, name, n, json_true()))
            return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        p += n;
    }
    return COURIER_OK;
}

bool cr_route_match(const char *pattern, const char *path, size_t path_len) {
    const char *p = pattern, *s = path, *end = path + path_len;
    while (*p) {
        if (*p == '\\') {
            p++;
            if (s == end || *s != *p) return false;
            p++, s++;
            continue;
        }
        size_t n = *p == ':' ? param_len(p + 1) : 0;
        if (!n) {
            if (s == end || *s != *p) return false;
            p++, s++;
            continue;
        }
        p += 1 + n;
        /* The parameter's value: at least one character, up to '/' or the next literal. */
        char stop = *p == '\\' ? p[1] : *p;
        const char *v = s;
        while (s < end && *s != '/' && (!stop || *s != stop)) s++;
        if (s == v) return false;
    }
    /* A trailing '/' on one side only still matches. */
    if (s < end && *s == '/' && s + 1 == end) s++;
    return s == end;
}
