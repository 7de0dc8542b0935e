/*
 * serialize.c — response decoders by MIME type (JSON for application/json and +json, MIME types
 * registered as JSON, custom decoder callbacks); the request body encoders are request.c's (over
 * json.c's writers). Also the engine-level JSON settings (envelope, parse limits)
 * and a response's JSON state: the body parsed once, on demand or at completion.
 */
#include "http/http.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- MIME types ---------------------------------------------------------------------------------- */

/* The lower-case "type/subtype" of a Content-Type value, without parameters or spaces. 0 if none. */
static int mime_of(const char *ct, char *buf, size_t size) {
    if (!ct) return 0;
    while (*ct == ' ' || *ct == '\t') ct++;
    size_t n = 0;
    while (ct[n] && ct[n] != ';' && ct[n] != ' ' && ct[n] != '\t' && n + 1 < size) {
        buf[n] = (char)tolower((unsigned char)ct[n]);
        n++;
    }
    buf[n] = '\0';
    return n > 0 && strchr(buf, '/') != NULL;
}

static int builtin_json(const char *mime) {
    if (strcmp(mime, "application/json") == 0) return 1;
    size_t n = strlen(mime);
    return n > 5 && strcmp(mime + n - 5, "+json") == 0;
}

static int mime_matches(const char *pattern, const char *mime) {
    if (strcmp(pattern, "*/*") == 0 || strcmp(pattern, mime) == 0) return 1;
    size_t n = strlen(pattern);
    return n > 2 && strcmp(pattern + n - 2, "/*") == 0 && strncmp(pattern, mime, n - 1) == 0;
}

/* Chooses the decoder for a content type: 1 with *custom set (retained) or NULL for JSON; 0 none.
 * A missing Content-Type is read as JSON. Registrations are searched newest first. */
static int choose_decoder(const cr_jconf *c, const char *content_type, cr_callback **custom) {
    *custom = NULL;
    char mime[128];
    if (!content_type) return 1;
    if (!mime_of(content_type, mime, sizeof mime)) return 0;
    for (size_t i = c ? c->ncodecs : 0; i-- > 0;) {
        if (mime_matches(c->codecs[i].mime, mime)) {
            *custom = cr_callback_retain(c->codecs[i].decoder);
            return 1;
        }
    }
    return builtin_json(mime);
}

/* ---- engine settings --------------------------------------------------------------------------------- */

static void *jconf_copy(const void *state);
static void jconf_free(void *state);
static const cr_ext_ops jconf_ops = {jconf_copy, jconf_free};

static void jconf_free(void *state) {
    cr_jconf *c = state;
    courier_envelope_free(c->envelope);
    for (size_t i = 0; i < c->ncodecs; i++) {
        free(c->codecs[i].mime);
        cr_callback_release(c->codecs[i].decoder);
    }
    free(c->codecs);
    free(c);
}

static void *jconf_copy(const void *state) {
    const cr_jconf *src = state;
    cr_jconf *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ext.ops = &jconf_ops;
    c->options = src->options;
    c->envelope = cr_envelope_retain(src->envelope);
    if (src->ncodecs) {
        if (!(c->codecs = calloc(src->ncodecs, sizeof *c->codecs))) goto fail;
        for (size_t i = 0; i < src->ncodecs; i++) {
            c->codecs[i].decoder = cr_callback_retain(src->codecs[i].decoder);
            c->ncodecs++;
            if (!(c->codecs[i].mime = cr_strdup(src->codecs[i].mime))) goto fail;
        }
    }
    return c;
fail:
    jconf_free(c);
    return NULL;
}

static cr_jconf *jconf_of(courier_config *c) {
    if (!c->jconf && (c->jconf = calloc(1, sizeof *c->jconf))) {
        c->jconf->ext.ops = &jconf_ops;
        cr_json_options_resolve(NULL, &c->jconf->options);
    }
    return c->jconf;
}

int courier_config_set_envelope(courier_config *c, const courier_envelope *e) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    cr_jconf *j = jconf_of(c);
    if (!j) return COURIER_E_NO_MEMORY;
    courier_envelope *k = cr_envelope_retain(e);
    courier_envelope_free(j->envelope);
    j->envelope = k;
    return COURIER_OK;
}

int courier_config_set_json_options(courier_config *c, const courier_json_options *opts) {
    if (!c || (opts && !CR_SIZED_OK(opts, courier_json_options))) return COURIER_E_INVALID_ARGUMENT;
    cr_jconf *j = jconf_of(c);
    if (!j) return COURIER_E_NO_MEMORY;
    cr_json_options_resolve(opts, &j->options);
    return COURIER_OK;
}

static int add_codec(courier_config *c, const char *mime, cr_callback *decoder) {
    char norm[128];
    size_t len = mime ? strlen(mime) : 0;
    if (len == 0 || len >= sizeof norm || !mime_of(mime, norm, sizeof norm) || strlen(norm) != len ||
        !cr_is_token(norm, strchr(norm, '/') - norm) || !cr_is_token(strchr(norm, '/') + 1, strlen(strchr(norm, '/') + 1))) {
        cr_callback_release(decoder);
        return COURIER_E_INVALID_ARGUMENT;
    }
    cr_jconf *j = jconf_of(c);
    cr_codec *p = j ? realloc(j->codecs, (j->ncodecs + 1) * sizeof *p) : NULL;
    char *m = p ? cr_strdup(norm) : NULL;
    if (!m) {
        if (p) j->codecs = p;
        cr_callback_release(decoder);
        return COURIER_E_NO_MEMORY;
    }
    j->codecs = p;
    j->codecs[j->ncodecs].mime = m;
    j->codecs[j->ncodecs].decoder = decoder;
    j->ncodecs++;
    return COURIER_OK;
}

int courier_config_add_json_type(courier_config *c, const char *mime) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    return add_codec(c, mime, NULL);
}

int courier_config_set_decoder(courier_config *c, const char *mime, courier_decoder_fn fn, void *user,
                               courier_user_free_fn user_free) {
    if (!c || !fn) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (rc) return rc;
    return add_codec(c, mime, cb);
}

/* ---- a response's JSON ---------------------------------------------------------------------------- */

static cr_jresp *jresp_new(const cr_jconf *conf, const char *content_type) {
    cr_jresp *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    atomic_init(&j->doc, NULL);
    atomic_init(&j->tape, NULL);
    atomic_init(&j->data.json, NULL);
    if (conf) j->options = conf->options;
    else cr_json_options_resolve(NULL, &j->options);
    j->decodable = choose_decoder(conf, content_type, &j->decoder);
    if (content_type && !(j->content_type = cr_strdup(content_type))) {
        cr_callback_release(j->decoder);
        free(j);
        return NULL;
    }
    return j;
}

cr_jresp *cr_jresp_of(const courier_response *cr) {
    courier_response *r = (courier_response *)cr;
    cr_jresp *j = atomic_load(&r->jresp);
    if (j) return j;
    /* A response the transport did not see (built elsewhere): decide from its content type alone. */
    cr_jresp *fresh = jresp_new(NULL, cr_kvlist_get(&r->headers, "Content-Type"));
    if (!fresh) return NULL;
    cr_jresp *expected = NULL;
    if (atomic_compare_exchange_strong(&r->jresp, &expected, fresh)) return fresh;
    cr_jresp_free(fresh);
    return expected;
}

/* Why the body cannot be read as JSON before any parse: no decoder for its content type, or (with no
 * custom decoder) an empty body. COURIER_OK when it may be. */
static int jresp_readable(const courier_response *r, const cr_jresp *j, courier_error *err) {
    if (!j->decodable)
        return cr_fail(err, COURIER_E_JSON, "no decoder for content type '%.100s'",
                       j->content_type ? j->content_type : "");
    if (!j->decoder && r->body_len == 0) return cr_fail(err, COURIER_E_JSON, "the body is empty");
    return COURIER_OK;
}

/* Parses (or decodes) the body once; later calls, from any thread, get the same document. */
int cr_jresp_doc(const courier_response *r, cr_jresp *j, const json_t **out, courier_error *err) {
    json_t *doc = atomic_load(&j->doc);
    if (doc) {
        *out = doc;
        return COURIER_OK;
    }
    *out = NULL;
    int rc = jresp_readable(r, j, err);
    if (rc) return rc;
    if (j->decoder) {
        courier_decoder_fn fn = (courier_decoder_fn)j->decoder->fn;
        courier_json *made = NULL;
        courier_error derr;
        cr_error_clear(&derr);
        rc = fn((const uint8_t *)r->body, r->body_len, j->content_type, &made, &derr, j->decoder->user);
        if (rc == COURIER_OK && !made) rc = COURIER_E_JSON;
        if (rc != COURIER_OK) {
            courier_json_free(made);
            if (rc > 0) rc = COURIER_E_JSON;
            if (err) {
                *err = derr;
                err->code = rc;
                if (!err->message[0]) snprintf(err->message, sizeof err->message, "the decoder for '%.100s' failed",
                                               j->content_type ? j->content_type : "");
            }
            return rc;
        }
        doc = (json_t *)made;
    } else {
        rc = cr_json_parse(r->body, r->body_len, &j->options, &doc, err);
        if (rc) return rc;
    }
    json_t *expected = NULL;
    if (!atomic_compare_exchange_strong(&j->doc, &expected, doc)) {
        json_decref(doc);
        doc = expected;
    }
    *out = doc;
    return COURIER_OK;
}

int cr_jresp_tape(const courier_response *r, cr_jresp *j, const courier_json_tape **out, courier_error *err) {
    courier_json_tape *tape = atomic_load(&j->tape);
    if (tape) {
        *out = tape;
        return COURIER_OK;
    }
    *out = NULL;
    int rc = jresp_readable(r, j, err);
    if (rc) return rc;
    if (j->decoder) {
        /* A custom decoder makes a jansson document: the tape is its copy. */
        const json_t *doc;
        if ((rc = cr_jresp_doc(r, j, &doc, err))) return rc;
        if ((rc = courier_json_tape_from_value(&tape, (const courier_json *)doc, err))) return rc;
    } else {
        if ((rc = courier_json_tape_parse(&tape, r->body, r->body_len, &j->options, err))) return rc;
    }
    courier_json_tape *expected = NULL;
    if (!atomic_compare_exchange_strong(&j->tape, &expected, tape)) {
        courier_json_tape_free(tape);
        tape = expected;
    }
    *out = tape;
    return COURIER_OK;
}

const json_t *cr_jresp_value(const courier_response *r, cr_jresp *j, cr_jval *v) {
    if (!v->present) return NULL;
    json_t *json = atomic_load(&v->json);
    if (json) return json;
    if (v->tape) { /* a mapping's output: built from its tape */
        if (cr_json_from_tape(v->tape, 0, &json) != COURIER_OK) return NULL;
        json_t *expected = NULL;
        if (!atomic_compare_exchange_strong(&v->json, &expected, json)) {
            json_decref(json);
            json = expected;
        }
        return json;
    }
    /* A value of the body: found in the document (so it is the document's own value, as before). */
    const json_t *doc;
    if (cr_jresp_doc(r, j, &doc, NULL) != COURIER_OK) return NULL;
    json = (json_t *)(v->path ? cr_json_path(doc, v->path, strlen(v->path)) : doc);
    json_t *expected = NULL;
    if (json && !atomic_compare_exchange_strong(&v->json, &expected, json)) json = expected;
    return json;
}

/* The first response descriptor kept for this send whose statuses hold `status`, or NULL. */
static const struct cr_desc_spec *desc_for(const cr_jspec *s, int status) {
    for (size_t i = 0; s && i < s->ndescs; i++)
        if (status >= s->descs[i].lo && status <= s->descs[i].hi) return &s->descs[i];
    return NULL;
}

int cr_json_finish(const cr_transfer *t, courier_response *r, courier_error *err) {
    const courier_config *cfg = t->engine ? cr_core(t->engine)->config : NULL;
    const cr_jconf *conf = cfg ? cfg->jconf : NULL;
    const cr_jspec *s = t->jspec;
    const struct cr_desc_spec *d = desc_for(s, r->status);
    int asked = s && (s->key_path || s->mapping || s->nresults || d);
    /* Nothing to do now and nothing engine-specific to remember: the JSON state is made on first
     * use (cr_jresp_of), from the content type alone, as it would be here. */
    if (!conf && !asked && !(s && s->envelope_set && s->envelope)) return COURIER_OK;
    cr_jresp *j = jresp_new(conf, cr_kvlist_get(&r->headers, "Content-Type"));
    if (!j) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    cr_jresp_free(atomic_exchange(&r->jresp, j)); /* a response may come back from a mock already read */
    const courier_json_tape *tape;
    if (!cr_status_accepted(&t->status_codes, r->status)) {
        /* Judged by its status; its JSON is still there on demand. A response descriptor for the
         * status maps the error body into the error model (best effort: the failure is the status). */
        if (d && (d->key_path || d->mapping) && cr_jresp_tape(r, j, &tape, NULL) == COURIER_OK) {
            cr_jspec only = {.key_path = d->key_path, .mapping = d->mapping};
            if (cr_json_apply_spec(&only, NULL, tape, NULL, j, NULL) != COURIER_OK) cr_jval_clear(&j->data);
        }
        return COURIER_OK;
    }
    const courier_envelope *env = s && s->envelope_set ? s->envelope : conf ? conf->envelope : NULL;
    if (!asked && !(env && j->decodable)) return COURIER_OK;
    int rc = cr_jresp_tape(r, j, &tape, err);
    const json_t *doc = NULL;
    /* An envelope's check callback reads the jansson document: made for it, and only for it. */
    if (rc == COURIER_OK && cr_envelope_has_check(env)) rc = cr_jresp_doc(r, j, &doc, err);
    if (rc == COURIER_OK) {
        cr_jspec with = s ? *s : (cr_jspec){0};
        if (d && !with.key_path && !with.mapping) { /* the descriptor's, when the request has none */
            with.key_path = d->key_path;
            with.mapping = d->mapping;
        }
        rc = cr_json_apply_spec(&with, env, tape, doc, j, err);
    }
    if (rc && err) err->http_status = r->status;
    return rc;
}

/* ---- objects as form parameters (routes) --------------------------------------------------------- */

static int emit_param(void *ctx, const char *name, size_t name_len, const char *value, size_t value_len) {
    int rc = cr_check_param(name, name_len, value, value_len); /* UTF-8, no NUL: as courier_request_add_param */
    return rc ? rc : cr_kvlist_add(ctx, name, name_len, value, value_len);
}

int cr_form_flatten(const json_t *object, cr_kvlist *out) { return cr_json_form_each(object, emit_param, out); }
