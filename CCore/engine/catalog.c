/*
 * catalog.c — what an engine knows by name: the API catalogue (HLNetworking's HLAPICenter: request
 * templates declared once, by module, used by name), routes (RestKit's RKRouter: a path pattern per
 * name, or per object type and method) and response descriptors (RKResponseDescriptor: the key
 * path and mapping chosen by method, path pattern and status).
 *
 * A declaration is kept as the JSON object it was given in and applied through the request setters
 * each time a request is made from it, so every language declares APIs the same way (a catalogue
 * file serves all of them) and a declaration can name everything a setter can. Any thread: one
 * mutex guards the three lists; nothing is called with it held but copies.
 */
#include "internal.h"

#include <limits.h>

typedef struct cr_api {
    char *name;
    json_t *decl;
} cr_api;

typedef struct cr_route {
    char *name;   /* NULL: a class route */
    char *type;   /* NULL: a named route */
    char *method; /* NULL: any (class routes), GET (named routes) */
    char *pattern;
} cr_route;

typedef struct cr_desc {
    char *method;  /* NULL: any */
    char *pattern; /* NULL: any path */
    int lo, hi;
    char *key_path;
    courier_mapping *mapping;
} cr_desc;

typedef struct cr_catalog {
    pthread_mutex_t lock;
    cr_api *apis; /* sorted by name */
    size_t napis;
    cr_route *routes;
    size_t nroutes;
    cr_desc *descs;
    size_t ndescs;
    atomic_size_t ndescs_seen; /* read without the lock by every send */
} cr_catalog;

int cr_catalog_new(courier_engine *e) {
    cr_catalog *c = calloc(1, sizeof *c);
    if (!c) return COURIER_E_NO_MEMORY;
    pthread_mutex_init(&c->lock, NULL);
    e->catalog = c;
    return COURIER_OK;
}

static void route_clear(cr_route *r) {
    free(r->name);
    free(r->type);
    free(r->method);
    free(r->pattern);
}

void cr_catalog_free(courier_engine *e) {
    cr_catalog *c = e->catalog;
    if (!c) return;
    for (size_t i = 0; i < c->napis; i++) {
        free(c->apis[i].name);
        json_decref(c->apis[i].decl);
    }
    free(c->apis);
    for (size_t i = 0; i < c->nroutes; i++) route_clear(&c->routes[i]);
    free(c->routes);
    for (size_t i = 0; i < c->ndescs; i++) {
        free(c->descs[i].method);
        free(c->descs[i].pattern);
        free(c->descs[i].key_path);
        courier_mapping_free(c->descs[i].mapping);
    }
    free(c->descs);
    pthread_mutex_destroy(&c->lock);
    free(c);
    e->catalog = NULL;
}

/* ---- declarations ------------------------------------------------------------------------------------- */

static bool name_valid(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (!n || n > 200 || s[0] == '.' || s[n - 1] == '.' || strstr(s, "..")) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '-' || ch == '.'))
            return false;
    }
    return true;
}

/* A value named in lower case ("cache_first") or given as its number. */
static int enum_value(const json_t *v, const char *const *names, const int *values, size_t n, int *out) {
    if (json_is_integer(v)) {
        *out = (int)json_integer_value(v);
        return json_integer_value(v) == *out ? COURIER_OK : COURIER_E_CATALOG;
    }
    if (!cr_json_is_str(v)) return COURIER_E_CATALOG;
    for (size_t i = 0; i < n; i++)
        if (strcmp(json_string_value(v), names[i]) == 0) {
            *out = values[i];
            return COURIER_OK;
        }
    return COURIER_E_CATALOG;
}

#define ENUM(v, names, values, out) enum_value(v, names, values, sizeof names / sizeof names[0], out)

static const char *const cache_names[] = {"no_cache", "cache_first", "write_only", "http", "http_shared"};
static const int cache_values[] = {COURIER_CACHE_NO_CACHE, COURIER_CACHE_CACHE_FIRST, COURIER_CACHE_WRITE_ONLY,
                                   COURIER_CACHE_HTTP, COURIER_CACHE_HTTP_SHARED};
static const char *const freeze_names[] = {"never", "auto", "manual"};
static const int freeze_values[] = {COURIER_FREEZE_NEVER, COURIER_FREEZE_AUTO, COURIER_FREEZE_MANUAL};
static const char *const priority_names[] = {"low", "normal", "high"};
static const int priority_values[] = {COURIER_PRIORITY_LOW, COURIER_PRIORITY_NORMAL, COURIER_PRIORITY_HIGH};
static const char *const encoding_names[] = {"form", "json"};
static const int encoding_values[] = {COURIER_BODY_FORM, COURIER_BODY_JSON};

static int bad(courier_error *err, const char *api, const char *field, const char *why) {
    return cr_fail(err, COURIER_E_CATALOG, "API '%.100s': \"%.40s\" %s", api, field, why);
}

static int status_codes(courier_request *r, const json_t *v, const char *api, courier_error *err) {
    if (!json_is_array(v)) return bad(err, api, "status_codes", "is not an array");
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *x = json_array_get(v, i);
        json_int_t lo, hi;
        if (json_is_integer(x)) lo = hi = json_integer_value(x);
        else if (json_is_array(x) && json_array_size(x) == 2 && json_is_integer(json_array_get(x, 0)) &&
                 json_is_integer(json_array_get(x, 1)))
            lo = json_integer_value(json_array_get(x, 0)), hi = json_integer_value(json_array_get(x, 1));
        else return bad(err, api, "status_codes", "holds something other than a status or a [lo, hi] pair");
        if (lo < 100 || hi > 599 || courier_request_add_status_codes(r, (int)lo, (int)hi))
            return bad(err, api, "status_codes", "holds a bad range (100..599, lo <= hi, at most 8)");
    }
    return COURIER_OK;
}

static int freeze(courier_request *r, const json_t *v, const char *api, courier_error *err) {
    int policy = COURIER_FREEZE_AUTO;
    int64_t expiry_ms = 0;
    unsigned flags = 0;
    if (json_is_object(v)) {
        const char *k;
        const json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (strcmp(k, "policy") == 0) {
                if (ENUM(x, freeze_names, freeze_values, &policy)) return bad(err, api, "freeze.policy", "is not never, auto or manual");
            } else if (strcmp(k, "expiry_ms") == 0) {
                if (!json_is_integer(x) || json_integer_value(x) < 0) return bad(err, api, "freeze.expiry_ms", "is not a count of milliseconds");
                expiry_ms = json_integer_value(x);
            } else if (strcmp(k, "unordered") == 0 || strcmp(k, "on_ambiguous") == 0) {
                if (!json_is_boolean(x)) return bad(err, api, k, "is not a boolean");
                if (json_is_true(x)) flags |= k[0] == 'u' ? COURIER_FREEZE_UNORDERED : COURIER_FREEZE_ON_AMBIGUOUS;
            } else {
                return bad(err, api, k, "is not a field of freeze");
            }
        }
    } else if (ENUM(v, freeze_names, freeze_values, &policy)) {
        return bad(err, api, "freeze", "is not never, auto, manual or an object");
    }
    if (courier_request_set_freeze(r, policy, expiry_ms, flags)) return bad(err, api, "freeze", "is not a valid freeze");
    return COURIER_OK;
}

/* One field of a declaration, through its setter. */
static int apply_field(courier_request *r, const char *k, const json_t *v, const char *api, courier_error *err) {
    int rc = COURIER_OK, n;
    if (strcmp(k, "method") == 0 || strcmp(k, "path") == 0 || strcmp(k, "description") == 0) {
        if (!cr_json_is_str(v)) return bad(err, api, k, "is not a string");
    } else if (strcmp(k, "params") == 0) {
        if (!json_is_object(v)) return bad(err, api, k, "is not an object");
        rc = cr_form_flatten(v, &r->params);
        if (rc == COURIER_E_INVALID_ARGUMENT || rc == COURIER_E_INVALID_ENCODING) return bad(err, api, k, "holds a bad value");
    } else if (strcmp(k, "headers") == 0) {
        if (!json_is_object(v)) return bad(err, api, k, "is not an object");
        const char *hk;
        const json_t *hv;
        json_object_foreach((json_t *)v, hk, hv) {
            if (!cr_json_is_str(hv)) return bad(err, api, hk, "(a header) is not a string");
            if ((rc = courier_request_add_header(r, hk, json_string_value(hv))))
                return cr_fail(err, rc, "API '%.100s': header \"%.40s\" is not valid", api, hk);
        }
    } else if (strcmp(k, "base_url") == 0) {
        if (!cr_json_is_str(v)) return bad(err, api, k, "is not a string");
        if ((rc = courier_request_set_base_url(r, json_string_value(v))))
            return cr_fail(err, rc, "API '%.100s': base_url is not an http(s) URL", api);
    } else if (strcmp(k, "use_default_params") == 0) {
        if (!json_is_boolean(v)) return bad(err, api, k, "is not a boolean");
        rc = courier_request_set_use_default_params(r, json_is_true(v));
    } else if (strcmp(k, "body_encoding") == 0) {
        if (ENUM(v, encoding_names, encoding_values, &n)) return bad(err, api, k, "is not form or json");
        rc = courier_request_set_body_encoding(r, (courier_body_encoding)n);
    } else if (strcmp(k, "timeout_ms") == 0) {
        if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > LONG_MAX)
            return bad(err, api, k, "is not a positive count of milliseconds");
        rc = courier_request_set_timeout_ms(r, (long)json_integer_value(v));
    } else if (strcmp(k, "api_version") == 0) {
        if (!cr_json_is_str(v) || courier_request_set_api_version(r, json_string_value(v)))
            return bad(err, api, k, "is not a version segment");
    } else if (strcmp(k, "status_codes") == 0) {
        return status_codes(r, v, api, err);
    } else if (strcmp(k, "priority") == 0) {
        if (ENUM(v, priority_names, priority_values, &n) || courier_request_set_priority(r, (courier_priority)n))
            return bad(err, api, k, "is not low, normal or high");
    } else if (strcmp(k, "cache_policy") == 0) {
        if (ENUM(v, cache_names, cache_values, &n) || courier_request_set_cache_policy(r, n))
            return bad(err, api, k, "is not a cache policy");
    } else if (strcmp(k, "cache_expiry") == 0) {
        if (!json_is_integer(v) || courier_request_set_cache_expiry_ms(r, json_integer_value(v) * 1000))
            return bad(err, api, k, "is not a count of seconds");
    } else if (strcmp(k, "cache_key_filter") == 0) {
        if (!json_is_array(v)) return bad(err, api, k, "is not an array");
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!cr_json_is_str(json_array_get(v, i)) ||
                courier_request_add_cache_key_filter(r, json_string_value(json_array_get(v, i))))
                return bad(err, api, k, "holds something other than a parameter name");
    } else if (strcmp(k, "freeze") == 0) {
        return freeze(r, v, api, err);
    } else if (strcmp(k, "key_path") == 0) {
        if (!cr_json_is_str(v) || courier_request_set_key_path(r, json_string_value(v)))
            return bad(err, api, k, "is not a key path");
    } else {
        return bad(err, api, k, "is not a field of a declaration");
    }
    return rc ? cr_fail(err, rc, "API '%.100s': \"%.40s\" cannot be applied", api, k) : COURIER_OK;
}

/* A new request from a declaration. */
static int apply_decl(courier_request **out, const json_t *decl, const char *api, courier_error *err) {
    *out = NULL;
    if (!json_is_object(decl)) return cr_fail(err, COURIER_E_CATALOG, "API '%.100s' is not a JSON object", api);
    const json_t *path = json_object_get(decl, "path"), *method = json_object_get(decl, "method");
    if (!cr_json_is_str(path)) return bad(err, api, "path", "is missing or not a string");
    if (method && (!cr_json_is_str(method) || !cr_is_token(json_string_value(method), json_string_length(method))))
        return bad(err, api, "method", "is not a method token");
    courier_request *r = NULL;
    int rc = courier_request_new(&r, method ? json_string_value(method) : "GET", json_string_value(path));
    if (rc) return cr_fail(err, rc, "API '%.100s': cannot make its request", api);
    /* A path with parameters waits for courier_request_set_object (its send fails until then);
     * one without has its escapes removed now, as a route's is. */
    cr_buf filled = {0};
    courier_error ferr;
    rc = cr_route_fill(r->target, NULL, &filled, NULL, &ferr);
    if (rc == COURIER_E_ROUTE_PARAMETER) {
        r->route_unfilled = 1;
    } else if (rc == COURIER_OK) {
        char *t = cr_buf_take(&filled, NULL);
        if (t) cr_request_take_target(r, t);
        else rc = COURIER_E_NO_MEMORY;
    }
    cr_buf_free(&filled);
    if (rc != COURIER_OK && rc != COURIER_E_ROUTE_PARAMETER) {
        courier_request_free(r);
        return cr_fail(err, rc, NULL);
    }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)decl, k, v) {
        if ((rc = apply_field(r, k, v, api, err))) {
            courier_request_free(r);
            return rc;
        }
    }
    *out = r;
    return COURIER_OK;
}

/* ---- the catalogue ----------------------------------------------------------------------------------- */

/* Index of name, or where it would go (with *found 0). */
static size_t api_find(const cr_catalog *c, const char *name, int *found) {
    size_t lo = 0, hi = c->napis;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int cmp = strcmp(c->apis[mid].name, name);
        if (cmp == 0) {
            *found = 1;
            return mid;
        }
        if (cmp < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = 0;
    return lo;
}

/* Puts the (checked) declarations in, replacing those of the same name; takes the decls. */
static int api_insert(cr_catalog *c, char **names, json_t **decls, size_t n) {
    pthread_mutex_lock(&c->lock);
    cr_api *a = realloc(c->apis, (c->napis + n + 1) * sizeof *a);
    if (!a) {
        pthread_mutex_unlock(&c->lock);
        return COURIER_E_NO_MEMORY;
    }
    c->apis = a;
    for (size_t i = 0; i < n; i++) {
        int found;
        size_t at = api_find(c, names[i], &found);
        if (found) {
            json_decref(c->apis[at].decl);
            free(names[i]);
        } else {
            memmove(&c->apis[at + 1], &c->apis[at], (c->napis - at) * sizeof *c->apis);
            c->apis[at].name = names[i];
            c->napis++;
        }
        c->apis[at].decl = decls[i];
        names[i] = NULL;
        decls[i] = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    return COURIER_OK;
}

/* Checks a declaration by applying it to a scratch request. */
static int check_decl(const json_t *decl, const char *name, courier_error *err) {
    courier_request *r;
    int rc = apply_decl(&r, decl, name, err);
    courier_request_free(r);
    return rc;
}

int courier_engine_add_api(courier_engine *e, const char *name, const courier_json *declaration, courier_error *err) {
    cr_error_clear(err);
    if (!e || !declaration) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or declaration is NULL");
    if (!name_valid(name)) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "'%.100s' is not an API name", name ? name : "(null)");
    int rc = check_decl((const json_t *)declaration, name, err);
    if (rc) return rc;
    char *n = cr_strdup(name);
    json_t *d = json_deep_copy((const json_t *)declaration);
    if (!n || !d || (rc = api_insert(e->catalog, &n, &d, 1))) {
        free(n);
        json_decref(d);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    return COURIER_OK;
}

typedef struct api_list {
    char **names;
    json_t **decls;
    size_t n, cap;
} api_list;

static int collect(api_list *l, const json_t *module, cr_buf *prefix, int depth, courier_error *err) {
    if (depth > 16) return cr_fail(err, COURIER_E_CATALOG, "catalogue: modules nested too deep at '%.100s'", prefix->data);
    const char *k;
    const json_t *v;
    size_t mark = prefix->len;
    json_object_foreach((json_t *)module, k, v) {
        prefix->len = mark;
        if ((mark && cr_buf_append_char(prefix, '.')) || cr_buf_append_str(prefix, k))
            return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        if (!json_is_object(v))
            return cr_fail(err, COURIER_E_CATALOG, "catalogue: '%.100s' is neither an API nor a module", prefix->data);
        if (!json_object_get(v, "path")) {
            int rc = collect(l, v, prefix, depth + 1, err);
            if (rc) return rc;
            continue;
        }
        if (!name_valid(prefix->data))
            return cr_fail(err, COURIER_E_CATALOG, "catalogue: '%.100s' is not an API name", prefix->data);
        int rc = check_decl(v, prefix->data, err);
        if (rc) return rc;
        if (l->n == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 16;
            char **nn = realloc(l->names, cap * sizeof *nn);
            if (nn) l->names = nn;
            json_t **dd = realloc(l->decls, cap * sizeof *dd);
            if (dd) l->decls = dd;
            if (!nn || !dd) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            l->cap = cap;
        }
        l->decls[l->n] = json_incref((json_t *)v);
        if (!(l->names[l->n] = cr_strdup(prefix->data))) {
            json_decref(l->decls[l->n]);
            return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        }
        l->n++;
    }
    prefix->len = mark;
    if (prefix->data) prefix->data[mark] = '\0';
    return COURIER_OK;
}

static int route_add(cr_catalog *c, const char *name, const char *type, const char *method, const char *pattern);

static int load_routes(api_list *l, const json_t *routes, json_t **keep, courier_error *err) {
    (void)l;
    if (!json_is_array(routes)) return cr_fail(err, COURIER_E_CATALOG, "catalogue: \"routes\" is not an array");
    for (size_t i = 0; i < json_array_size(routes); i++) {
        const json_t *r = json_array_get(routes, i);
        const char *k;
        const json_t *v;
        if (!json_is_object(r)) return cr_fail(err, COURIER_E_CATALOG, "catalogue: route %zu is not an object", i);
        json_object_foreach((json_t *)r, k, v) {
            if ((strcmp(k, "name") && strcmp(k, "object_type") && strcmp(k, "method") && strcmp(k, "path")) ||
                !cr_json_is_str(v))
                return cr_fail(err, COURIER_E_CATALOG, "catalogue: route %zu: \"%.40s\" is not a route field or not a string",
                               i, k);
        }
        const json_t *name = json_object_get(r, "name"), *type = json_object_get(r, "object_type"),
                     *method = json_object_get(r, "method"), *path = json_object_get(r, "path");
        if ((!name && !type) || !path || !cr_route_pattern_valid(json_string_value(path)) ||
            (method && !cr_is_token(json_string_value(method), json_string_length(method))))
            return cr_fail(err, COURIER_E_CATALOG, "catalogue: route %zu needs a name or object_type, a path pattern "
                                                   "and a method token", i);
    }
    *keep = json_incref((json_t *)routes);
    return COURIER_OK;
}

int courier_engine_load_apis(size_t *out_count, courier_engine *e, const void *json, size_t len, courier_error *err) {
    cr_error_clear(err);
    if (out_count) *out_count = 0;
    if (!e || !json) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or document is NULL");
    json_t *doc = NULL;
    courier_json_options res;
    cr_json_options_resolve(NULL, &res);
    int rc = cr_json_parse(json, len, &res, &doc, err);
    if (rc) return rc;
    api_list l = {0};
    json_t *routes = NULL;
    cr_buf prefix = {0};
    if (!json_is_object(doc)) rc = cr_fail(err, COURIER_E_CATALOG, "catalogue: the document is not an object");
    const char *k;
    const json_t *v;
    if (rc == COURIER_OK) json_object_foreach(doc, k, v) {
        if (strcmp(k, "apis") == 0) {
            if (!json_is_object(v)) rc = cr_fail(err, COURIER_E_CATALOG, "catalogue: \"apis\" is not an object");
            else rc = collect(&l, v, &prefix, 0, err);
        } else if (strcmp(k, "routes") == 0) {
            rc = load_routes(&l, v, &routes, err);
        } else if (strcmp(k, "description") != 0) {
            rc = cr_fail(err, COURIER_E_CATALOG, "catalogue: \"%.40s\" is not a field of a catalogue", k);
        }
        if (rc) break;
    }
    if (rc == COURIER_OK) {
        for (size_t i = 0; rc == COURIER_OK && routes && i < json_array_size(routes); i++) {
            const json_t *r = json_array_get(routes, i);
            rc = route_add(e->catalog, json_string_value(json_object_get(r, "name")),
                           json_string_value(json_object_get(r, "object_type")),
                           json_string_value(json_object_get(r, "method")), json_string_value(json_object_get(r, "path")));
        }
        size_t n = l.n;
        if (rc == COURIER_OK) rc = api_insert(e->catalog, l.names, l.decls, l.n);
        if (rc) rc = cr_fail(err, rc, NULL);
        else if (out_count) *out_count = n;
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.names[i]);
        json_decref(l.decls[i]);
    }
    free(l.names);
    free(l.decls);
    json_decref(routes);
    cr_buf_free(&prefix);
    json_decref(doc);
    return rc;
}

int courier_engine_load_api_file(size_t *out_count, courier_engine *e, const char *path, courier_error *err) {
    cr_error_clear(err);
    if (out_count) *out_count = 0;
    if (!e || !path) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or path is NULL");
    char *text = NULL;
    size_t len = 0;
    int rc = cr_read_file(path, "catalogue", CR_JSON_DEFAULT_MAX_BYTES, &text, &len, err);
    if (rc == COURIER_OK) rc = courier_engine_load_apis(out_count, e, text, len, err);
    free(text);
    return rc;
}

int courier_request_new_api(courier_request **out, courier_engine *e, const char *name, courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!e || !name) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or name is NULL");
    cr_catalog *c = e->catalog;
    pthread_mutex_lock(&c->lock);
    int found;
    size_t at = api_find(c, name, &found);
    json_t *decl = found ? json_incref(c->apis[at].decl) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (!decl) return cr_fail(err, COURIER_E_UNKNOWN_NAME, "no API named '%.100s'", name);
    int rc = apply_decl(out, decl, name, err);
    json_decref(decl);
    return rc;
}

int courier_engine_api_names(char **out, size_t *len, const courier_engine *e) {
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!out || !e) return COURIER_E_INVALID_ARGUMENT;
    cr_catalog *c = e->catalog;
    json_t *a = json_array();
    int rc = a ? COURIER_OK : COURIER_E_NO_MEMORY;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; rc == COURIER_OK && i < c->napis; i++)
        if (json_array_append_new(a, json_string(c->apis[i].name))) rc = COURIER_E_NO_MEMORY;
    pthread_mutex_unlock(&c->lock);
    cr_buf b = {0};
    if (rc == COURIER_OK) rc = cr_json_dump(a, 0, &b);
    if (rc == COURIER_OK && !(*out = cr_buf_take(&b, len))) rc = COURIER_E_NO_MEMORY;
    cr_buf_free(&b);
    json_decref(a);
    return rc;
}

/* ---- routes --------------------------------------------------------------------------------------------- */

static int route_add(cr_catalog *c, const char *name, const char *type, const char *method, const char *pattern) {
    cr_route r = {0};
    if ((name && !(r.name = cr_strdup(name))) || (type && !(r.type = cr_strdup(type))) ||
        (method && !(r.method = cr_strdup(method))) || !(r.pattern = cr_strdup(pattern))) {
        route_clear(&r);
        return COURIER_E_NO_MEMORY;
    }
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nroutes; i++) {
        cr_route *o = &c->routes[i];
        bool same = name ? (o->name && strcmp(o->name, name) == 0)
                         : (!o->name && o->type && strcmp(o->type, type) == 0 &&
                            ((!o->method && !method) || (o->method && method && strcmp(o->method, method) == 0)));
        if (same) {
            route_clear(o);
            *o = r;
            pthread_mutex_unlock(&c->lock);
            return COURIER_OK;
        }
    }
    cr_route *rs = realloc(c->routes, (c->nroutes + 1) * sizeof *rs);
    if (!rs) {
        pthread_mutex_unlock(&c->lock);
        route_clear(&r);
        return COURIER_E_NO_MEMORY;
    }
    c->routes = rs;
    c->routes[c->nroutes++] = r;
    pthread_mutex_unlock(&c->lock);
    return COURIER_OK;
}

int courier_engine_add_route(courier_engine *e, const char *name, const char *object_type, const char *method,
                             const char *path_pattern, courier_error *err) {
    cr_error_clear(err);
    if (!e || (!name && !object_type) || !cr_route_pattern_valid(path_pattern) ||
        (method && !cr_is_token(method, strlen(method))) || (name && !name_valid(name)))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a route needs an engine, a name or object type, a method token "
                                                        "or NULL, and a path pattern");
    int rc = route_add(e->catalog, name, object_type, method, path_pattern);
    return rc ? cr_fail(err, rc, NULL) : COURIER_OK;
}

/* A request from a route's method and pattern, filled from object. */
static int from_route(courier_request **out, const char *method, const char *pattern, const courier_json *object,
                      courier_error *err) {
    courier_request *r = NULL;
    int rc = courier_request_new(&r, method, pattern);
    if (rc) return cr_fail(err, rc, "cannot make the route's request");
    if (object) {
        rc = courier_request_set_object(r, object, err);
    } else { /* no object: the pattern must have no parameters (its escapes are still removed) */
        cr_buf path = {0};
        rc = cr_route_fill(pattern, NULL, &path, NULL, err);
        char *t = rc ? NULL : cr_buf_take(&path, NULL);
        if (rc == COURIER_OK && !t) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        if (t) cr_request_take_target(r, t);
        cr_buf_free(&path);
    }
    if (rc) {
        courier_request_free(r);
        return rc;
    }
    *out = r;
    return COURIER_OK;
}

/* Copies the chosen route's method and pattern under the lock. */
static int route_pick(cr_catalog *c, const char *name, const char *type, const char *method, char **m, char **p) {
    const cr_route *best = NULL;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nroutes; i++) {
        const cr_route *r = &c->routes[i];
        if (name) {
            if (r->name && strcmp(r->name, name) == 0) best = r;
        } else if (!r->name && r->type && strcmp(r->type, type) == 0) {
            if (r->method && strcmp(r->method, method) == 0) {
                best = r;
                break;
            }
            if (!r->method && !best) best = r;
        }
        if (name && best) break;
    }
    int rc = COURIER_E_UNKNOWN_NAME;
    if (best) {
        *m = cr_strdup(name ? (best->method ? best->method : "GET") : method);
        *p = cr_strdup(best->pattern);
        rc = *m && *p ? COURIER_OK : COURIER_E_NO_MEMORY;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int courier_request_new_route(courier_request **out, courier_engine *e, const char *name, const courier_json *object,
                              courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!e || !name) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or name is NULL");
    char *m = NULL, *p = NULL;
    int rc = route_pick(e->catalog, name, NULL, NULL, &m, &p);
    if (rc == COURIER_E_UNKNOWN_NAME) rc = cr_fail(err, rc, "no route named '%.100s'", name);
    else if (rc) rc = cr_fail(err, rc, NULL);
    else rc = from_route(out, m, p, object, err);
    free(m);
    free(p);
    return rc;
}

int courier_request_new_object(courier_request **out, courier_engine *e, const char *method, const char *object_type,
                               const courier_json *object, courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!e || !object_type || !method || !cr_is_token(method, strlen(method)))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine, method or object type is NULL or bad");
    char *m = NULL, *p = NULL;
    int rc = route_pick(e->catalog, NULL, object_type, method, &m, &p);
    if (rc == COURIER_E_UNKNOWN_NAME) rc = cr_fail(err, rc, "no route for %.40s of type '%.100s'", method, object_type);
    else if (rc) rc = cr_fail(err, rc, NULL);
    else rc = from_route(out, m, p, object, err);
    free(m);
    free(p);
    return rc;
}

/* ---- response descriptors ----------------------------------------------------------------------------- */

int courier_engine_add_response_descriptor(courier_engine *e, const char *method, const char *path_pattern,
                                           int status_lo, int status_hi, const char *key_path,
                                           const courier_mapping *mapping, courier_error *err) {
    cr_error_clear(err);
    if (status_lo == 0 && status_hi == 0) status_lo = 200, status_hi = 299;
    if (!e || (method && !cr_is_token(method, strlen(method))) || (path_pattern && !cr_route_pattern_valid(path_pattern)) ||
        status_lo < 100 || status_hi > 599 || status_lo > status_hi)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a descriptor needs an engine, a method token or NULL, a "
                                                        "path pattern or NULL and statuses within 100..599");
    /* The key path is checked as a request's is. */
    courier_request *probe = NULL;
    int rc = courier_request_new(&probe, "GET", "/");
    if (rc == COURIER_OK && key_path) rc = courier_request_set_key_path(probe, key_path);
    courier_request_free(probe);
    if (rc) return cr_fail(err, rc, "bad key path '%.100s'", key_path);
    cr_desc d = {0};
    d.lo = status_lo, d.hi = status_hi;
    if ((method && !(d.method = cr_strdup(method))) || (path_pattern && !(d.pattern = cr_strdup(path_pattern))) ||
        (key_path && *key_path && !(d.key_path = cr_strdup(key_path))))
        rc = COURIER_E_NO_MEMORY;
    cr_catalog *c = e->catalog;
    if (rc == COURIER_OK) {
        pthread_mutex_lock(&c->lock);
        cr_desc *ds = realloc(c->descs, (c->ndescs + 1) * sizeof *ds);
        if (ds) {
            c->descs = ds;
            d.mapping = cr_mapping_retain(mapping);
            c->descs[c->ndescs++] = d;
            atomic_store(&c->ndescs_seen, c->ndescs);
        } else {
            rc = COURIER_E_NO_MEMORY;
        }
        pthread_mutex_unlock(&c->lock);
    }
    if (rc) {
        free(d.method);
        free(d.pattern);
        free(d.key_path);
        return cr_fail(err, rc, NULL);
    }
    return COURIER_OK;
}

/* The request's path as patterns see it: the target's path (an absolute URL's, after its host),
 * without query or fragment and leading slashes. */
static void request_path(const char *target, const char **p, size_t *len) {
    const char *s = target;
    size_t scheme = cr_url_scheme_len(target);
    if (scheme) s = target + scheme + strcspn(target + scheme, "/?#");
    while (*s == '/') s++;
    *p = s;
    *len = strcspn(s, "?#");
}

int cr_catalog_attach(courier_engine *e, const courier_request *r, cr_transfer *t) {
    cr_catalog *c = e->catalog;
    if (!c || atomic_load(&c->ndescs_seen) == 0) return COURIER_OK;
    const char *path;
    size_t plen;
    request_path(r->target, &path, &plen);
    int rc = COURIER_OK;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; rc == COURIER_OK && i < c->ndescs; i++) {
        const cr_desc *d = &c->descs[i];
        if (d->method && strcmp(d->method, r->method) != 0) continue;
        if (d->pattern) {
            const char *pat = d->pattern;
            while (*pat == '/') pat++;
            if (!cr_route_match(pat, path, plen)) continue;
        }
        rc = cr_jspec_add_desc(&t->jspec, d->lo, d->hi, d->key_path, d->mapping);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}
