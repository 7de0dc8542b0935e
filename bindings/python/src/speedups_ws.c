/* courier._speedups, the WebSocket part (docs/python.md, "The compiled path"): a round trip's calls
 * without ctypes, and a notify that needs no GIL.
 *
 *   ws_init(send, next, read, take, give)
 *                                   the addresses of courier_ws_send, courier_ws_next,
 *                                   courier_ws_read_socket, courier_ws_take_reads and
 *                                   courier_ws_return_reads.
 *   ws_send(ws, type, data)         courier_ws_send of a bytes-like object: None, or on failure
 *                                   (code, the courier_error's bytes).
 *   ws_next(ws, timeout_ms)         courier_ws_next, the GIL released while it waits: the message
 *                                   (str for TEXT, bytes for BINARY), None for COURIER_E_AGAIN, or
 *                                   (code, the courier_error's bytes) for the end.
 *   WsAio(ws, loop)                 an asyncio WebSocket's reads (courier/websocket.py, arecv/asend),
 *                                   below.
 *   WsWake()                        the notify target of one WebSocket: a non-blocking pipe and a
 *                                   flag. The notify (WS_NOTIFY, a C function for courier_ws_open)
 *                                   runs on the engine's worker without the GIL: it writes one
 *                                   byte when the flag was clear and sets it; clear() reads the
 *                                   pipe empty and then clears the flag, so at most one byte waits
 *                                   and a notify nobody clears costs an atomic exchange only (a
 *                                   blocking reader after the handshake waits in courier_ws_next,
 *                                   not on the pipe). wait(seconds) polls the pipe (GIL released);
 *                                   fileno() is what an event loop's add_reader watches. user()
 *                                   gives the `void *user` for courier_ws_open with a reference
 *                                   for the WebSocket, which WS_USER_FREE (its user_free) drops;
 *                                   the pipe is closed with the last reference.
 *
 * As in speedups.c it decides nothing: the binding's Python chooses, the core does (WsAio's wait is
 * the Python waker's, in C: the same steps, without their frames).
 */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#endif

#include "courier.h"

#include "speedups_ws.h"

static struct {
    __typeof__(&courier_ws_send) send;
    __typeof__(&courier_ws_next) next;
    __typeof__(&courier_ws_read_socket) read;
    __typeof__(&courier_ws_take_reads) take;
    __typeof__(&courier_ws_return_reads) give;
} wsf;

static PyObject *str_add_reader, *str_remove_reader, *str_is_closed;

static int as_ptr(PyObject *o, void **out) {
    if (o == Py_None) {
        *out = NULL;
        return 0;
    }
    *out = PyLong_AsVoidPtr(o);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *failure(int code, const courier_error *err) {
    return Py_BuildValue("(iy#)", code, (const char *)err, (Py_ssize_t)sizeof *err);
}

static PyObject *ws_init(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    void *p[5];
    for (int i = 0; i < 5; i++) {
        if (as_ptr(o[i], &p[i]) < 0) return NULL;
        if (!p[i]) {
            PyErr_SetString(PyExc_ValueError, "courier._speedups.ws_init: a function address is NULL");
            return NULL;
        }
    }
    memcpy(&wsf.send, &p[0], sizeof(void *));
    memcpy(&wsf.next, &p[1], sizeof(void *));
    memcpy(&wsf.read, &p[2], sizeof(void *));
    memcpy(&wsf.take, &p[3], sizeof(void *));
    memcpy(&wsf.give, &p[4], sizeof(void *));
    Py_RETURN_NONE;
}

static PyObject *send_message(void *ws, int type, PyObject *data);

static PyObject *ws_send(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pws, *data;
    int type;
    if (!PyArg_ParseTuple(args, "OiO", &pws, &type, &data)) return NULL;
    void *ws;
    if (as_ptr(pws, &ws) < 0) return NULL;
    if (wsf.send == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups: ws_init() was not called");
        return NULL;
    }
    return send_message(ws, type, data);
}

/* courier_ws_send of a bytes-like object: None, or (code, the courier_error's bytes). */
static PyObject *send_message(void *ws, int type, PyObject *data) {
    courier_error err;
    int code;
    if (PyBytes_Check(data)) { /* the common case: no copy before the core's */
        char *p;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(data, &p, &n) < 0) return NULL;
        code = wsf.send((courier_ws *)ws, (courier_ws_type)type, p, (size_t)n, &err);
    } else if (PyByteArray_Check(data)) {
        code = wsf.send((courier_ws *)ws, (courier_ws_type)type, PyByteArray_AsString(data),
                        (size_t)PyByteArray_Size(data), &err);
    } else { /* another bytes-like object (a memoryview): Py_buffer is not in the limited API before 3.11 */
        PyObject *copy = PyBytes_FromObject(data);
        if (copy == NULL) return NULL;
        code = wsf.send((courier_ws *)ws, (courier_ws_type)type, PyBytes_AsString(copy), (size_t)PyBytes_Size(copy),
                        &err);
        Py_DECREF(copy);
    }
    if (code == 0) Py_RETURN_NONE;
    return failure(code, &err);
}

static PyObject *next_message(void *ws, long long timeout_ms);

static PyObject *ws_next(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pws;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "OL", &pws, &timeout_ms)) return NULL;
    void *ws;
    if (as_ptr(pws, &ws) < 0) return NULL;
    if (wsf.next == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups: ws_init() was not called");
        return NULL;
    }
    return next_message(ws, timeout_ms);
}

static PyObject *next_message(void *ws, long long timeout_ms) {
    courier_ws_message m;
    memset(&m, 0, sizeof m);
    m.size = sizeof m;
    courier_error err;
    int code;
    if (timeout_ms != 0) {
        Py_BEGIN_ALLOW_THREADS
        code = wsf.next(&m, (courier_ws *)ws, (int64_t)timeout_ms, &err);
        Py_END_ALLOW_THREADS
    } else {
        code = wsf.next(&m, (courier_ws *)ws, 0, &err); /* takes the WebSocket's lock only */
    }
    if (code == 0) { /* borrowed until the next courier_ws_next: copied now */
        const char *p = m.len ? (const char *)m.data : "";
        if (m.type == COURIER_WS_TEXT) return PyUnicode_DecodeUTF8(p, (Py_ssize_t)m.len, "strict"); /* checked by the core */
        return PyBytes_FromStringAndSize(p, (Py_ssize_t)m.len);
    }
    if (code == COURIER_E_AGAIN) Py_RETURN_NONE;
    return failure(code, &err);
}

/* ---- WsAio: an asyncio WebSocket's reads (courier/websocket.py) -----------------------------------
 * One per WebSocket of an AsyncEngine on the compiled path: arecv's wait and the loop's read in C,
 * so a message costs no Python frame of the binding's but arecv's own, and one loop turn.
 *
 *   await reads      the next message (str, bytes), the end's (code, courier_error bytes), or None
 *                    once released. A message read for a task before (`got`: a task woken and then
 *                    cancelled before it ran) comes first, then courier_ws_next(0); when there is
 *                    none the reads are taken (courier_ws_take_reads, the socket watched with
 *                    loop.add_reader(fd, reads); refused 16 times, on wss:// or through a proxy,
 *                    it stops asking) and the task parks on a Pending (`waiter`; a second task
 *                    awaiting meanwhile parks on the same one, and the one woken second looks again).
 *   reads()          the loop's reader of the socket: with a task waiting, courier_ws_read_socket
 *                    then courier_ws_next(0); a message (or the end) goes to `got` and the task is
 *                    woken now (cr_speedups_settle direct: its step runs in this callback, no
 *                    loop.call_soon); nothing whole yet: keep watching; the reads gone back to the
 *                    worker: stop watching and wake the task (it reads what the worker queued).
 *                    With no task waiting: stop watching and give the reads back (the worker reads,
 *                    and answers pings, while nobody waits).
 *   wake()           the notify's pipe was readable (the handshake's end, what the worker read):
 *                    the waiting task, if any, looks again (woken now; the pipe's reader is a loop
 *                    callback).
 *   send(message)    courier_ws_send: str as TEXT (UTF-8), bytes-like as BINARY; None, or (code,
 *                    courier_error bytes).
 *   release()        before courier_ws_free: stop watching the socket (the reads are not given
 *                    back: the free ends them), forget the message kept, wake a waiting task (with
 *                    loop.call_soon: release may run inside a task), which then gets None.
 *   sock             the descriptor watched, -1 none (for tests).
 *
 * No method is called `close`: a task cancelled while awaiting would call it (generators' close()
 * of the iterator they delegate to). The loop's thread only; the object holds the WebSocket's
 * pointer until release(). */
typedef struct {
    PyObject_HEAD
    courier_ws *ws;  /* NULL once released */
    PyObject *loop;
    PyObject *waiter; /* the Pending a task waits on, or NULL */
    PyObject *got;    /* a message (or the end's tuple) read for a task and not taken yet, or NULL */
    int sock;         /* the descriptor the loop watches (courier_ws_take_reads), -1 none */
    int tries;        /* courier_ws_take_reads may still be asked this often */
} ws_aio;

static int aio_traverse(PyObject *op, visitproc visit, void *arg) {
    ws_aio *self = (ws_aio *)op;
    Py_VISIT(self->loop);
    Py_VISIT(self->waiter);
    Py_VISIT(self->got);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int aio_clear(PyObject *op) {
    ws_aio *self = (ws_aio *)op;
    Py_CLEAR(self->loop);
    Py_CLEAR(self->waiter);
    Py_CLEAR(self->got);
    return 0;
}

static void aio_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    aio_clear(op);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(op);
    Py_DECREF(tp);
}

static PyObject *aio_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    PyObject *pws, *loop;
    if ((kw && PyDict_Size(kw)) || !PyArg_ParseTuple(args, "OO:WsAio", &pws, &loop)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "WsAio(ws, loop) takes no keywords");
        return NULL;
    }
    void *ws;
    if (as_ptr(pws, &ws) < 0) return NULL;
    if (ws == NULL || wsf.take == NULL) {
        PyErr_SetString(PyExc_ValueError, ws ? "courier._speedups: ws_init() was not called" : "WsAio: no WebSocket");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    ws_aio *self = (ws_aio *)alloc(tp, 0); /* zeroed, tracked */
    if (self == NULL) return NULL;
    self->ws = ws;
    Py_INCREF(loop);
    self->loop = loop;
    self->sock = -1;
    self->tries = 16;
    return (PyObject *)self;
}

/* The loop stops watching the socket; the reads go back to the worker when give_back. A loop being
 * torn down may refuse: nothing to stop then (as the Python waker did). */
static void aio_unwatch(ws_aio *self, int give_back) {
    int fd = self->sock;
    if (fd < 0 || self->loop == NULL) return;
    self->sock = -1;
    PyObject *closed = PyObject_CallMethodObjArgs(self->loop, str_is_closed, NULL);
    int is_closed = closed ? PyObject_IsTrue(closed) : 1;
    Py_XDECREF(closed);
    if (is_closed == 0) {
        PyObject *f = PyLong_FromLong(fd);
        PyObject *r = f ? PyObject_CallMethodObjArgs(self->loop, str_remove_reader, f, NULL) : NULL;
        Py_XDECREF(r);
        Py_XDECREF(f);
    }
    PyErr_Clear();
    if (give_back && self->ws) wsf.give(self->ws);
}

/* Wakes the waiting task (if any): now when direct (from a loop callback), else scheduled. */
static int aio_wake_waiter(ws_aio *self, PyObject *value, PyObject *exc, int direct) {
    PyObject *fut = self->waiter;
    if (fut == NULL) return 0;
    self->waiter = NULL; /* first: the task's step, run here, may park on a new one */
    Py_INCREF((PyObject *)self);
    int rc = cr_speedups_settle(fut, value, exc, direct);
    Py_DECREF(fut);
    Py_DECREF((PyObject *)self);
    return rc;
}

/* StopIteration(value): an awaitable's return (value stolen). */
static PyObject *aio_return(PyObject *value) {
    if (PyTuple_Check(value)) { /* a tuple would be taken for the exception's arguments */
        PyObject *stop = PyObject_CallFunctionObjArgs(PyExc_StopIteration, value, NULL);
        Py_DECREF(value);
        if (stop == NULL) return NULL;
        PyErr_SetObject(PyExc_StopIteration, stop);
        Py_DECREF(stop);
        return NULL;
    }
    PyErr_SetObject(PyExc_StopIteration, value);
    Py_DECREF(value);
    return NULL;
}

static PyObject *aio_await(PyObject *op) {
    Py_INCREF(op);
    return op;
}

/* A step of `await reads`: returns (StopIteration) the message, or yields the Pending to park on. */
static PyObject *aio_iternext(PyObject *op) {
    ws_aio *self = (ws_aio *)op;
    if (self->got != NULL) {
        PyObject *got = self->got;
        self->got = NULL;
        return aio_return(got);
    }
    if (self->ws == NULL || self->loop == NULL) return NULL; /* released: StopIteration, None */
    PyObject *got = next_message(self->ws, 0);
    if (got == NULL) return NULL;
    if (got != Py_None) return aio_return(got);
    Py_DECREF(got);
    if (self->waiter != NULL && cr_speedups_pending_state(self->waiter) == 0) { /* another task waits */
        Py_INCREF(self->waiter);
        if (PyObject_SetAttrString(self->waiter, "_asyncio_future_blocking", Py_True) < 0) {
            Py_DECREF(self->waiter);
            return NULL;
        }
        return self->waiter;
    }
    if (self->sock < 0 && self->tries > 0) {
        int fd = -1;
        if (wsf.take(&fd, self->ws) == 0) {
            PyObject *f = PyLong_FromLong(fd);
            PyObject *r = f ? PyObject_CallMethodObjArgs(self->loop, str_add_reader, f, op, NULL) : NULL;
            Py_XDECREF(f);
            if (r == NULL) {
                wsf.give(self->ws);
                return NULL;
            }
            Py_DECREF(r);
            self->sock = fd;
        } else {
            self->tries--;
        }
    }
    PyObject *fut = cr_speedups_pending_parked(self->loop);
    if (fut == NULL) return NULL;
    PyObject *old = self->waiter; /* a cancelled task's */
    self->waiter = fut;
    Py_XDECREF(old);
    Py_INCREF(fut);
    return fut;
}

/* reads(): the loop's reader of the socket. */
static PyObject *aio_call(PyObject *op, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    ws_aio *self = (ws_aio *)op;
    if (self->waiter == NULL || cr_speedups_pending_state(self->waiter) != 0 || self->ws == NULL) {
        Py_CLEAR(self->waiter); /* nobody waits (a cancelled task's): the worker reads meanwhile */
        aio_unwatch(self, 1);
        Py_RETURN_NONE;
    }
    if (self->got == NULL) {
        if (wsf.read(self->ws) != 0) {
            aio_unwatch(self, 0); /* the reads went back to the worker: what it queued is next's */
        } else {
            PyObject *got = next_message(self->ws, 0);
            if (got == NULL) { /* the message could not be made: the task raises it */
                PyObject *type, *value, *tb;
                PyErr_Fetch(&type, &value, &tb);
                PyErr_NormalizeException(&type, &value, &tb);
                int rc = value ? aio_wake_waiter(self, NULL, value, 1) : -1;
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
                if (rc < 0) return NULL;
                Py_RETURN_NONE;
            }
            if (got == Py_None) { /* nothing whole yet: keep watching */
                Py_DECREF(got);
                Py_RETURN_NONE;
            }
            self->got = got;
        }
    }
    if (aio_wake_waiter(self, Py_None, NULL, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *aio_wake(PyObject *op, PyObject *noargs) {
    (void)noargs;
    ws_aio *self = (ws_aio *)op;
    if (self->waiter != NULL && cr_speedups_pending_state(self->waiter) != 0) Py_CLEAR(self->waiter);
    if (aio_wake_waiter(self, Py_None, NULL, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *aio_send(PyObject *op, PyObject *message) {
    ws_aio *self = (ws_aio *)op;
    if (self->ws == NULL) {
        PyErr_SetString(PyExc_ValueError, "the WebSocket is closed");
        return NULL;
    }
    if (PyUnicode_Check(message)) {
        PyObject *utf8 = PyUnicode_AsUTF8String(message);
        if (utf8 == NULL) return NULL;
        PyObject *r = send_message(self->ws, COURIER_WS_TEXT, utf8);
        Py_DECREF(utf8);
        return r;
    }
    return send_message(self->ws, COURIER_WS_BINARY, message);
}

static PyObject *aio_release(PyObject *op, PyObject *noargs) {
    (void)noargs;
    ws_aio *self = (ws_aio *)op;
    aio_unwatch(self, 0);
    self->ws = NULL;
    Py_CLEAR(self->got);
    if (self->waiter != NULL && cr_speedups_pending_state(self->waiter) != 0) Py_CLEAR(self->waiter);
    if (aio_wake_waiter(self, Py_None, NULL, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *aio_sock(PyObject *op, void *closure) {
    (void)closure;
    return PyLong_FromLong(((ws_aio *)op)->sock);
}

static PyMethodDef aio_methods[] = {
    {"wake", aio_wake, METH_NOARGS, "wake(): the waiting task looks again (the notify's pipe was readable)"},
    {"send", aio_send, METH_O, "send(message) -> None | (code, courier_error bytes): str as TEXT, bytes-like as BINARY"},
    {"release", aio_release, METH_NOARGS, "release(): before courier_ws_free: stop watching, wake a waiting task"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef aio_getset[] = {
    {"sock", aio_sock, NULL, "the descriptor the loop watches, -1 none", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot aio_slots[] = {
    {Py_tp_new, aio_new},
    {Py_tp_dealloc, aio_dealloc},
    {Py_tp_traverse, aio_traverse},
    {Py_tp_clear, aio_clear},
    {Py_tp_call, aio_call},
    {Py_tp_iter, aio_await},
    {Py_tp_iternext, aio_iternext},
    {Py_am_await, aio_await},
    {Py_tp_methods, aio_methods},
    {Py_tp_getset, aio_getset},
    {Py_tp_doc, "WsAio(ws, loop): an asyncio WebSocket's reads; await it for the next message"},
    {0, NULL},
};

static PyType_Spec aio_spec = {
    "courier._speedups.WsAio", sizeof(ws_aio), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, aio_slots,
};

/* ---- WsWake --------------------------------------------------------------------------------------- */

typedef struct {
    atomic_int refs;    /* the Python object's, and one per WebSocket given user() */
    atomic_int pending; /* a byte was written and clear() has not run since */
    int rfd, wfd;
} ws_wake;

static void wake_release(ws_wake *w) {
    if (atomic_fetch_sub(&w->refs, 1) != 1) return;
#ifndef _WIN32
    close(w->rfd);
    close(w->wfd);
#endif
    free(w);
}

/* courier_ws_notify_fn: on the engine's worker, without the GIL. */
static void wake_notify(courier_ws *ws, void *user) {
    (void)ws;
    ws_wake *w = user;
    if (atomic_exchange(&w->pending, 1)) return;
#ifndef _WIN32
    char b = 1;
    ssize_t r;
    do r = write(w->wfd, &b, 1);
    while (r < 0 && errno == EINTR); /* EAGAIN: the pipe is full, so readable already */
#endif
}

/* courier_user_free_fn: once, when the WebSocket is done with it (any thread, no GIL). */
static void wake_user_free(void *user) { wake_release(user); }

typedef struct {
    PyObject_HEAD
    ws_wake *w;
} wake_object;

static PyObject *wake_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    if ((args && PyTuple_Size(args)) || (kw && PyDict_Size(kw))) {
        PyErr_SetString(PyExc_TypeError, "WsWake() takes no arguments");
        return NULL;
    }
#ifdef _WIN32
    (void)tp;
    PyErr_SetString(PyExc_NotImplementedError, "courier._speedups.WsWake: no pipe");
    return NULL;
#else
    ws_wake *w = calloc(1, sizeof *w);
    if (!w) return PyErr_NoMemory();
    int fds[2];
    if (pipe(fds) < 0) {
        free(w);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(fds[i], F_GETFL);
        if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fds[i], F_SETFD, FD_CLOEXEC) < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            close(fds[0]);
            close(fds[1]);
            free(w);
            return NULL;
        }
    }
    w->rfd = fds[0];
    w->wfd = fds[1];
    atomic_init(&w->refs, 1);
    atomic_init(&w->pending, 0);
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    wake_object *self = (wake_object *)alloc(tp, 0);
    if (!self) {
        wake_release(w);
        return NULL;
    }
    self->w = w;
    return (PyObject *)self;
#endif
}

static void wake_dealloc(PyObject *op) {
    wake_object *self = (wake_object *)op;
    PyTypeObject *tp = Py_TYPE(op);
    if (self->w) wake_release(self->w);
    self->w = NULL;
    freefunc tfree = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tfree(op);
    Py_DECREF(tp);
}

static PyObject *wake_fileno(PyObject *op, PyObject *noargs) {
    (void)noargs;
    return PyLong_FromLong(((wake_object *)op)->w->rfd);
}

/* The pipe read empty, then the flag cleared: a notify after this writes again. */
static PyObject *wake_clear(PyObject *op, PyObject *noargs) {
    (void)noargs;
    ws_wake *w = ((wake_object *)op)->w;
#ifndef _WIN32
    char buf[64];
    ssize_t r;
    do r = read(w->rfd, buf, sizeof buf);
    while (r > 0 || (r < 0 && errno == EINTR));
#endif
    atomic_store(&w->pending, 0);
    Py_RETURN_NONE;
}

static PyObject *wake_wait(PyObject *op, PyObject *arg) {
    ws_wake *w = ((wake_object *)op)->w;
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred()) return NULL;
    int ms = seconds <= 0 ? 0 : seconds > 86400 ? 86400000 : (int)(seconds * 1000);
    int r = 0;
#ifndef _WIN32
    struct pollfd p = {w->rfd, POLLIN, 0};
    Py_BEGIN_ALLOW_THREADS
    r = poll(&p, 1, ms);
    Py_END_ALLOW_THREADS
#endif
    return PyBool_FromLong(r > 0);
}

static PyObject *wake_user(PyObject *op, PyObject *noargs) {
    (void)noargs;
    ws_wake *w = ((wake_object *)op)->w;
    atomic_fetch_add(&w->refs, 1); /* the WebSocket's: WS_USER_FREE drops it */
    return PyLong_FromVoidPtr(w);
}

static PyMethodDef wake_methods[] = {
    {"fileno", wake_fileno, METH_NOARGS, "fileno() -> the pipe's end to watch"},
    {"clear", wake_clear, METH_NOARGS, "clear(): the pipe read empty, then the flag cleared"},
    {"wait", wake_wait, METH_O, "wait(seconds) -> whether the pipe became readable (GIL released)"},
    {"user", wake_user, METH_NOARGS, "user() -> the void *user of courier_ws_open (a reference it owns)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot wake_slots[] = {
    {Py_tp_new, wake_new},
    {Py_tp_dealloc, wake_dealloc},
    {Py_tp_methods, wake_methods},
    {Py_tp_doc, "WsWake(): a WebSocket's notify target, a pipe written without the GIL"},
    {0, NULL},
};

static PyType_Spec wake_spec = {
    "courier._speedups.WsWake", sizeof(wake_object), 0, Py_TPFLAGS_DEFAULT, wake_slots,
};

static PyMethodDef ws_methods[] = {
    {"ws_init", ws_init, METH_VARARGS,
     "ws_init(courier_ws_send, courier_ws_next, courier_ws_read_socket, courier_ws_take_reads, "
     "courier_ws_return_reads): the functions' addresses"},
    {"ws_send", ws_send, METH_VARARGS, "ws_send(ws, type, data) -> None | (code, courier_error bytes)"},
    {"ws_next", ws_next, METH_VARARGS,
     "ws_next(ws, timeout_ms) -> str | bytes | None (no message yet) | (code, courier_error bytes)"},
    {NULL, NULL, 0, NULL},
};

int cr_speedups_ws_add(PyObject *m) {
    if (PyModule_AddFunctions(m, ws_methods) < 0) return -1;
    if (!(str_add_reader = PyUnicode_InternFromString("add_reader")) ||
        !(str_remove_reader = PyUnicode_InternFromString("remove_reader")) ||
        !(str_is_closed = PyUnicode_InternFromString("is_closed")))
        return -1;
    PyObject *t = PyType_FromSpec(&wake_spec);
    if (t == NULL) return -1;
    if (PyModule_AddObject(m, "WsWake", t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    t = PyType_FromSpec(&aio_spec);
    if (t == NULL) return -1;
    if (PyModule_AddObject(m, "WsAio", t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    void (*notify)(courier_ws *, void *) = wake_notify;
    void (*user_free)(void *) = wake_user_free;
    void *pn, *pf;
    memcpy(&pn, &notify, sizeof pn);
    memcpy(&pf, &user_free, sizeof pf);
    PyObject *a = PyLong_FromVoidPtr(pn), *b = PyLong_FromVoidPtr(pf);
    if (!a || !b || PyModule_AddObject(m, "WS_NOTIFY", a) < 0) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return -1;
    }
    if (PyModule_AddObject(m, "WS_USER_FREE", b) < 0) {
        Py_DECREF(b);
        return -1;
    }
    return 0;
}
