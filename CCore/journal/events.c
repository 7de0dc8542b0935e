/*
 * events.c — the journal's events (frozen, resent, expired) and the listeners they go to.
 */
#include "journal/journal_internal.h"

/* ---- events ---- */

jevent *cj_event_new(int kind, courier_frozen *snap, uint64_t request_id, int code) {
    jevent *ev = calloc(1, sizeof *ev);
    if (!ev) {
        courier_frozen_free(snap);
        return NULL;
    }
    ev->snap = snap;
    ev->ev.size = sizeof ev->ev;
    ev->ev.kind = kind;
    ev->ev.request_id = request_id;
    ev->ev.code = code;
    ev->waiting = -1;
    return ev;
}

void cj_events_push(jevent ***tail, jevent *ev) {
    if (!ev) return;
    **tail = ev;
    *tail = &ev->next;
}

/* Delivers events in order to every listener, then frees them. Their responses, which the worker
 * made, go back to it to be freed (cj_responses_spent). */
void cj_events_deliver(cr_journal *j, jevent *list) {
    courier_response *small[64], **spent = small;
    size_t nspent = 0, capspent = sizeof small / sizeof small[0];
    while (list) {
        jevent *ev = list;
        list = ev->next;
        ev->ev.frozen = ev->snap;
        ev->ev.freeze_id = ev->snap ? ev->snap->q.id : ev->id;
        ev->ev.response = ev->resp;
        ev->ev.error = ev->ev.code == COURIER_OK ? NULL : &ev->err;
        cj_policy_log_event(j, ev); /* policy.c: the journal's decision line */
        pthread_mutex_lock(&j->lmu);
        size_t n = 0;
        for (jlistener *l = ev->ev.kind == CJ_EVENT_HELD ? NULL : j->listeners; l; l = l->next) n++;
        cr_callback **cbs = n ? malloc(n * sizeof *cbs) : NULL;
        size_t k = 0;
        if (cbs)
            for (jlistener *l = j->listeners; l; l = l->next) cbs[k++] = cr_callback_retain(l->cb);
        pthread_mutex_unlock(&j->lmu);
        for (size_t i = 0; i < k; i++) {
            ((courier_frozen_event_fn)cbs[i]->fn)(&ev->ev, cbs[i]->user);
            cr_callback_release(cbs[i]);
        }
        free(cbs);
        courier_frozen_free(ev->snap);
        if (ev->resp && nspent == capspent) { /* more than fit: the rest in turns of this size */
            cj_responses_spent(j, spent, nspent);
            nspent = 0;
        }
        if (ev->resp) spent[nspent++] = ev->resp;
        free(ev);
    }
    cj_responses_spent(j, spent, nspent);
}

int courier_frozen_add_listener(uint64_t *out_token, courier_engine *e, courier_frozen_event_fn fn,
                                void *user, courier_user_free_fn user_free) {
    if (out_token) *out_token = 0;
    cr_journal *j = e ? cr_core(e)->journal : NULL;
    if (!j || !fn) {
        if (user_free) user_free(user);
        return !e || !fn ? COURIER_E_INVALID_ARGUMENT : COURIER_E_CLOSED;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (!cb) return rc ? rc : COURIER_E_INVALID_ARGUMENT;
    jlistener *l = calloc(1, sizeof *l);
    if (!l) {
        cr_callback_release(cb);
        return COURIER_E_NO_MEMORY;
    }
    l->cb = cb;
    pthread_mutex_lock(&j->lmu);
    l->token = j->next_token++;
    jlistener **pp = &j->listeners;
    while (*pp) pp = &(*pp)->next;
    *pp = l;
    atomic_fetch_add(&j->nlisteners, 1);
    pthread_mutex_unlock(&j->lmu);
    if (out_token) *out_token = l->token;
    return COURIER_OK;
}

int courier_frozen_remove_listener(courier_engine *e, uint64_t token) {
    cr_journal *j = e ? cr_core(e)->journal : NULL;
    if (!j) return COURIER_E_INVALID_ARGUMENT;
    jlistener *found = NULL;
    pthread_mutex_lock(&j->lmu);
    for (jlistener **pp = &j->listeners; *pp; pp = &(*pp)->next) {
        if ((*pp)->token == token) {
            found = *pp;
            *pp = found->next;
            atomic_fetch_sub(&j->nlisteners, 1);
            break;
        }
    }
    pthread_mutex_unlock(&j->lmu);
    if (!found) return COURIER_E_NOT_FOUND;
    cr_callback_release(found->cb);
    free(found);
    return COURIER_OK;
}
