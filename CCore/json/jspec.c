/*
 * jspec.c — what is asked of a response's JSON, and getting it: envelopes (the global response
 * descriptor: code, message and data paths, success codes, a check), what a request asks of its
 * JSON (key path, mapping, named results, envelope: cr_jspec) and how a finished response gets its
 * results (cr_json_apply_spec, on the body's tape). Mappings themselves are mapping.c's.
 *
 * An envelope, like a mapping, is built on one thread and sealed once attached; the worker then
 * reads it while other threads hold it. References are counted atomically.
 */
#include "json/json_internal.h"

#include <stdlib.h>
#include <string.h>

typedef courier_json_tape_entry tentry; /* as mapping.c names it */

/* ---- envelopes ----------------------------------------------------------------------------------------- */

struct courier_envelope {
    atomic_int refs;
    atomic_int sealed;
    char *code_path;
    char *message_path;
    char *data_path;
    int64_t *codes;
    size_t ncodes;
    int has_range;
    int64_t lo, hi;
    int code_required;
    courier_mapping *mapping;
    cr_callback *check;
};

int courier_envelope_new(courier_envelope **out) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    courier_envelope *e = calloc(1, sizeof *e);
    *out = e;
    if (!e) return COURIER_E_NO_MEMORY;
    atomic_init(&e->refs, 1);
    atomic_init(&e->sealed, 0);
    return COURIER_OK;
}

courier_envelope *cr_envelope_retain(const courier_envelope *ce) {
    courier_envelope *e = (courier_envelope *)ce;
    if (!e) return NULL;
    atomic_store(&e->sealed, 1);
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    return e;
}

void courier_envelope_free(courier_envelope *e) {
    if (!e) return;
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1) return;
    free(e->code_path);
    free(e->message_path);
    free(e->data_path);
    free(e->codes);
    courier_mapping_free(e->mapping);
    cr_callback_release(e->check);
    free(e);
}

static int envelope_editable(const courier_envelope *e) {
    return e && !atomic_load(&((courier_envelope *)e)->sealed);
}

static int set_path(courier_envelope *e, char **dst, const char *path) {
    if (!envelope_editable(e) || (path && !cr_json_path_valid(path))) return COURIER_E_INVALID_ARGUMENT;
    return cr_set_string(dst, path);
}

int courier_envelope_set_code_path(courier_envelope *e, const char *path, int required) {
    int rc = set_path(e, e ? &e->code_path : NULL, path);
    if (rc == COURIER_OK) e->code_required = required ? 1 : 0;
    return rc;
}

int courier_envelope_set_message_path(courier_envelope *e, const char *path) {
    return set_path(e, e ? &e->message_path : NULL, path);
}

int courier_envelope_set_data_path(courier_envelope *e, const char *path) {
    return set_path(e, e ? &e->data_path : NULL, path);
}

int courier_envelope_add_success_code(courier_envelope *e, int64_t code) {
    if (!envelope_editable(e)) return COURIER_E_INVALID_ARGUMENT;
    int64_t *p = realloc(e->codes, (e->ncodes + 1) * sizeof *p);
    if (!p) return COURIER_E_NO_MEMORY;
    e->codes = p;
    e->codes[e->ncodes++] = code;
    return COURIER_OK;
}

int courier_envelope_set_success_range(courier_envelope *e, int64_t lo, int64_t hi) {
    if (!envelope_editable(e) || lo > hi) return COURIER_E_INVALID_ARGUMENT;
    e->has_range = 1;
    e->lo = lo;
    e->hi = hi;
    return COURIER_OK;
}

int courier_envelope_set_mapping(courier_envelope *e, const courier_mapping *m) {
    if (!envelope_editable(e)) return COURIER_E_INVALID_ARGUMENT;
    courier_mapping *r = cr_mapping_retain(m);
    courier_mapping_free(e->mapping);
    e->mapping = r;
    return COURIER_OK;
}

int courier_envelope_set_check(courier_envelope *e, courier_envelope_check_fn fn, void *user,
                               courier_user_free_fn user_free) {
    if (!envelope_editable(e)) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (rc) return rc;
    cr_callback_release(e->check);
    e->check = cb;
    return COURIER_OK;
}

static int code_is_success(const courier_envelope *e, int64_t code) {
    for (size_t i = 0; i < e->ncodes; i++)
        if (e->codes[i] == code) return 1;
    if (e->has_range) return code >= e->lo && code <= e->hi;
    if (e->ncodes) return 0;
    return code >= 200 && code <= 299;
}

/* ---- what a request asks of its JSON ---------------------------------------------------------------- */

static void result_spec_clear(cr_result_spec *s) {
    free(s->name);
    free(s->key_path);
    courier_mapping_free(s->mapping);
}

static void *jspec_copy(const void *state);
static void jspec_free(void *state);
static const cr_ext_ops jspec_ops = {jspec_copy, jspec_free};

static void jspec_free(void *state) {
    cr_jspec *s = state;
    if (!s) return;
    free(s->key_path);
    courier_mapping_free(s->mapping);
    for (size_t i = 0; i < s->nresults; i++) result_spec_clear(&s->results[i]);
    free(s->results);
    courier_envelope_free(s->envelope);
    for (size_t i = 0; i < s->ndescs; i++) {
        free(s->descs[i].key_path);
        courier_mapping_free(s->descs[i].mapping);
    }
    free(s->descs);
    free(s);
}

static cr_jspec *jspec_of(cr_jspec **where);

int cr_jspec_add_desc(cr_jspec **r, int lo, int hi, const char *key_path, const courier_mapping *mapping) {
    cr_jspec *s = jspec_of(r);
    if (!s) return COURIER_E_NO_MEMORY;
    struct cr_desc_spec *d = realloc(s->descs, (s->ndescs + 1) * sizeof *d);
    if (!d) return COURIER_E_NO_MEMORY;
    s->descs = d;
    d += s->ndescs;
    memset(d, 0, sizeof *d);
    d->lo = lo, d->hi = hi;
    if (key_path && !(d->key_path = cr_strdup(key_path))) return COURIER_E_NO_MEMORY;
    d->mapping = cr_mapping_retain(mapping);
    s->ndescs++;
    return COURIER_OK;
}

static void *jspec_copy(const void *state) {
    const cr_jspec *s = state;
    cr_jspec *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ext.ops = &jspec_ops;
    if (s->key_path && !(c->key_path = cr_strdup(s->key_path))) goto fail;
    c->mapping = cr_mapping_retain(s->mapping);
    c->envelope_set = s->envelope_set;
    c->envelope = cr_envelope_retain(s->envelope);
    if (s->nresults) {
        if (!(c->results = calloc(s->nresults, sizeof *c->results))) goto fail;
        for (size_t i = 0; i < s->nresults; i++) {
            cr_result_spec *d = &c->results[i];
            const cr_result_spec *r = &s->results[i];
            c->nresults++;
            d->flags = r->flags;
            d->mapping = cr_mapping_retain(r->mapping);
            if (!(d->name = cr_strdup(r->name)) || (r->key_path && !(d->key_path = cr_strdup(r->key_path)))) goto fail;
        }
    }
    for (size_t i = 0; i < s->ndescs; i++)
        if (cr_jspec_add_desc(&c, s->descs[i].lo, s->descs[i].hi, s->descs[i].key_path, s->descs[i].mapping)) goto fail;
    return c;
fail:
    jspec_free(c);
    return NULL;
}

static cr_jspec *jspec_of(cr_jspec **where) {
    if (!*where && (*where = calloc(1, sizeof **where))) (*where)->ext.ops = &jspec_ops;
    return *where;
}

int cr_jspec_set_key_path(cr_jspec **r, const char *key_path) {
    if (!r || (key_path && *key_path && !cr_json_path_valid(key_path))) return COURIER_E_INVALID_ARGUMENT;
    cr_jspec *s = jspec_of(r);
    if (!s) return COURIER_E_NO_MEMORY;
    return cr_set_string(&s->key_path, key_path && *key_path ? key_path : NULL);
}

int cr_jspec_set_mapping(cr_jspec **r, const courier_mapping *m) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    cr_jspec *s = jspec_of(r);
    if (!s) return COURIER_E_NO_MEMORY;
    courier_mapping *k = cr_mapping_retain(m);
    courier_mapping_free(s->mapping);
    s->mapping = k;
    return COURIER_OK;
}

int cr_jspec_add_result(cr_jspec **r, const char *name, const char *key_path, const courier_mapping *m,
                               unsigned flags) {
    if (!r || !name || !*name || (key_path && *key_path && !cr_json_path_valid(key_path)) ||
        (flags & ~(unsigned)COURIER_RESULT_OPTIONAL))
        return COURIER_E_INVALID_ARGUMENT;
    cr_jspec *s = jspec_of(r);
    if (!s) return COURIER_E_NO_MEMORY;
    for (size_t i = 0; i < s->nresults; i++)
        if (strcmp(s->results[i].name, name) == 0) return COURIER_E_INVALID_ARGUMENT;
    cr_result_spec *p = realloc(s->results, (s->nresults + 1) * sizeof *p);
    if (!p) return COURIER_E_NO_MEMORY;
    s->results = p;
    cr_result_spec *d = &p[s->nresults];
    memset(d, 0, sizeof *d);
    d->name = cr_strdup(name);
    d->key_path = key_path && *key_path ? cr_strdup(key_path) : NULL;
    if (!d->name || (key_path && *key_path && !d->key_path)) {
        result_spec_clear(d);
        return COURIER_E_NO_MEMORY;
    }
    d->mapping = cr_mapping_retain(m);
    d->flags = flags;
    s->nresults++;
    return COURIER_OK;
}

int cr_jspec_set_envelope(cr_jspec **r, const courier_envelope *e) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    cr_jspec *s = jspec_of(r);
    if (!s) return COURIER_E_NO_MEMORY;
    courier_envelope *k = cr_envelope_retain(e);
    courier_envelope_free(s->envelope);
    s->envelope = k;
    s->envelope_set = 1;
    return COURIER_OK;
}

/* ---- a finished response: envelope, key paths, mappings ------------------------------------------- */

int cr_envelope_has_check(const courier_envelope *e) { return e && e->check; }

/* The envelope on the body's tape (envelope_run's rules before the move, value for value): its
 * mapping as a check, the code and message by key path, then the check callback (with the jansson
 * document, `doc`) or the success codes. */
static int envelope_run(const courier_envelope *e, const courier_json_tape *t, const json_t *doc, cr_jresp *j,
                        courier_error *err) {
    const tentry *te = courier_json_tape_entries(t, NULL);
    const char *text = (const char *)courier_json_tape_text(t);
    if (e->mapping) {
        courier_json_tape *ignored = NULL;
        int rc = cr_mapping_apply_tape(e->mapping, t, 0, "", &ignored, &j->merr, err);
        courier_json_tape_free(ignored);
        if (rc) {
            j->has_merr = rc == COURIER_E_MAPPING;
            return rc;
        }
    }
    size_t code = 0, msg = 0;
    int has_code = e->code_path && courier_json_tape_path(&code, t, 0, e->code_path);
    int has_msg = e->message_path && courier_json_tape_path(&msg, t, 0, e->message_path);
    if (has_msg && te[msg].type == COURIER_JSON_STRING && !(j->env_message = cr_strdup(text + te[msg].payload)))
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (has_code) {
        const tentry *x = &te[code];
        json_int_t iv = 0;
        double dv;
        int is_int = 0;
        if (x->type == COURIER_JSON_INTEGER) {
            iv = (json_int_t)(int64_t)x->payload;
            is_int = 1;
        } else if (x->type == COURIER_JSON_STRING &&
                   cr_json_number_from_string(text + x->payload, x->length, &iv, &dv, &is_int) == 0 && is_int) {
        } else if (x->type == COURIER_JSON_REAL) {
            memcpy(&dv, &x->payload, sizeof dv);
            is_int = cr_json_real_is_integral(dv, &iv);
        }
        if (!is_int) {
            j->has_merr = 1;
            return cr_mapping_type_error(&j->merr, err, e->code_path, COURIER_JSON_INTEGER, x->type);
        }
        j->env_code = iv;
        j->has_env_code = 1;
    } else if (e->code_path && e->code_required) {
        j->has_merr = 1;
        return cr_mapping_type_error(&j->merr, err, e->code_path, COURIER_JSON_INTEGER, COURIER_JSON_NONE);
    }
    int ok;
    if (e->check) {
        courier_envelope_check_fn fn = (courier_envelope_check_fn)e->check->fn;
        ok = fn((const courier_json *)doc, j->has_env_code, j->env_code, j->env_message, e->check->user);
    } else {
        ok = !j->has_env_code || code_is_success(e, j->env_code);
    }
    if (!ok) {
        cr_fail(err, COURIER_E_API, "%s (code %lld)", j->env_message ? j->env_message : "the server reported a failure",
                (long long)j->env_code);
        return COURIER_E_API;
    }
    return COURIER_OK;
}

/* One result on the tape: the value at key_path (or `fallback` when there is none), mapped if asked
 * (into a tape of its own), else kept as its index in the body's tape and its path. */
static int result_run(const courier_json_tape *t, const char *key_path, const char *fallback, const courier_mapping *m,
                      int optional, cr_jresp *j, cr_jval *out, courier_error *err) {
    const char *path = key_path ? key_path : fallback;
    size_t v = 0;
    int found = courier_json_tape_path(&v, t, 0, path);
    int vt = found ? courier_json_tape_entries(t, NULL)[v].type : COURIER_JSON_NONE;
    if (!found || (vt == COURIER_JSON_NULL && m)) {
        if (optional) return COURIER_OK;
        j->has_merr = 1;
        return cr_mapping_type_error(&j->merr, err, path, m ? COURIER_JSON_OBJECT : COURIER_JSON_ANY, vt);
    }
    if (!m) {
        if (path && !(out->path = cr_strdup(path))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        out->index = v;
        out->present = 1;
        return COURIER_OK;
    }
    int rc = cr_mapping_apply_tape(m, t, v, path ? path : "", &out->tape, &j->merr, err);
    if (rc == COURIER_E_MAPPING) j->has_merr = 1;
    if (rc == COURIER_OK) out->present = 1;
    return rc;
}

int cr_json_apply_spec(const cr_jspec *s, const courier_envelope *env, const courier_json_tape *tape,
                       const json_t *doc, cr_jresp *j, courier_error *err) {
    int rc;
    if (env && (rc = envelope_run(env, tape, doc, j, err))) return rc;
    const char *fallback = env ? env->data_path : NULL;
    if (s && (s->key_path || s->mapping)) {
        j->applied = 1;
        if ((rc = result_run(tape, s->key_path, fallback, s->mapping, 0, j, &j->data, err))) return rc;
    } else if (fallback) {
        /* The envelope's data is the default result, when there is any. */
        j->applied = 1;
        if ((rc = result_run(tape, fallback, NULL, NULL, 1, j, &j->data, err))) return rc;
    }
    if (s && s->nresults) {
        if (!(j->results = calloc(s->nresults, sizeof *j->results))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        for (size_t i = 0; i < s->nresults; i++) {
            const cr_result_spec *r = &s->results[i];
            atomic_init(&j->results[i].value.json, NULL);
            if (!(j->results[i].name = cr_strdup(r->name))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            j->nresults++;
            rc = result_run(tape, r->key_path, fallback, r->mapping, (r->flags & COURIER_RESULT_OPTIONAL) != 0, j,
                            &j->results[i].value, err);
            if (rc) return rc;
        }
    }
    return COURIER_OK;
}

void cr_jval_clear(cr_jval *v) {
    json_t *json = atomic_exchange(&v->json, NULL);
    if (json && v->tape) json_decref(json); /* else borrowed from the document */
    courier_json_tape_free(v->tape);
    free(v->path);
    v->tape = NULL;
    v->path = NULL;
    v->index = 0;
    v->present = 0;
}

void cr_jresp_free(cr_jresp *j) {
    if (!j) return;
    json_t *doc = atomic_load(&j->doc);
    if (doc) json_decref(doc);
    courier_json_tape_free(atomic_load(&j->tape));
    cr_callback_release(j->decoder);
    free(j->content_type);
    cr_jval_clear(&j->data);
    for (size_t i = 0; i < j->nresults; i++) {
        free(j->results[i].name);
        cr_jval_clear(&j->results[i].value);
    }
    free(j->results);
    free(j->env_message);
    free(j);
}
