/*
 * events.c — the journal's events (frozen, resent, expired) and the listeners they go to (their
 * delivery, at the end of a turn, is journal.c's cj_events_deliver).
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
