/*
 * request.c — configuration and request descriptions (a request from an object: its route
 * filled by route.c, the rest as parameters or the body), and how a request becomes the final
 * transfer: URL joined to the base, parameters encoded (query or body), headers merged over the
 * defaults, authorization, the customize callback.
 */
#include "http/http.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- configuration --------------------------------------------------------------------------- */

void cr_config_defaults(courier_config *c) {
    memset(c, 0, sizeof *c);
    c->timeout_ms = CR_DEFAULT_TIMEOUT_MS;
    c->max_per_host = CR_DEFAULT_MAX_PER_HOST;
    c->max_total = CR_DEFAULT_MAX_TOTAL;
    c->body_encoding = COURIER_BODY_FORM;
    c->max_response_bytes = CR_DEFAULT_MAX_RESPONSE;
    cr_http_opts_defaults(&c->http); /* redirect.c */
}

int courier_config_new(courier_config **out) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    courier_config *c = malloc(sizeof *c);
    if (!c) return COURIER_E_NO_MEMORY;
    cr_config_defaults(c);
    *out = c;
    return COURIER_OK;
}

void courier_config_free(courier_config *c) {
    if (!c) return;
    free(c->base_url);
    cr_kvlist_clear(&c->headers);
    cr_kvlist_clear(&c->params);
    free(c->user_agent);
    courier_security_free(c->security);
    free(c->store_dir);
    free(c->cache_store); /* cache.c */
    free(c->app_id);
    free(c->param_charset);
    cr_callback_release(c->validator);
    cr_callback_release(c->clock); /* cache.c */
    cr_callback_release(c->http.hook); /* redirect.c */
    cr_ext_free(c->jconf); /* serialize.c */
    cr_ext_free(c->sched); /* schedule.c */
    cr_auth_free(c->auth); /* auth.c */
    cr_netopts_free(c->net); /* netopts.c */
    free(c);
}

courier_config *cr_config_copy(const courier_config *src) {
    courier_config *c = malloc(sizeof *c);
    if (!c) return NULL;
    cr_config_defaults(c);
    if (!src) return c;
    *c = *src;
    c->base_url = c->user_agent = c->store_dir = c->app_id = c->param_charset = c->cache_store = NULL;
    c->security = NULL;
    memset(&c->headers, 0, sizeof c->headers);
    memset(&c->params, 0, sizeof c->params);
    c->validator = cr_callback_retain(src->validator);
    c->clock = cr_callback_retain(src->clock); /* cache.c */
    c->http.hook = cr_callback_retain(src->http.hook); /* redirect.c */
    c->jconf = NULL;
    c->sched = NULL;
    c->auth = NULL;
    c->net = NULL;
    if ((src->auth && !(c->auth = cr_auth_copy(src->auth))) || cr_netopts_copy(src->net, &c->net)) {
        courier_config_free(c);
        return NULL;
    }
    if (src->sched && !(c->sched = cr_ext_copy(src->sched))) {
        courier_config_free(c);
        return NULL;
    }
    if ((src->jconf && !(c->jconf = cr_ext_copy(src->jconf))) || cr_set_string(&c->base_url, src->base_url) || cr_set_string(&c->user_agent, src->user_agent) ||
        (src->security && !(c->security = cr_security_copy(src->security))) ||
        cr_set_string(&c->store_dir, src->store_dir) || cr_set_string(&c->app_id, src->app_id) ||
        cr_set_string(&c->cache_store, src->cache_store) ||
        cr_set_string(&c->param_charset, src->param_charset) ||
        cr_kvlist_copy(&c->headers, &src->headers) ||
        cr_kvlist_copy(&c->params, &src->params)) {
        courier_config_free(c);
        return NULL;
    }
    return c;
}

int courier_config_set_base_url(courier_config *c, const char *base_url) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    if (base_url && !cr_url_valid(base_url)) return COURIER_E_INVALID_URL;
    return cr_set_string(&c->base_url, base_url);
}

int courier_config_add_header(courier_config *c, const char *name, const char *value) {
    if (!c || !name || !value) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_check_header(name, strlen(name), value, strlen(value));
    if (rc) return rc;
    return cr_kvlist_add(&c->headers, name, strlen(name), value, strlen(value));
}

int courier_config_add_param(courier_config *c, const char *name, const char *value) {
    if (!c || !name || !value) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_check_param(name, strlen(name), value, strlen(value));
    if (rc) return rc;
    return cr_kvlist_add(&c->params, name, strlen(name), value, strlen(value));
}

int courier_config_set_timeout_ms(courier_config *c, int64_t timeout_ms) {
    if (!c || timeout_ms <= 0) return COURIER_E_INVALID_ARGUMENT;
    c->timeout_ms = timeout_ms;
    return COURIER_OK;
}

int courier_config_set_user_agent(courier_config *c, const char *ua) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    if (ua) {
        int rc = cr_check_header("User-Agent", 10, ua, strlen(ua));
        if (rc) return rc;
    }
    return cr_set_string(&c->user_agent, ua);
}

int courier_config_set_max_connections_per_host(courier_config *c, int n) {
    if (!c || n < 1) return COURIER_E_INVALID_ARGUMENT;
    c->max_per_host = n;
    return COURIER_OK;
}

int courier_config_set_max_connections(courier_config *c, int n) {
    if (!c || n < 1) return COURIER_E_INVALID_ARGUMENT;
    c->max_total = n;
    return COURIER_OK;
}

int courier_config_set_body_encoding(courier_config *c, courier_body_encoding enc) {
    if (!c || (enc != COURIER_BODY_FORM && enc != COURIER_BODY_JSON)) return COURIER_E_INVALID_ARGUMENT;
    c->body_encoding = enc;
    return COURIER_OK;
}

int courier_config_set_max_response_bytes(courier_config *c, int64_t max_bytes) {
    if (!c || max_bytes <= 0) return COURIER_E_INVALID_ARGUMENT;
    c->max_response_bytes = max_bytes;
    return COURIER_OK;
}

/* The engine's TLS settings of old, now fields of its security policy (security.c). */
int courier_config_set_ca_file(courier_config *c, const char *path) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    courier_security *s = cr_config_security(c);
    return s ? cr_set_string(&s->ca_file, path) : COURIER_E_NO_MEMORY;
}

int courier_config_set_pinned_public_key(courier_config *c, const char *pin) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    courier_security *s = cr_config_security(c);
    if (!s) return COURIER_E_NO_MEMORY;
    int rc = cr_set_string(&s->pins, pin);
    if (rc == COURIER_OK) s->mode = pin ? COURIER_PINNING_PUBLIC_KEY : COURIER_PINNING_NONE;
    return rc;
}

int courier_config_set_insecure(courier_config *c, int insecure) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    courier_security *s = cr_config_security(c);
    if (!s) return COURIER_E_NO_MEMORY;
    s->allow_invalid = insecure ? 1 : 0;
    s->validates_domain = insecure ? 0 : 1;
    return COURIER_OK;
}

int courier_config_set_store_dir(courier_config *c, const char *path) {
    if (!c || (path && !*path)) return COURIER_E_INVALID_ARGUMENT;
    return cr_set_string(&c->store_dir, path);
}

int courier_config_set_app_id(courier_config *c, const char *app_id) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    if (app_id && (!*app_id || strchr(app_id, '/') || strcmp(app_id, ".") == 0 || strcmp(app_id, "..") == 0 ||
                   strlen(app_id) > 255))
        return COURIER_E_INVALID_ARGUMENT;
    return cr_set_string(&c->app_id, app_id);
}

int courier_config_set_temporary_store(courier_config *c, int temporary) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->temporary_store = temporary ? 1 : 0;
    return COURIER_OK;
}

int courier_config_set_store_must_exist(courier_config *c, int must_exist) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->store_must_exist = must_exist ? 1 : 0;
    return COURIER_OK;
}

int courier_config_set_stream_buffer_bytes(courier_config *c, int64_t bytes) {
    if (!c || bytes < 0 || (bytes > 0 && bytes < 16 * 1024)) return COURIER_E_INVALID_ARGUMENT;
    c->stream_buffer = bytes;
    return COURIER_OK;
}

int courier_config_set_validator(courier_config *c, courier_validator_fn fn, void *user,
                                 courier_user_free_fn user_free) {
    return cr_callback_set(c ? &c->validator : NULL, (void (*)(void))fn, user, user_free);
}

/* ---- requests -------------------------------------------------------------------------------- */

int courier_request_new(courier_request **out, const char *method, const char *target) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!method || !target) return COURIER_E_INVALID_ARGUMENT;
    size_t method_len = strlen(method), target_len = strlen(target);
    if (!cr_is_token(method, method_len)) return COURIER_E_INVALID_ARGUMENT;
    /* One allocation: the method and the target follow the struct (the Swift facade builds a
     * request per send, so two allocations and two frees less count there). */
    if (target_len > SIZE_MAX - sizeof(courier_request) - method_len - 2) return COURIER_E_NO_MEMORY;
    courier_request *r = cr_zalloc(sizeof *r + method_len + 1 + target_len + 1); /* not calloc: base.h */
    if (!r) return COURIER_E_NO_MEMORY;
    r->use_default_params = 1;
    r->body_encoding = -1;
    r->method = (char *)(r + 1);
    memcpy(r->method, method, method_len + 1);
    r->target = r->method + method_len + 1;
    memcpy(r->target, target, target_len + 1);
    *out = r;
    return COURIER_OK;
}

int cr_request_copy(courier_request **out, const courier_request *src) {
    *out = NULL;
    if (src->parts || src->body_file || src->download_path) return COURIER_E_INVALID_ARGUMENT;
    courier_request *r = NULL;
    int rc = courier_request_new(&r, src->method, src->target);
    if (rc) return rc;
    /* The plain values, then each owned part copied (or retained) in its own way. */
    char *method = r->method, *target = r->target;
    *r = *src;
    r->method = method;
    r->target = target;
    r->target_owned = 0;
    r->base_url = r->param_charset = r->body = r->content_type = r->transport_name = NULL;
    r->body_file = r->body_file_type = r->download_path = NULL;
    memset(&r->params, 0, sizeof r->params);
    memset(&r->headers, 0, sizeof r->headers);
    r->security = NULL;
    r->net = NULL;
    r->validator = cr_callback_retain(src->validator);
    r->customize = cr_callback_retain(src->customize);
    r->progress = cr_callback_retain(src->progress);
    r->http.hook = cr_callback_retain(src->http.hook);
    r->jspec = NULL;
    r->cache = NULL;
    r->mock = NULL;
    r->auth = NULL;
    r->session = NULL;
    r->parts = NULL;
    r->object_rest = src->object_rest ? json_deep_copy(src->object_rest) : NULL;
    bool failed = (src->object_rest && !r->object_rest) || cr_set_string(&r->base_url, src->base_url) ||
                  cr_set_string(&r->param_charset, src->param_charset) ||
                  cr_set_string(&r->content_type, src->content_type) ||
                  cr_set_string(&r->transport_name, src->transport_name) ||
                  cr_kvlist_copy(&r->params, &src->params) || cr_kvlist_copy(&r->headers, &src->headers) ||
                  (src->security && !(r->security = cr_security_copy(src->security))) ||
                  (src->jspec && !(r->jspec = cr_ext_copy(src->jspec))) ||
                  (src->cache && !(r->cache = cr_ext_copy(src->cache))) ||
                  (src->mock && !(r->mock = cr_mock_copy(src->mock))) ||
                  (src->auth && !(r->auth = cr_auth_copy(src->auth))) ||
                  (src->session && !(r->session = cr_ext_copy(src->session))) || /* engine/session.c */
                  cr_netopts_copy(src->net, &r->net); /* netopts.c */
    if (!failed && src->has_body) {
        if (!(r->body = malloc(src->body_len ? src->body_len : 1))) failed = true;
        else if (src->body_len) memcpy(r->body, src->body, src->body_len);
    }
    if (failed) {
        courier_request_free(r);
        return COURIER_E_NO_MEMORY;
    }
    *out = r;
    return COURIER_OK;
}

void cr_request_take_target(courier_request *r, char *target) {
    if (r->target_owned) free(r->target);
    r->target = target;
    r->target_owned = 1;
}

void courier_request_free(courier_request *r) {
    if (!r) return;
    if (r->target_owned) free(r->target); /* the method and a target not replaced are in r itself */
    free(r->base_url);
    free(r->param_charset);
    courier_security_free(r->security);
    cr_netopts_free(r->net); /* netopts.c */
    cr_kvlist_clear(&r->params);
    cr_kvlist_clear(&r->headers);
    free(r->body);
    free(r->content_type);
    cr_callback_release(r->validator);
    cr_callback_release(r->customize);
    cr_ext_free(r->jspec); /* mapping.c */
    cr_mock_free(r->mock);
    free(r->transport_name);
    cr_parts_free(r->parts);
    free(r->body_file);
    free(r->body_file_type);
    free(r->download_path);
    cr_callback_release(r->progress);
    cr_ext_free(r->cache); /* cache.c */
    cr_auth_free(r->auth);       /* auth.c */
    cr_callback_release(r->http.hook); /* redirect.c */
    json_decref(r->object_rest);       /* route.c */
    cr_ext_free(r->session);           /* engine/session.c */
    free(r);
}

int cr_request_borrow(courier_request **out, const char *method, const char *target, const cr_kvlist *headers,
                      const char *body, size_t body_len, int has_body) {
    *out = NULL;
    if (!method || !target || !headers || !cr_is_token(method, strlen(method)) || (has_body && !body && body_len))
        return COURIER_E_INVALID_ARGUMENT;
    const char *ctype = NULL;
    for (size_t i = 0; i < headers->count; i++) {
        const cr_kv *kv = &headers->items[i];
        int rc = cr_check_header(kv->name, strlen(kv->name), kv->value, strlen(kv->value));
        if (rc) return rc;
        if (!ctype && strcasecmp(kv->name, "Content-Type") == 0) ctype = kv->value;
    }
    courier_request *r = calloc(1, sizeof *r);
    if (!r) return COURIER_E_NO_MEMORY;
    r->body_encoding = -1;
    r->method = (char *)method;
    r->target = (char *)target;
    r->headers = *headers;
    if (has_body) {
        r->body = (char *)(body ? body : "");
        r->body_len = body_len;
        r->has_body = 1;
        r->content_type = (char *)(ctype ? ctype : "application/octet-stream");
    }
    *out = r;
    return COURIER_OK;
}

void cr_request_free_borrowed(courier_request *r) {
    if (!r) return;
    r->method = r->target = r->body = r->content_type = NULL;
    memset(&r->headers, 0, sizeof r->headers);
    courier_request_free(r);
}

int courier_request_set_base_url(courier_request *r, const char *base_url) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    if (base_url && !cr_url_valid(base_url)) return COURIER_E_INVALID_URL;
    return cr_set_string(&r->base_url, base_url);
}

int courier_request_add_param_n(courier_request *r, const char *name, size_t name_len, const char *value,
                                size_t value_len) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_check_param(name, name_len, value, value_len);
    if (rc) return rc;
    return cr_kvlist_add(&r->params, name, name_len, value, value_len);
}

int courier_request_add_param(courier_request *r, const char *name, const char *value) {
    if (!r || !name || !value) return COURIER_E_INVALID_ARGUMENT;
    return courier_request_add_param_n(r, name, strlen(name), value, strlen(value));
}

/* The charset of the parameters (charset.c): NULL, "UTF-8" and "UTF8" mean UTF-8, kept as NULL. */
int courier_config_set_param_charset(courier_config *c, const char *charset) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    if (charset && cr_charset_check(charset) != COURIER_OK) return COURIER_E_UNKNOWN_CHARSET;
    return cr_set_string(&c->param_charset, cr_charset_is_utf8(charset) ? NULL : charset);
}

int courier_request_set_param_charset(courier_request *r, const char *charset) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    if (charset && cr_charset_check(charset) != COURIER_OK) return COURIER_E_UNKNOWN_CHARSET;
    return cr_set_string(&r->param_charset, charset); /* "UTF-8" kept: it replaces the engine's */
}

int courier_request_set_use_default_params(courier_request *r, int use) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    r->use_default_params = use ? 1 : 0;
    return COURIER_OK;
}

int courier_request_add_header_n(courier_request *r, const char *name, size_t name_len, const char *value,
                                 size_t value_len) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_check_header(name, name_len, value, value_len);
    if (rc) return rc;
    return cr_kvlist_add(&r->headers, name, name_len, value, value_len);
}

int courier_request_add_header(courier_request *r, const char *name, const char *value) {
    if (!r || !name || !value) return COURIER_E_INVALID_ARGUMENT;
    return courier_request_add_header_n(r, name, strlen(name), value, strlen(value));
}

int courier_request_set_body(courier_request *r, const void *body, size_t len, const char *content_type) {
    if (!r || (!body && len)) return COURIER_E_INVALID_ARGUMENT;
    if (content_type) {
        int rc = cr_check_header("Content-Type", 12, content_type, strlen(content_type));
        if (rc) return rc;
    }
    if (!body) {
        free(r->body);
        r->body = NULL;
        r->body_len = 0;
        r->has_body = 0;
        return cr_set_string(&r->content_type, NULL);
    }
    char *copy = malloc(len ? len : 1);
    if (!copy) return COURIER_E_NO_MEMORY;
    if (len) memcpy(copy, body, len);
    if (cr_set_string(&r->content_type, content_type ? content_type : "application/octet-stream")) {
        free(copy);
        return COURIER_E_NO_MEMORY;
    }
    free(r->body);
    r->body = copy;
    r->body_len = len;
    r->has_body = 1;
    return COURIER_OK;
}

/* A JSON value as the body (json.c writes the text). */
int courier_request_set_json_body(courier_request *r, const courier_json *value, unsigned flags) {
    if (!r || !value) return COURIER_E_INVALID_ARGUMENT;
    cr_buf b = {0};
    int rc = cr_json_dump((const json_t *)value, flags, &b);
    if (rc == COURIER_OK) rc = courier_request_set_body(r, b.data ? b.data : "", b.len, "application/json");
    cr_buf_free(&b);
    return rc;
}

/* A JSON object as a form body (json.c encodes it). */
int courier_request_set_form_body(courier_request *r, const courier_json *object) {
    if (!r || !object || !json_is_object((const json_t *)object)) return COURIER_E_INVALID_ARGUMENT;
    cr_buf b = {0};
    int rc = cr_json_form_encode((const json_t *)object, &b);
    if (rc == COURIER_OK)
        rc = courier_request_set_body(r, b.data ? b.data : "", b.len, "application/x-www-form-urlencoded");
    cr_buf_free(&b);
    return rc;
}

/* What the request asks of its response's JSON (mapping.c checks and keeps it). */
int courier_request_set_key_path(courier_request *r, const char *key_path) {
    return r ? cr_jspec_set_key_path(&r->jspec, key_path) : COURIER_E_INVALID_ARGUMENT;
}

int courier_request_set_mapping(courier_request *r, const courier_mapping *m) {
    return r ? cr_jspec_set_mapping(&r->jspec, m) : COURIER_E_INVALID_ARGUMENT;
}

int courier_request_add_result(courier_request *r, const char *name, const char *key_path, const courier_mapping *m,
                               unsigned flags) {
    return r ? cr_jspec_add_result(&r->jspec, name, key_path, m, flags) : COURIER_E_INVALID_ARGUMENT;
}

int courier_request_set_envelope(courier_request *r, const courier_envelope *e) {
    return r ? cr_jspec_set_envelope(&r->jspec, e) : COURIER_E_INVALID_ARGUMENT;
}

/* Scheduling settings of a request (schedule.c applies them). */
int cr_retry_check(int max_retries, long base_ms, long max_ms) {
    if (max_retries < 0 || base_ms < 0 || max_ms < 0 || base_ms > max_ms) return COURIER_E_INVALID_ARGUMENT;
    return COURIER_OK;
}

int courier_request_set_priority(courier_request *r, courier_priority priority) {
    if (!r || priority < COURIER_PRIORITY_LOW || priority > COURIER_PRIORITY_HIGH) return COURIER_E_INVALID_ARGUMENT;
    r->priority = (int)priority;
    return COURIER_OK;
}

int courier_request_set_retry(courier_request *r, int max_retries, int64_t base_ms, int64_t max_ms, unsigned flags) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_retry_check(max_retries, base_ms, max_ms);
    if (rc) return rc;
    r->has_retry = 1;
    r->retry = (struct cr_retry_rule){max_retries, base_ms, max_ms, flags};
    return COURIER_OK;
}

/* Reachability: the request goes out whatever the network monitor says (monitor.c). */
int courier_request_set_ignore_offline(courier_request *r, int ignore) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    r->freeze.ignore_offline = ignore ? 1 : 0;
    return COURIER_OK;
}

int courier_request_set_body_encoding(courier_request *r, courier_body_encoding enc) {
    if (!r || (enc != COURIER_BODY_FORM && enc != COURIER_BODY_JSON)) return COURIER_E_INVALID_ARGUMENT;
    r->body_encoding = (int)enc;
    return COURIER_OK;
}

int courier_request_set_timeout_ms(courier_request *r, int64_t timeout_ms) {
    if (!r || timeout_ms <= 0) return COURIER_E_INVALID_ARGUMENT;
    r->timeout_ms = timeout_ms;
    return COURIER_OK;
}

static int set_authorization(courier_request *r, const char *value) {
    int rc = cr_check_header("Authorization", 13, value, strlen(value));
    if (rc) return rc;
    cr_kvlist_remove(&r->headers, "Authorization");
    return cr_kvlist_add(&r->headers, "Authorization", 13, value, strlen(value));
}

int courier_request_set_basic_auth(courier_request *r, const char *user, const char *password) {
    if (!r || !user || !password) return COURIER_E_INVALID_ARGUMENT;
    if (strchr(user, ':')) return COURIER_E_INVALID_ARGUMENT; /* RFC 7617: no colon in the user id */
    cr_buf plain = {0}, value = {0};
    int rc = COURIER_E_NO_MEMORY;
    if (cr_buf_append_str(&plain, user) || cr_buf_append_char(&plain, ':') || cr_buf_append_str(&plain, password))
        goto done;
    /* The credentials must be text without controls, like any header. */
    rc = cr_check_header("Authorization", 13, plain.data, plain.len);
    if (rc) goto done;
    rc = COURIER_E_NO_MEMORY;
    if (cr_buf_append_str(&value, "Basic ") || cr_base64_encode(&value, plain.data, plain.len)) goto done;
    rc = set_authorization(r, value.data);
done:
    cr_buf_free(&plain);
    cr_buf_free(&value);
    return rc;
}

int courier_request_set_auth_token(courier_request *r, const char *scheme, const char *token) {
    if (!r || !token) return COURIER_E_INVALID_ARGUMENT;
    if (!scheme) scheme = "Bearer";
    if (!cr_is_token(scheme, strlen(scheme))) return COURIER_E_INVALID_HEADER;
    cr_buf value = {0};
    int rc = COURIER_E_NO_MEMORY;
    if (!cr_buf_append_str(&value, scheme) && !cr_buf_append_char(&value, ' ') && !cr_buf_append_str(&value, token))
        rc = set_authorization(r, value.data);
    cr_buf_free(&value);
    return rc;
}

int courier_request_set_validator(courier_request *r, courier_validator_fn fn, void *user,
                                  courier_user_free_fn user_free) {
    return cr_callback_set(r ? &r->validator : NULL, (void (*)(void))fn, user, user_free);
}

int courier_request_set_customize(courier_request *r, courier_customize_fn fn, void *user,
                                  courier_user_free_fn user_free) {
    return cr_callback_set(r ? &r->customize : NULL, (void (*)(void))fn, user, user_free);
}

/* ---- requests from objects --------------------------------------------------------------------------- */

static bool query_method(const courier_request *r) {
    return r->has_body || r->body_file || strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0 ||
           strcmp(r->method, "DELETE") == 0;
}

int courier_request_set_object(courier_request *r, const courier_json *object, courier_error *err) {
    cr_error_clear(err);
    const json_t *obj = (const json_t *)object;
    if (!r || !obj || !json_is_object(obj))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "request or object is NULL, or not a JSON object");
    if (r->object_rest) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "the request already has an object");
    json_t *used = json_object();
    cr_buf path = {0};
    json_t *rest = NULL;
    int rc = used ? cr_route_fill(r->target, obj, &path, used, err) : cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (rc == COURIER_OK && !(rest = json_object())) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    for (void *it = rc ? NULL : json_object_iter((json_t *)obj); it; it = json_object_iter_next((json_t *)obj, it)) {
        const char *k = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        if (json_object_getn(used, k, klen)) continue;
        if (json_object_setn(rest, k, klen, json_object_iter_value(it))) {
            rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            break;
        }
    }
    if (rc == COURIER_OK && json_object_size(rest)) {
        if (query_method(r)) {
            rc = cr_form_flatten(rest, &r->params);
            if (rc) rc = cr_fail(err, rc, "the object's members cannot be sent as parameters");
        } else {
            r->object_rest = json_incref(rest);
        }
    }
    if (rc == COURIER_OK) {
        char *target = cr_buf_take(&path, NULL);
        if (!target) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        else cr_request_take_target(r, target), r->route_unfilled = 0;
    }
    json_decref(rest);
    json_decref(used);
    cr_buf_free(&path);
    return rc;
}

/* ---- the outgoing view (customize callback) ------------------------------------------------- */

const char *courier_outgoing_url(const courier_outgoing *o) { return o ? o->url : NULL; }

const char *courier_outgoing_method(const courier_outgoing *o) { return o ? o->method : NULL; }

uint64_t courier_outgoing_request_id(const courier_outgoing *o) { return o ? o->id : 0; }

int courier_outgoing_set_url(courier_outgoing *o, const char *url) {
    if (!o || !url) return COURIER_E_INVALID_ARGUMENT;
    if (!cr_url_valid(url)) return COURIER_E_INVALID_URL;
    return cr_set_string(&o->url, url);
}

int courier_outgoing_set_header(courier_outgoing *o, const char *name, const char *value) {
    if (!o || !name) return COURIER_E_INVALID_ARGUMENT;
    if (!value) {
        if (!cr_is_token(name, strlen(name))) return COURIER_E_INVALID_HEADER;
        cr_kvlist_remove(&o->headers, name);
        return COURIER_OK;
    }
    int rc = cr_check_header(name, strlen(name), value, strlen(value));
    if (rc) return rc;
    cr_kvlist_remove(&o->headers, name);
    return cr_kvlist_add(&o->headers, name, strlen(name), value, strlen(value));
}

const char *courier_outgoing_header(const courier_outgoing *o, const char *name) {
    return o && name ? cr_kvlist_get(&o->headers, name) : NULL;
}

size_t courier_outgoing_header_count(const courier_outgoing *o) { return o ? o->headers.count : 0; }

int courier_outgoing_header_at(const char **name, const char **value, const courier_outgoing *o, size_t i) {
    if (!o) return COURIER_E_INVALID_ARGUMENT;
    if (i >= o->headers.count) return COURIER_E_NOT_FOUND;
    if (name) *name = o->headers.items[i].name;
    if (value) *value = o->headers.items[i].value;
    return COURIER_OK;
}

int courier_outgoing_set_method(courier_outgoing *o, const char *method) {
    if (!o || !method || !cr_is_token(method, strlen(method))) return COURIER_E_INVALID_ARGUMENT;
    return cr_set_string(&o->method, method);
}

/* The body, in an adaptation's view only (engine/session.c fills it and moves it back). */
int courier_outgoing_body(const uint8_t **out_body, size_t *out_len, const courier_outgoing *o) {
    if (out_body) *out_body = NULL;
    if (out_len) *out_len = 0;
    if (!o || !o->body_view) return COURIER_E_INVALID_ARGUMENT;
    if (o->has_body) {
        if (out_body) *out_body = (const uint8_t *)o->body;
        if (out_len) *out_len = o->body_len;
    }
    return COURIER_OK;
}

int courier_outgoing_set_body(courier_outgoing *o, const void *body, size_t len) {
    if (!o || !o->body_view || o->multipart || (!body && len)) return COURIER_E_INVALID_ARGUMENT;
    char *copy = malloc(len ? len : 1);
    if (!copy) return COURIER_E_NO_MEMORY;
    if (len) memcpy(copy, body, len);
    free(o->body);
    o->body = copy;
    o->body_len = len;
    o->has_body = 1;
    free(o->body_file);
    o->body_file = NULL;
    return COURIER_OK;
}

const char *courier_outgoing_body_file(const courier_outgoing *o) { return o && o->body_view ? o->body_file : NULL; }

int courier_outgoing_set_body_file(courier_outgoing *o, const char *path) {
    if (!o || !o->body_view || o->multipart || !path || !*path) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_set_string(&o->body_file, path);
    if (rc) return rc;
    free(o->body);
    o->body = NULL;
    o->body_len = 0;
    o->has_body = 0;
    return COURIER_OK;
}

/* ---- preparing a transfer -------------------------------------------------------------------- */

/* A scheme at the start, not "://" anywhere: a path's query may hold a URL (base.h). */
static bool is_absolute_url(const char *s) { return cr_url_scheme_len(s) != 0; }

/* Appends s percent-encoded, its bytes first converted from UTF-8 to `charset` (NULL: UTF-8). */
static int encode_text(cr_buf *out, cr_buf *tmp, const char *charset, const char *s) {
    if (!charset) return cr_percent_encode(out, s, strlen(s)) ? COURIER_E_NO_MEMORY : COURIER_OK;
    tmp->len = 0;
    int rc = cr_charset_from_utf8(tmp, charset, s, strlen(s));
    if (rc) return rc;
    return cr_percent_encode(out, tmp->data ? tmp->data : "", tmp->len) ? COURIER_E_NO_MEMORY : COURIER_OK;
}

/* name=value&... with the parameters in `charset` (NULL: UTF-8). On a failure *bad names the
 * parameter that did not convert. */
static int encode_form(cr_buf *out, const cr_kvlist *params, const char *charset, const char **bad) {
    cr_buf tmp = {0};
    int rc = COURIER_OK;
    for (size_t i = 0; i < params->count && rc == COURIER_OK; i++) {
        const cr_kv *kv = &params->items[i];
        if (out->len && cr_buf_append_char(out, '&')) rc = COURIER_E_NO_MEMORY;
        if (!rc) rc = encode_text(out, &tmp, charset, kv->name);
        if (!rc && cr_buf_append_char(out, '=')) rc = COURIER_E_NO_MEMORY;
        if (!rc) rc = encode_text(out, &tmp, charset, kv->value);
        if (rc && bad) *bad = kv->name;
    }
    cr_buf_free(&tmp);
    return rc;
}

/* The parameters as an object of strings, then an object's members (route.c) with their types. */
static int encode_json(cr_buf *out, const cr_kvlist *params, const json_t *members) {
    json_t *obj = json_object();
    if (!obj) return COURIER_E_NO_MEMORY;
    int rc = COURIER_OK;
    for (size_t i = 0; i < params->count && rc == COURIER_OK; i++) {
        json_t *v = json_string(params->items[i].value);
        if (!v || json_object_set_new(obj, params->items[i].name, v)) rc = COURIER_E_NO_MEMORY;
    }
    if (members && rc == COURIER_OK && json_object_update(obj, (json_t *)members)) rc = COURIER_E_NO_MEMORY;
    char *text = rc == COURIER_OK ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (rc == COURIER_OK && (!text || cr_buf_append_str(out, text))) rc = COURIER_E_NO_MEMORY;
    free(text);
    json_decref(obj);
    return rc;
}

/* Appends an encoded query to a URL (before any fragment), with '?' or '&'. */
static int append_query(char **url, const char *query) {
    if (!*query) return COURIER_OK;
    const char *hash = strchr(*url, '#');
    size_t head = hash ? (size_t)(hash - *url) : strlen(*url);
    cr_buf b = {0};
    bool has_q = memchr(*url, '?', head) != NULL;
    bool ends_sep = head && ((*url)[head - 1] == '?' || (*url)[head - 1] == '&');
    if (cr_buf_append(&b, *url, head) || (!ends_sep && cr_buf_append_char(&b, has_q ? '&' : '?')) ||
        cr_buf_append_str(&b, query) || (hash && cr_buf_append_str(&b, hash))) {
        cr_buf_free(&b);
        return COURIER_E_NO_MEMORY;
    }
    free(*url);
    *url = cr_buf_take(&b, NULL);
    return *url ? COURIER_OK : COURIER_E_NO_MEMORY;
}

static bool params_in_query(const courier_request *r) {
    if (r->has_body || r->body_file) return true;
    return strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0 || strcmp(r->method, "DELETE") == 0;
}

/* One transfer per send: kept under glibc's large-request size (1,024 bytes with its header), so a
 * send never consolidates malloc's fast bins (a cache hit's cost; Benchmarks/callgrind). A field
 * that would cross it belongs behind a pointer, made when the request uses it (errbuf, freeze). */
_Static_assert(sizeof(cr_transfer) <= 1000, "cr_transfer grew past 1,000 bytes: see the comment above");

void cr_transfer_free(cr_transfer *t) {
    if (!t) return;
    free(t->method);
    free(t->url);
    cr_kvlist_clear(&t->headers);
    free(t->body);
    cr_callback_release(t->validator);
    if (t->slist) curl_slist_free_all(t->slist);
    free(t->lines);
    cr_urlh_release(t->urlh);
    cr_buf_free(&t->resp_body);
    cr_kvlist_clear(&t->resp_headers);
    cr_buf_free(&t->hdr_block);
    cr_ext_free(t->jspec); /* mapping.c */
    free(t->host);
    free(t->coalesce_key);
    cr_mock_free(t->mock);
    free(t->errbuf);
    free(t->freeze.id); /* journal.c */
    free(t->freeze.resend_policy);
    cr_raise_release(&t->raised); /* user_error.c: a raise nobody was answered with */
    if (t->call) cr_raise_release(&t->call->raised);
    free(t->call);
    cr_transfer_release(t); /* transfer.c: files, mime */
    cr_parts_free(t->parts);
    free(t->body_file);
    free(t->download_path);
    cr_callback_release(t->progress);
    cr_ext_free(t->cache); /* cache.c */
    cr_ext_free(t->stub);  /* stubs.c */
    cr_auth_free(t->auth);        /* auth.c */
    courier_response_free(t->held);
    cr_callback_release(t->http.hook); /* redirect.c */
    cr_hops_free(t->hops);
    courier_security_free(t->security); /* security.c */
    cr_netopts_free(t->net); /* netopts.c */
    cr_ext_free(t->sess); /* engine/session.c */
    free(t);
}

int cr_transfer_refuse(courier_engine *e, cr_transfer *t, int code, const courier_error *err) {
    if (t && t->intercepted) {
        cr_raised *outer = cr_raise_catch(NULL); /* as answer's (engine.c): monitors raise nowhere */
        cr_event_finished(e, t, code, NULL, err); /* lifecycle.c */
        cr_raise_catch(outer);
    }
    cr_transfer_free(t);
    return code;
}

int cr_transfer_prepare(courier_engine *e, const courier_request *r, cr_transfer **out, courier_error *err) {
    const courier_config *cfg = cr_core(e)->config;
    *out = NULL;
    cr_transfer *t = cr_zalloc(sizeof *t);
    if (!t) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    courier_outgoing o = {0};
    cr_kvlist params = {0};
    cr_buf enc = {0};
    int rc = COURIER_E_NO_MEMORY;
    /* The send's id, before any callback: customize and before-send interceptors see the id its
     * events, log lines and response will carry (a tracer starts its span there). A send refused
     * later leaves its id unused. */
    t->id = o.id = atomic_fetch_add(&cr_core(e)->next_id, 1);

    /* An API's path with parameters and no object (catalog.c): refused, naming the parameter. */
    if (r->route_unfilled) {
        cr_buf unused = {0};
        rc = cr_route_fill(r->target, NULL, &unused, NULL, err); /* err names the parameter */
        cr_buf_free(&unused);
        if (rc == COURIER_OK) rc = cr_fail(err, COURIER_E_ROUTE_PARAMETER, "path '%.200s' is not filled", r->target);
        goto fail_reported;
    }
    /* URL: absolute target, or base (the request's, else the engine's) joined with the path. */
    const char *base = r->base_url ? r->base_url : cfg->base_url;
    if (is_absolute_url(r->target)) {
        if (!(o.url = cr_strdup(r->target))) goto fail;
    } else if (!base) {
        rc = cr_fail(err, COURIER_E_INVALID_URL, "relative path '%.200s' and no base URL", r->target);
        goto fail_reported;
    } else {
        cr_buf u = {0};
        char vbuf[CR_API_VERSION_MAX + 2];
        if (cr_join_url(&u, base, cr_api_version_of(cfg, r, vbuf), r->target)) { /* route.c */
            cr_buf_free(&u);
            goto fail;
        }
        o.url = cr_buf_take(&u, NULL);
        if (!o.url) goto fail;
    }
    /* A base URL was checked when it was set, and joining puts the path after a '/', so a relative
     * path only needs its own bytes checked: a full parse per request costs more than the rest. */
    bool valid = is_absolute_url(r->target) ? cr_url_valid(o.url) : cr_url_path_valid(r->target);
    if (!valid) {
        rc = cr_fail(err, COURIER_E_INVALID_URL, "invalid URL '%.200s'", o.url);
        goto fail_reported;
    }
    /* HSTS (hsts.c): http:// to a known HSTS host goes out as https://, before the cache, stubs and
     * interceptors see the URL. */
    int upgraded = 0;
    if (cr_hsts_upgrade(e, &o.url, &upgraded) != COURIER_OK) goto fail;
    t->hsts_upgraded = upgraded != 0;

    /* Parameters: the engine's defaults first, then the request's. */
    if (r->use_default_params && cr_kvlist_copy(&params, &cfg->params)) goto fail;
    if (cr_kvlist_copy(&params, &r->params)) goto fail;
    /* An object's members left after its route (route.c): typed in a JSON body, else flattened. */
    int encoding = r->body_encoding >= 0 ? r->body_encoding : (int)cfg->body_encoding;
    const json_t *members = r->object_rest;
    if (members && (params_in_query(r) || encoding != COURIER_BODY_JSON || (r->parts && r->parts->count))) {
        if ((rc = cr_form_flatten(members, &params)) != COURIER_OK) {
            rc = cr_fail(err, rc, "the object's members cannot be sent as parameters");
            goto fail_reported;
        }
        members = NULL;
    }

    /* Headers: defaults not overridden by the request, then the request's. */
    for (size_t i = 0; i < cfg->headers.count; i++) {
        const cr_kv *kv = &cfg->headers.items[i];
        if (cr_kvlist_get(&r->headers, kv->name)) continue;
        if (cr_kvlist_add(&o.headers, kv->name, strlen(kv->name), kv->value, strlen(kv->value))) goto fail;
    }
    if (cr_kvlist_copy(&o.headers, &r->headers)) goto fail;
    if (!cr_kvlist_get(&o.headers, "User-Agent")) {
        const char *ua = cfg->user_agent ? cfg->user_agent : "Courier/" COURIER_VERSION_STRING;
        if (cr_kvlist_add(&o.headers, "User-Agent", 10, ua, strlen(ua))) goto fail;
    }

    /* The parameters' charset: the request's ("UTF-8" there replaces the engine's), else the engine's. */
    const char *charset = r->param_charset ? r->param_charset : cfg->param_charset;
    if (cr_charset_is_utf8(charset)) charset = NULL;
    const char *bad = NULL;
    bool multipart = r->parts && r->parts->count;
    if (multipart) {
        /* Parameters become the multipart body's first text parts (transfer.c); curl writes the
         * Content-Type with its boundary. */
    } else if (params_in_query(r)) {
        if ((rc = encode_form(&enc, &params, charset, &bad)) != COURIER_OK) goto fail_params;
        if (append_query(&o.url, enc.data ? enc.data : "")) goto fail;
        if (r->body_file && !cr_kvlist_get(&o.headers, "Content-Type") &&
            cr_kvlist_add(&o.headers, "Content-Type", 12, r->body_file_type, strlen(r->body_file_type)))
            goto fail;
        if (r->has_body) {
            if (!(t->body = malloc(r->body_len ? r->body_len : 1))) goto fail;
            if (r->body_len) memcpy(t->body, r->body, r->body_len);
            t->body_len = r->body_len;
            t->has_body = 1;
            if (!cr_kvlist_get(&o.headers, "Content-Type") &&
                cr_kvlist_add(&o.headers, "Content-Type", 12, r->content_type, strlen(r->content_type)))
                goto fail;
        }
    } else {
        char form_type[128];
        snprintf(form_type, sizeof form_type, "application/x-www-form-urlencoded%s%s", charset ? "; charset=" : "",
                 charset ? charset : "");
        const char *ctype = encoding == COURIER_BODY_JSON ? "application/json" : form_type;
        if (encoding == COURIER_BODY_JSON) {
            if (encode_json(&enc, &params, members)) goto fail;
        } else if ((rc = encode_form(&enc, &params, charset, &bad)) != COURIER_OK) {
            goto fail_params;
        }
        t->body = cr_buf_take(&enc, &t->body_len);
        if (!t->body) goto fail;
        t->has_body = 1;
        if (!cr_kvlist_get(&o.headers, "Content-Type") && cr_kvlist_add(&o.headers, "Content-Type", 12, ctype, strlen(ctype)))
            goto fail;
    }

    if (!(o.method = cr_strdup(r->method))) goto fail;
    if (r->customize) {
        courier_customize_fn fn = (courier_customize_fn)r->customize->fn;
        int crc = fn(&o, r->customize->user);
        if (crc != COURIER_OK) {
            rc = cr_fail(err, crc < 0 ? crc : COURIER_E_INVALID_ARGUMENT, "the customize callback refused the request");
            goto fail_reported;
        }
    }

    rc = cr_core(e)->sched_prepare(e, r, t, &o, err); /* interceptors, priority, retry, mock, transport */
    if (rc) goto fail_reported;

    t->method = o.method;
    t->url = o.url;
    t->headers = o.headers;
    memset(&o, 0, sizeof o);
    /* A request's timeout_ms: 0 the engine's, -1 none (courier_request_set_timeout). */
    t->timeout_ms = r->timeout_ms > 0 ? r->timeout_ms : r->timeout_ms < 0 ? 0 : cfg->timeout_ms;
    cr_http_opts_resolve(&t->http, &cfg->http, &r->http); /* redirect.c */
    t->max_bytes = cfg->max_response_bytes;
    t->validator = cr_callback_retain(r->validator ? r->validator : cfg->validator);
    t->status_codes = r->status_codes; /* route.c */
    t->engine = e;
    t->no_cellular = r->no_cellular;
    if (r->security && !(t->security = cr_security_copy(r->security))) goto fail;
    if (cr_netopts_prepare(r->net, cfg->net, &t->net)) goto fail; /* netopts.c: DNS overrides, socket */
    t->http2_only = cr_netopts_http2_only(r->net, cfg->net);
    t->ce_raw = t->ce_raw_asked = cr_netopts_raw_content(r->net, cfg->net); /* transport.c keeps the coded body */
    if (r->jspec && !(t->jspec = cr_ext_copy(r->jspec))) goto fail;
    if (cr_auth_merge(r->auth, cfg->auth, t->url, &t->auth)) goto fail; /* auth.c: credentials, proxy, handler */
    if ((rc = cr_transfer_copy_transfers(r, t, multipart ? &params : NULL, err)) != COURIER_OK) {
        cr_kvlist_clear(&params);
        cr_buf_free(&enc);
        return cr_transfer_refuse(e, t, rc, err);
    }
    if ((rc = cr_core(e)->sched_finish_prepare(r, t, err)) != COURIER_OK) {
        cr_kvlist_clear(&params);
        cr_buf_free(&enc);
        return cr_transfer_refuse(e, t, rc, err);
    }
    cr_kvlist_clear(&params);
    cr_buf_free(&enc);
    *out = t;
    return COURIER_OK;

fail_params:
    if (rc == COURIER_E_NO_MEMORY) goto fail;
    rc = cr_fail(err, rc, "parameter '%.100s' cannot be written in %s", bad ? bad : "", charset ? charset : "UTF-8");
    goto fail_reported;
fail:
    rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
fail_reported:
    if (t->intercepted && !t->method) { /* its FINISHED tells the send as the interceptors left it */
        t->method = o.method;
        t->url = o.url;
        t->headers = o.headers;
        memset(&o, 0, sizeof o);
    }
    free(o.method);
    free(o.url);
    cr_kvlist_clear(&o.headers);
    cr_kvlist_clear(&params);
    cr_buf_free(&enc);
    return cr_transfer_refuse(e, t, rc, err);
}
