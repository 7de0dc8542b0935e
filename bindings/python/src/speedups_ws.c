/* courier._speedups, the WebSocket part (docs/python.md, "The compiled path"): a round trip's calls
 * without ctypes, and a notify that needs no GIL.
 *
 *   ws_init(send, next, read)       the addresses of courier_ws_send, courier_ws_next and
 *                                   courier_ws_read_socket.
 *   ws_send(ws, type, data)         courier_ws_send of a bytes-like object: None, or on failure
 *                                   (code, the courier_error's bytes).
 *   ws_next(ws, timeout_ms)         courier_ws_next, the GIL released while it waits: the message
 *                                   (str for TEXT, bytes for BINARY), None for COURIER_E_AGAIN, or
 *                                   (code, the courier_error's bytes) for the end.

 *   ws_read(ws)                     an event loop found the socket of courier_ws_take_reads readable:
 *                                   courier_ws_read_socket, then courier_ws_next(0): the message,
 *                                   None (nothing whole yet: keep watching), False (the reads went
 *                                   back to the worker: stop watching; what is queued is ws_next's)
 *                                   or (code, the courier_error's bytes) for the end.
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
 * As in speedups.c it decides nothing: the binding's Python chooses, the core does.
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
} wsf;

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
    PyObject *a, *b, *c;
    if (!PyArg_ParseTuple(args, "OOO", &a, &b, &c)) return NULL;
    void *p[3];
    if (as_ptr(a, &p[0]) < 0 || as_ptr(b, &p[1]) < 0 || as_ptr(c, &p[2]) < 0) return NULL;
    if (!p[0] || !p[1] || !p[2]) {
        PyErr_SetString(PyExc_ValueError, "courier._speedups.ws_init: a function address is NULL");
        return NULL;
    }
    memcpy(&wsf.send, &p[0], sizeof(void *));
    memcpy(&wsf.next, &p[1], sizeof(void *));
    memcpy(&wsf.read, &p[2], sizeof(void *));
    Py_RETURN_NONE;
}

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

/* The socket read on the loop's thread (the GIL held: the read does not wait), then the next message. */
static PyObject *ws_read(PyObject *self, PyObject *pws) {
    (void)self;
    void *ws;
    if (as_ptr(pws, &ws) < 0) return NULL;
    if (wsf.read == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups: ws_init() was not called");
        return NULL;
    }
    if (wsf.read((courier_ws *)ws) != 0) Py_RETURN_FALSE;
    return next_message(ws, 0);
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
     "ws_init(courier_ws_send, courier_ws_next, courier_ws_read_socket): the functions' addresses"},
    {"ws_read", ws_read, METH_O,
     "ws_read(ws) -> str | bytes | None (keep watching) | False (stop watching) | (code, courier_error bytes)"},
    {"ws_send", ws_send, METH_VARARGS, "ws_send(ws, type, data) -> None | (code, courier_error bytes)"},
    {"ws_next", ws_next, METH_VARARGS,
     "ws_next(ws, timeout_ms) -> str | bytes | None (no message yet) | (code, courier_error bytes)"},
    {NULL, NULL, 0, NULL},
};

int cr_speedups_ws_add(PyObject *m) {
    if (PyModule_AddFunctions(m, ws_methods) < 0) return -1;
    PyObject *t = PyType_FromSpec(&wake_spec);
    if (t == NULL) return -1;
    if (PyModule_AddObject(m, "WsWake", t) < 0) {
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
