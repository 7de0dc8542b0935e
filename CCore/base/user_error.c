/*
 * user_error.c — errors raised by user code (courier_raise, courier_call_raise): a per-send slot.
 *
 * The engine runs user callbacks for a send (customize, before-send and after-receive
 * interceptors, validators, mock and redirect callbacks, custom transports, ...) synchronously,
 * on the thread that runs that send's stage. Around each such call it points this thread's
 * catching target at the send's slot (cr_raise_catch); courier_raise fills it. The slot rides
 * with the send and is handed to the caller in the courier_error of its failure (the completion's,
 * or courier_send's and courier_send_sync's err), so a binding gets back the very object its
 * callback raised, with no table of its own. The thread-local only names where a raise made
 * inside a callback goes while that callback runs; nothing is read from it afterwards.
 */
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The user data rides in courier_error.reserved: [1] says it is there, [2..3] the pointer,
 * [4..5] its release function (copied bytewise: the struct's layout does not change). */
#define CR_UD_FLAG 1
#define CR_UD_PTR 2
#define CR_UD_FREE 4
_Static_assert(sizeof(void *) <= 2 * sizeof(int), "a pointer fits two reserved ints");
_Static_assert(sizeof(courier_user_free_fn) <= 2 * sizeof(int), "a function pointer fits two reserved ints");

static _Thread_local cr_raised *catching CR_TLS_FAST; /* base.h */

cr_raised *cr_raise_catch(cr_raised *slot) {
    cr_raised *prev = catching;
    catching = slot;
    return prev;
}

void cr_raise_release(cr_raised *slot) {
    if (!slot || !slot->code) return;
    courier_user_free_fn release = slot->user_free;
    void *user = slot->user;
    free(slot->message);
    memset(slot, 0, sizeof *slot);
    if (release) release(user);
}

void cr_raise_move(cr_raised *dst, cr_raised *src) {
    if (dst == src) return;
    cr_raise_release(dst);
    *dst = *src;
    memset(src, 0, sizeof *src);
}

static int raise_into(cr_raised *slot, int code, const char *message, void *user, courier_user_free_fn user_free) {
    if (!slot || code >= 0) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    cr_raise_release(slot); /* a later raise of the same send replaces an earlier one */
    slot->code = code;
    slot->user = user;
    slot->user_free = user_free;
    slot->message = message && message[0] ? cr_strdup(message) : NULL;
    return code;
}

int courier_raise(courier_code code, const char *message, void *user, courier_user_free_fn user_free) {
    return raise_into(catching, (int)code, message, user, user_free);
}

int cr_raise_into(cr_raised *slot, int code, const char *message, void *user, courier_user_free_fn user_free) {
    return raise_into(slot, code, message, user, user_free);
}

void *courier_error_user_data(const courier_error *err) {
    if (!err || err->reserved[CR_UD_FLAG] != 1) return NULL;
    void *user;
    memcpy(&user, &err->reserved[CR_UD_PTR], sizeof user);
    return user;
}

void cr_raise_attach(cr_raised *slot, courier_error *err) {
    if (!slot || !slot->code) return;
    if (!err) {
        cr_raise_release(slot);
        return;
    }
    cr_error_release_user(err);
    if (slot->message) snprintf(err->message, sizeof err->message, "%s", slot->message);
    err->reserved[CR_UD_FLAG] = 1;
    memcpy(&err->reserved[CR_UD_PTR], &slot->user, sizeof slot->user);
    memcpy(&err->reserved[CR_UD_FREE], &slot->user_free, sizeof slot->user_free);
    free(slot->message);
    memset(slot, 0, sizeof *slot);
}

void cr_error_release_user(courier_error *err) {
    if (!err || err->reserved[CR_UD_FLAG] != 1) return;
    void *user;
    courier_user_free_fn release;
    memcpy(&user, &err->reserved[CR_UD_PTR], sizeof user);
    memcpy(&release, &err->reserved[CR_UD_FREE], sizeof release);
    memset(&err->reserved[CR_UD_FLAG], 0, sizeof err->reserved - sizeof err->reserved[0]);
    if (release) release(user);
}

void cr_error_forget_user(courier_error *err) {
    if (err) memset(&err->reserved[CR_UD_FLAG], 0, sizeof err->reserved - sizeof err->reserved[0]);
}

void courier_error_clear(courier_error *err) {
    if (!err) return;
    cr_error_release_user(err);
    memset(err, 0, sizeof *err);
}
