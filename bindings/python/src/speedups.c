/* courier._speedups: the compiled form of the binding's hot path (docs/python.md, "The compiled
 * path"). The package is a ctypes binding; per request, ctypes' foreign calls and above all its
 * callback trampoline (argument conversion objects, a thread state per call) cost more than the
 * engine. This module does the same few translations in C:
 *
 *   send(engine, request, ctx)      courier_send with the completion below; ctx (any object) is
 *                                   the void *user, one reference held until the completion ran.
 *                                   Returns the request id, or on failure the courier_error's bytes
 *                                   (the caller owns what it holds: courier_error_clear).
 *   send_sync(engine, request)      courier_send_sync, GIL released: (code, response | None,
 *                                   the courier_error's bytes | None when code is 0).
 *   response_status/body/free(ptr)  courier_response_status / _body (bytes) / _free.
 *   the completion                  calls ctx._complete(request_id, code, response | None,
 *                                   error address | None) with the GIL, on the worker (a raise
 *                                   goes to ctx.keep, as the ctypes trampoline does).
 *   Waker(loop, Response)           asyncio's hand-over (courier/aio.py), one per event loop: a
 *                                   locked queue and a pipe the loop reads (add_reader(fileno(),
 *                                   drain)). Waker.send is send() whose completion queues a
 *                                   success without the GIL (one pipe write per burst) and runs
 *                                   ctx._complete for a failure; post(fut, value, exc) queues a
 *                                   settlement (a failure's, a group's). drain() settles in
 *                                   completion order.
 *   Pending                         what an AsyncEngine send awaits (Waker.future()): asyncio's
 *                                   future protocol, its task woken by the drain itself.
 *   ws_send, ws_next, WsWake, WsAio a WebSocket's round trip, its GIL-free notify and an asyncio
 *                                   loop's reads (speedups_ws.c; WsAio parks its task on a Pending).
 *
 * It decides nothing: every branch of a send stays in the C core or in the package's Python. It
 * does not link libcourier: init() receives the addresses of the functions from the library
 * ctypes loaded (courier/_lib.py), so the two paths always talk to one and the same library, also
 * when COURIER_LIBRARY names another build. Pointers cross as Python ints (None for NULL), as
 * ctypes passes them. Limited API (abi3, CPython >= 3.9): one extension serves every Python 3.
 */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <fcntl.h>
#include <unistd.h>
#endif

#include "courier.h"

#include "speedups_ws.h"

/* The library's functions, typed by the header's own declarations. */
static struct {
    __typeof__(&courier_send) send;
    __typeof__(&courier_send_sync) send_sync;
    __typeof__(&courier_response_status) response_status;
    __typeof__(&courier_response_body) response_body;
    __typeof__(&courier_response_free) response_free;
} fns;

static PyObject *str_complete, *str_keep, *str_done, *str_set_result, *str_set_exception, *str_future, *str_exc;

static int as_ptr(PyObject *o, void **out) {
    if (o == Py_None) {
        *out = NULL;
        return 0;
    }
    *out = PyLong_AsVoidPtr(o);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *ptr_or_none(const void *p) {
    if (p == NULL) Py_RETURN_NONE;
    return PyLong_FromVoidPtr((void *)p);
}

static PyObject *sp_init(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *addr[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &addr[0], &addr[1], &addr[2], &addr[3], &addr[4])) return NULL;
    void *p[5];
    for (int i = 0; i < 5; i++) {
        if (as_ptr(addr[i], &p[i]) < 0) return NULL;
        if (p[i] == NULL) {
            PyErr_SetString(PyExc_ValueError, "courier._speedups.init: a function address is NULL");
            return NULL;
        }
    }
    /* object pointers to function pointers: what dlsym's users do */
    memcpy(&fns.send, &p[0], sizeof(void *));
    memcpy(&fns.send_sync, &p[1], sizeof(void *));
    memcpy(&fns.response_status, &p[2], sizeof(void *));
    memcpy(&fns.response_body, &p[3], sizeof(void *));
    memcpy(&fns.response_free, &p[4], sizeof(void *));
    Py_RETURN_NONE;
}

/* courier_completion_fn: on the engine's worker thread, exactly once per successful send. */
static void completion(uint64_t request_id, int code, courier_response *response, const courier_error *error,
                       void *user) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *ctx = (PyObject *)user; /* the reference send() took */
    PyObject *rid = PyLong_FromUnsignedLongLong(request_id);
    PyObject *pcode = PyLong_FromLong(code);
    PyObject *presp = ptr_or_none(response);
    PyObject *perr = ptr_or_none(code != 0 ? error : NULL);
    PyObject *result = NULL;
    if (rid && pcode && presp && perr) {
        result = PyObject_CallMethodObjArgs(ctx, str_complete, rid, pcode, presp, perr, NULL);
    } else if (response) {
        fns.response_free(response); /* no Python object took it (out of memory) */
    }
    if (result == NULL && PyErr_Occurred()) { /* _complete guards itself: the ctypes trampoline's ctx.keep(e) */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
        PyObject *kept = value ? PyObject_CallMethodObjArgs(ctx, str_keep, value, NULL) : NULL;
        if (kept == NULL) PyErr_WriteUnraisable(ctx);
        Py_XDECREF(kept);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    Py_XDECREF(result);
    Py_XDECREF(rid);
    Py_XDECREF(pcode);
    Py_XDECREF(presp);
    Py_XDECREF(perr);
    Py_DECREF(ctx);
    PyGILState_Release(gil);
}

static PyObject *sp_send(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pengine, *preq, *ctx;
    if (!PyArg_ParseTuple(args, "OOO", &pengine, &preq, &ctx)) return NULL;
    void *engine, *req;
    if (as_ptr(pengine, &engine) < 0 || as_ptr(preq, &req) < 0) return NULL;
    if (fns.send == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups: init() was not called");
        return NULL;
    }
    courier_error err;
    uint64_t id = 0;
    int code;
    Py_INCREF(ctx); /* the completion's, released there */
    Py_BEGIN_ALLOW_THREADS
    code = fns.send(&id, (courier_engine *)engine, (const courier_request *)req, completion, ctx, &err);
    Py_END_ALLOW_THREADS
    if (code != 0) {
        Py_DECREF(ctx); /* no completion will run */
        /* the bytes carry what err owns (its user data) to the caller */
        return PyBytes_FromStringAndSize((const char *)&err, sizeof err);
    }
    return PyLong_FromUnsignedLongLong(id);
}

static PyObject *sp_send_sync(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pengine, *preq;
    if (!PyArg_ParseTuple(args, "OO", &pengine, &preq)) return NULL;
    void *engine, *req;
    if (as_ptr(pengine, &engine) < 0 || as_ptr(preq, &req) < 0) return NULL;
    if (fns.send_sync == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups: init() was not called");
        return NULL;
    }
    courier_error err;
    courier_response *response = NULL;
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = fns.send_sync(&response, (courier_engine *)engine, (const courier_request *)req, &err);
    Py_END_ALLOW_THREADS
    PyObject *presp = ptr_or_none(response);
    PyObject *perr = code != 0 ? PyBytes_FromStringAndSize((const char *)&err, sizeof err) : (Py_INCREF(Py_None), Py_None);
    PyObject *pcode = PyLong_FromLong(code);
    if (presp == NULL || perr == NULL || pcode == NULL) {
        /* out of memory: the response and what err holds go with the exception (cannot happen in
         * practice; the response is released, not leaked) */
        if (presp == NULL && response) fns.response_free(response);
        Py_XDECREF(presp);
        Py_XDECREF(perr);
        Py_XDECREF(pcode);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(3, pcode, presp, perr);
    Py_DECREF(pcode);
    Py_DECREF(presp);
    Py_DECREF(perr);
    return out;
}

static PyObject *sp_response_status(PyObject *self, PyObject *pptr) {
    (void)self;
    void *p;
    if (as_ptr(pptr, &p) < 0) return NULL;
    return PyLong_FromLong(fns.response_status((const courier_response *)p));
}

static PyObject *sp_response_body(PyObject *self, PyObject *pptr) {
    (void)self;
    void *p;
    if (as_ptr(pptr, &p) < 0) return NULL;
    size_t n = 0;
    const uint8_t *body = fns.response_body((const courier_response *)p, &n);
    return PyBytes_FromStringAndSize(n ? (const char *)body : "", (Py_ssize_t)n);
}

static PyObject *sp_response_free(PyObject *self, PyObject *pptr) {
    (void)self;
    void *p;
    if (as_ptr(pptr, &p) < 0) return NULL;
    fns.response_free((courier_response *)p);
    Py_RETURN_NONE;
}


/* ---- Pending: the awaitable of one AsyncEngine send (courier/aio.py) ------------------------------
 * What a task awaits instead of an asyncio.Future: a future-compatible object in asyncio's own
 * protocol (the one Task speaks to futures of other loops' making: _asyncio_future_blocking,
 * get_loop, add_done_callback(fn, context=), result, cancel(msg)), so the task parks on it and
 * task.cancel() cancels it (the request is then cancelled by AsyncEngine.send). The difference:
 * the waker's drain, already a callback on the loop, runs the task's wake-up itself, in the
 * context the task gave, instead of scheduling it with loop.call_soon (a Handle and a loop
 * iteration per request). Cancelling schedules the callbacks with loop.call_soon, as a future does. */
typedef struct {
    PyObject_HEAD
    PyObject *loop;
    PyObject *value, *exc; /* when done: exc NULL for a result */
    PyObject *fn, *ctx;    /* the first done-callback and its context (NULL: none / none given) */
    PyObject *more;        /* a list of (fn, ctx) for the rest, or NULL */
    int state;             /* 0 pending, 1 done, 2 cancelled */
    int blocking;          /* _asyncio_future_blocking */
    int yielded;
} pending;

static PyTypeObject *pending_type;
static PyObject *str_run, *str_call_soon, *str_call_exception_handler, *str_context, *str_message, *str_exception;
static PyObject *cancelled_error, *invalid_state_error; /* asyncio's, looked up on first use */

static int asyncio_errors(void) {
    if (cancelled_error != NULL) return 0;
    PyObject *m = PyImport_ImportModule("asyncio");
    if (m == NULL) return -1;
    invalid_state_error = PyObject_GetAttrString(m, "InvalidStateError");
    cancelled_error = invalid_state_error ? PyObject_GetAttrString(m, "CancelledError") : NULL;
    Py_DECREF(m);
    if (cancelled_error == NULL) {
        Py_CLEAR(invalid_state_error);
        return -1;
    }
    return 0;
}

static int pending_traverse(PyObject *op, visitproc visit, void *arg) {
    pending *self = (pending *)op;
    Py_VISIT(self->loop);
    Py_VISIT(self->value);
    Py_VISIT(self->exc);
    Py_VISIT(self->fn);
    Py_VISIT(self->ctx);
    Py_VISIT(self->more);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int pending_clear(PyObject *op) {
    pending *self = (pending *)op;
    Py_CLEAR(self->loop);
    Py_CLEAR(self->value);
    Py_CLEAR(self->exc);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->more);
    return 0;
}

static void pending_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    pending_clear(op);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(op);
    Py_DECREF(tp);
}

static PyObject *pending_new_for(PyObject *loop) {
    allocfunc alloc = (allocfunc)PyType_GetSlot(pending_type, Py_tp_alloc);
    pending *self = (pending *)alloc(pending_type, 0); /* zeroed, tracked */
    if (self == NULL) return NULL;
    Py_INCREF(loop);
    self->loop = loop;
    return (PyObject *)self;
}

/* Takes the callbacks out of self (new references in *fn, *ctx, *more). */
static void pending_take_callbacks(pending *self, PyObject **fn, PyObject **ctx, PyObject **more) {
    *fn = self->fn;
    *ctx = self->ctx;
    *more = self->more;
    self->fn = self->ctx = self->more = NULL;
}

/* A callback that raised: to the loop's exception handler, as asyncio's Handle reports it. */
static void report_callback_error(PyObject *loop, PyObject *fn) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
    PyObject *msg = PyUnicode_FromFormat("Exception in callback %R", fn);
    PyObject *context = PyDict_New();
    int ok = msg && context && PyDict_SetItem(context, str_message, msg) == 0 &&
             PyDict_SetItem(context, str_exception, value ? value : Py_None) == 0;
    PyObject *r = ok ? PyObject_CallMethodObjArgs(loop, str_call_exception_handler, context, NULL) : NULL;
    if (r == NULL) PyErr_WriteUnraisable(fn);
    Py_XDECREF(r);
    Py_XDECREF(msg);
    Py_XDECREF(context);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* Runs one done-callback now (ctx.run(fn, self), or fn(self) without a context). */
static void run_callback(pending *self, PyObject *fn, PyObject *ctx) {
    PyObject *r = ctx && ctx != Py_None ? PyObject_CallMethodObjArgs(ctx, str_run, fn, (PyObject *)self, NULL)
                                        : PyObject_CallFunctionObjArgs(fn, (PyObject *)self, NULL);
    if (r == NULL) report_callback_error(self->loop, fn);
    Py_XDECREF(r);
}

/* Schedules one done-callback: loop.call_soon(fn, self, context=ctx), as asyncio's futures do. */
static void schedule_callback(pending *self, PyObject *fn, PyObject *ctx) {
    PyObject *call_soon = PyObject_GetAttr(self->loop, str_call_soon);
    PyObject *args = call_soon ? PyTuple_Pack(2, fn, (PyObject *)self) : NULL;
    PyObject *kw = NULL;
    if (args && ctx && ctx != Py_None) {
        kw = PyDict_New();
        if (kw && PyDict_SetItem(kw, str_context, ctx) < 0) Py_CLEAR(kw);
        if (kw == NULL) Py_CLEAR(args);
    }
    PyObject *r = args ? PyObject_Call(call_soon, args, kw) : NULL;
    if (r == NULL) report_callback_error(self->loop, fn);
    Py_XDECREF(r);
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(call_soon);
}

static void pending_callbacks(pending *self, void (*each)(pending *, PyObject *, PyObject *)) {
    PyObject *fn, *ctx, *more;
    pending_take_callbacks(self, &fn, &ctx, &more);
    if (fn != NULL) each(self, fn, ctx);
    if (more != NULL) {
        for (Py_ssize_t i = 0, n = PyList_Size(more); i < n; i++) {
            PyObject *pair = PyList_GetItem(more, i); /* borrowed */
            each(self, PyTuple_GetItem(pair, 0), PyTuple_GetItem(pair, 1));
        }
    }
    Py_XDECREF(fn);
    Py_XDECREF(ctx);
    Py_XDECREF(more);
}

static PyObject *pending_add_done_callback(PyObject *op, PyObject *args, PyObject *kw) {
    pending *self = (pending *)op;
    static char *names[] = {"fn", "context", NULL};
    PyObject *fn, *ctx = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$O:add_done_callback", names, &fn, &ctx)) return NULL;
    if (self->state != 0) {
        schedule_callback(self, fn, ctx);
        Py_RETURN_NONE;
    }
    if (self->fn == NULL && self->more == NULL) {
        Py_INCREF(fn);
        Py_INCREF(ctx);
        self->fn = fn;
        self->ctx = ctx;
        Py_RETURN_NONE;
    }
    if (self->more == NULL && (self->more = PyList_New(0)) == NULL) return NULL;
    PyObject *pair = PyTuple_Pack(2, fn, ctx);
    if (pair == NULL) return NULL;
    int rc = PyList_Append(self->more, pair);
    Py_DECREF(pair);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *pending_remove_done_callback(PyObject *op, PyObject *fn) {
    pending *self = (pending *)op;
    long removed = 0;
    if (self->fn != NULL) {
        int eq = PyObject_RichCompareBool(self->fn, fn, Py_EQ);
        if (eq < 0) return NULL;
        if (eq) {
            Py_CLEAR(self->fn);
            Py_CLEAR(self->ctx);
            removed++;
        }
    }
    if (self->more != NULL) {
        PyObject *keep = PyList_New(0);
        if (keep == NULL) return NULL;
        for (Py_ssize_t i = 0, n = PyList_Size(self->more); i < n; i++) {
            PyObject *pair = PyList_GetItem(self->more, i);
            int eq = PyObject_RichCompareBool(PyTuple_GetItem(pair, 0), fn, Py_EQ);
            if (eq < 0 || (!eq && PyList_Append(keep, pair) < 0)) {
                Py_DECREF(keep);
                return NULL;
            }
            removed += eq;
        }
        PyObject *old = self->more;
        self->more = keep;
        Py_DECREF(old);
    }
    return PyLong_FromLong(removed);
}

static PyObject *pending_cancel(PyObject *op, PyObject *args, PyObject *kw) {
    pending *self = (pending *)op;
    static char *names[] = {"msg", NULL};
    PyObject *msg = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:cancel", names, &msg)) return NULL;
    if (self->state != 0) Py_RETURN_FALSE;
    if (asyncio_errors() < 0) return NULL;
    PyObject *exc = msg == Py_None ? PyObject_CallFunctionObjArgs(cancelled_error, NULL)
                                   : PyObject_CallFunctionObjArgs(cancelled_error, msg, NULL);
    if (exc == NULL) return NULL;
    self->state = 2;
    self->exc = exc;
    pending_callbacks(self, schedule_callback);
    Py_RETURN_TRUE;
}

static PyObject *pending_result(PyObject *op, PyObject *noargs) {
    (void)noargs;
    pending *self = (pending *)op;
    if (self->state == 0) {
        if (asyncio_errors() == 0) PyErr_SetString(invalid_state_error, "Result is not set.");
        return NULL;
    }
    if (self->exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(self->exc), self->exc);
        return NULL;
    }
    Py_INCREF(self->value);
    return self->value;
}

static PyObject *pending_exception(PyObject *op, PyObject *noargs) {
    (void)noargs;
    pending *self = (pending *)op;
    if (self->state == 0) {
        if (asyncio_errors() == 0) PyErr_SetString(invalid_state_error, "Exception is not set.");
        return NULL;
    }
    if (self->state == 2) {
        PyErr_SetObject((PyObject *)Py_TYPE(self->exc), self->exc);
        return NULL;
    }
    PyObject *e = self->exc ? self->exc : Py_None;
    Py_INCREF(e);
    return e;
}

static PyObject *pending_done(PyObject *op, PyObject *noargs) {
    (void)noargs;
    return PyBool_FromLong(((pending *)op)->state != 0);
}

static PyObject *pending_cancelled(PyObject *op, PyObject *noargs) {
    (void)noargs;
    return PyBool_FromLong(((pending *)op)->state == 2);
}

static PyObject *pending_get_loop(PyObject *op, PyObject *noargs) {
    (void)noargs;
    PyObject *loop = ((pending *)op)->loop;
    Py_INCREF(loop);
    return loop;
}

static PyObject *pending_loop_attr(PyObject *op, void *closure) {
    return pending_get_loop(op, closure);
}

static PyObject *pending_get_blocking(PyObject *op, void *closure) {
    (void)closure;
    return PyBool_FromLong(((pending *)op)->blocking);
}

static int pending_set_blocking(PyObject *op, PyObject *v, void *closure) {
    (void)closure;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete _asyncio_future_blocking");
        return -1;
    }
    int b = PyObject_IsTrue(v);
    if (b < 0) return -1;
    ((pending *)op)->blocking = b;
    return 0;
}

/* __await__ returns self; each step: the first yields self (the task parks on it), the one after
 * the wake-up returns the result (StopIteration) or raises the exception. */
static PyObject *pending_await(PyObject *op) {
    Py_INCREF(op);
    return op;
}

static PyObject *pending_iternext(PyObject *op) {
    pending *self = (pending *)op;
    if (self->state == 0) {
        if (self->yielded) {
            PyErr_SetString(PyExc_RuntimeError, "await wasn't used with future");
            return NULL;
        }
        self->yielded = 1;
        self->blocking = 1;
        Py_INCREF(op);
        return op;
    }
    if (self->exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(self->exc), self->exc);
        return NULL;
    }
    if (self->value != Py_None) {
        if (PyTuple_Check(self->value) || PyExceptionInstance_Check(self->value)) {
            PyObject *stop = PyObject_CallFunctionObjArgs(PyExc_StopIteration, self->value, NULL);
            if (stop == NULL) return NULL;
            PyErr_SetObject(PyExc_StopIteration, stop);
            Py_DECREF(stop);
        } else {
            PyErr_SetObject(PyExc_StopIteration, self->value);
        }
    }
    return NULL;
}

static PyMethodDef pending_methods[] = {
    {"add_done_callback", (PyCFunction)(void (*)(void))pending_add_done_callback, METH_VARARGS | METH_KEYWORDS,
     "add_done_callback(fn, *, context=None)"},
    {"remove_done_callback", pending_remove_done_callback, METH_O, "remove_done_callback(fn) -> how many"},
    {"cancel", (PyCFunction)(void (*)(void))pending_cancel, METH_VARARGS | METH_KEYWORDS, "cancel(msg=None) -> bool"},
    {"result", pending_result, METH_NOARGS, "the result, or raises the exception"},
    {"exception", pending_exception, METH_NOARGS, "the exception or None"},
    {"done", pending_done, METH_NOARGS, "done()"},
    {"cancelled", pending_cancelled, METH_NOARGS, "cancelled()"},
    {"get_loop", pending_get_loop, METH_NOARGS, "the event loop"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef pending_getset[] = {
    {"_asyncio_future_blocking", pending_get_blocking, pending_set_blocking, "asyncio's future protocol", NULL},
    {"_loop", pending_loop_attr, NULL, "the event loop", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot pending_slots[] = {
    {Py_tp_dealloc, pending_dealloc},
    {Py_tp_traverse, pending_traverse},
    {Py_tp_clear, pending_clear},
    {Py_tp_methods, pending_methods},
    {Py_tp_getset, pending_getset},
    {Py_tp_iter, pending_await},
    {Py_tp_iternext, pending_iternext},
    {Py_am_await, pending_await},
    {Py_tp_doc, "The awaitable of one AsyncEngine send (asyncio's future protocol); made by Waker.future()"},
    {0, NULL},
};

static PyType_Spec pending_spec = {
    "courier._speedups.Pending", sizeof(pending), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, pending_slots,
};

/* ---- Waker: completions handed to one asyncio loop, a burst at a time (courier/aio.py) ------------
 * A queue of entries in completion order and a pipe the loop watches (loop.add_reader(fileno(),
 * drain)). Waker.send's completion, on the engine's worker, queues a success without taking the
 * GIL: the context, the response pointer and the id move into the queue under the waker's lock,
 * and the pipe is written once per burst (when no wake-up is pending). A failure takes the GIL
 * and runs the context's _complete, whose post() queues the settlement (future, value, exc) the
 * same way; so does a group's callback. drain() on the loop empties the pipe, takes the queue and
 * settles it in order: a success becomes a Response (the class given to Waker()) and, when a
 * callback of the send kept an exception on the context, that exception instead; a Pending runs
 * its task's wake-up now, an asyncio future is set (and its callbacks scheduled by asyncio). The
 * worker never waits for the GIL for a success, so the loop and the worker do not hand the GIL to
 * each other per request. */
typedef struct {
    PyObject *ctx;                /* a success: the send's context (the reference send took) */
    courier_response *response;   /*   ... its response (owned), id */
    uint64_t id;
    PyObject *fut, *value, *exc;  /* else a settlement: exc NULL for set_result(value) */
} entry;

typedef struct {
    PyObject_HEAD
    PyObject *loop;
    PyObject *response_type; /* Response(ptr) */
    PyThread_type_lock lock; /* the queue and the flag; taken with or without the GIL */
    entry *queue;
    Py_ssize_t n, cap;
    int scheduled; /* the pipe was written and the drain has not taken the queue yet */
    int rfd, wfd;
} waker;

static PyTypeObject *waker_type;

typedef struct { /* a send's void *user */
    waker *waker; /* a reference, released by the drain (or by the failure path) */
    PyObject *ctx;
} aio_user;

static void entry_clear(entry *t) { /* with the GIL */
    Py_XDECREF(t->ctx);
    if (t->response) fns.response_free(t->response);
    Py_XDECREF(t->fut);
    Py_XDECREF(t->value);
    Py_XDECREF(t->exc);
}

/* Appends under the lock (with or without the GIL); returns whether the caller must write the pipe,
 * -1 when out of memory. */
static int waker_push(waker *self, const entry *e) {
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    if (self->n == self->cap) {
        Py_ssize_t cap = self->cap ? self->cap * 2 : 64;
        entry *q = realloc(self->queue, (size_t)cap * sizeof *q);
        if (q == NULL) {
            PyThread_release_lock(self->lock);
            return -1;
        }
        self->queue = q;
        self->cap = cap;
    }
    self->queue[self->n++] = *e;
    int wake = !self->scheduled;
    self->scheduled = 1;
    PyThread_release_lock(self->lock);
    return wake;
}

static void waker_wake(waker *self) {
#ifndef _WIN32
    char b = 1;
    ssize_t r;
    do r = write(self->wfd, &b, 1);
    while (r < 0 && errno == EINTR); /* EAGAIN: the pipe is full, the loop will read it */
#else
    (void)self;
#endif
}

static int waker_init(PyObject *op, PyObject *args, PyObject *kw) {
    waker *self = (waker *)op;
    PyObject *loop, *response_type;
    if (kw != NULL && PyDict_Size(kw) != 0) {
        PyErr_SetString(PyExc_TypeError, "Waker(loop, response_type) takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OO", &loop, &response_type)) return -1;
    if (self->loop != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Waker() is initialised once");
        return -1;
    }
#ifdef _WIN32
    PyErr_SetString(PyExc_NotImplementedError, "courier._speedups.Waker: no pipe to wake a loop with");
    return -1;
#else
    int fds[2];
    if (pipe(fds) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(fds[i], F_GETFL);
        if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fds[i], F_SETFD, FD_CLOEXEC) < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            close(fds[0]);
            close(fds[1]);
            return -1;
        }
    }
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        close(fds[0]);
        close(fds[1]);
        PyErr_NoMemory();
        return -1;
    }
    self->rfd = fds[0];
    self->wfd = fds[1];
    Py_INCREF(loop);
    Py_INCREF(response_type);
    self->loop = loop;
    self->response_type = response_type;
    return 0;
#endif
}

static PyObject *waker_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    waker *self = (waker *)alloc(tp, 0);
    if (self != NULL) self->rfd = self->wfd = -1;
    return (PyObject *)self;
}

static int waker_traverse(PyObject *op, visitproc visit, void *arg) {
    waker *self = (waker *)op;
    Py_VISIT(self->loop);
    Py_VISIT(self->response_type);
    if (self->lock != NULL) {
        PyThread_acquire_lock(self->lock, WAIT_LOCK);
        int r = 0;
        for (Py_ssize_t i = 0; i < self->n && r == 0; i++) {
            entry *t = &self->queue[i];
            if (t->ctx && (r = visit(t->ctx, arg)) != 0) break;
            if (t->fut && (r = visit(t->fut, arg)) != 0) break;
            if (t->value && (r = visit(t->value, arg)) != 0) break;
            if (t->exc && (r = visit(t->exc, arg)) != 0) break;
        }
        PyThread_release_lock(self->lock);
        if (r != 0) return r;
    }
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int waker_clear(PyObject *op) {
    waker *self = (waker *)op;
    Py_CLEAR(self->loop);
    Py_CLEAR(self->response_type);
    if (self->lock != NULL) {
        PyThread_acquire_lock(self->lock, WAIT_LOCK);
        entry *q = self->queue;
        Py_ssize_t n = self->n;
        self->queue = NULL;
        self->n = self->cap = 0;
        PyThread_release_lock(self->lock);
        for (Py_ssize_t i = 0; i < n; i++) entry_clear(&q[i]);
        free(q);
    }
    return 0;
}

static void waker_dealloc(PyObject *op) {
    waker *self = (waker *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    waker_clear(op); /* no send holds it (each holds a reference): nothing can push any more */
#ifndef _WIN32
    if (self->rfd >= 0) close(self->rfd);
    if (self->wfd >= 0) close(self->wfd);
#endif
    if (self->lock != NULL) PyThread_free_lock(self->lock);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(op);
    Py_DECREF(tp);
}

/* post(fut, value, exc=None): with the GIL, from any thread (a failure's _complete, a group). */
static PyObject *waker_post(PyObject *op, PyObject *args) {
    waker *self = (waker *)op;
    PyObject *fut, *value, *exc = Py_None;
    if (!PyArg_UnpackTuple(args, "post", 2, 3, &fut, &value, &exc)) return NULL;
    if (self->lock == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups.Waker: not initialised");
        return NULL;
    }
    entry e = {NULL, NULL, 0, fut, NULL, NULL};
    if (exc != Py_None) e.exc = exc;
    else e.value = value;
    Py_INCREF(fut);
    Py_XINCREF(e.value);
    Py_XINCREF(e.exc);
    int wake = waker_push(self, &e);
    if (wake < 0) {
        entry_clear(&e);
        return PyErr_NoMemory();
    }
    if (wake) waker_wake(self);
    Py_RETURN_NONE;
}

/* The completion of Waker.send, on the engine's worker thread. */
static void aio_completion(uint64_t request_id, int code, courier_response *response, const courier_error *error,
                           void *user) {
    aio_user *u = (aio_user *)user;
    waker *w = u->waker;
    if (code == 0) { /* no GIL: the references move into the queue, the drain releases them */
        entry e = {u->ctx, response, request_id, NULL, NULL, NULL};
        int wake = waker_push(w, &e);
        if (wake >= 0) {
            free(u);
            if (wake) waker_wake(w);
            return; /* the drain releases w's reference */
        }
        /* out of memory: as a failure below, with the GIL */
    }
    PyObject *ctx = u->ctx;
    free(u);
    completion(request_id, code, response, code != 0 ? error : NULL, ctx); /* releases ctx */
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF((PyObject *)w);
    PyGILState_Release(gil);
}

/* send(engine, request, ctx): _speedups.send whose completion hands the outcome to this waker. */
static PyObject *waker_send(PyObject *op, PyObject *args) {
    waker *self = (waker *)op;
    PyObject *pengine, *preq, *ctx;
    if (!PyArg_ParseTuple(args, "OOO", &pengine, &preq, &ctx)) return NULL;
    void *engine, *req;
    if (as_ptr(pengine, &engine) < 0 || as_ptr(preq, &req) < 0) return NULL;
    if (fns.send == NULL || self->lock == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups: init() was not called");
        return NULL;
    }
    aio_user *u = malloc(sizeof *u);
    if (u == NULL) return PyErr_NoMemory();
    Py_INCREF(op);
    Py_INCREF(ctx);
    u->waker = self;
    u->ctx = ctx;
    courier_error err;
    uint64_t id = 0;
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = fns.send(&id, (courier_engine *)engine, (const courier_request *)req, aio_completion, u, &err);
    Py_END_ALLOW_THREADS
    if (code != 0) { /* no completion will run */
        Py_DECREF(ctx);
        Py_DECREF(op);
        free(u);
        return PyBytes_FromStringAndSize((const char *)&err, sizeof err);
    }
    return PyLong_FromUnsignedLongLong(id);
}

/* Settles one future (a Pending's callbacks run here when direct, the drain being a loop callback
 * and no task's step; else they are scheduled, as a future's are). Returns -1 with an exception
 * when setting it failed. */
static int settle(PyObject *fut, PyObject *value, PyObject *exc, int direct) {
    if (Py_TYPE(fut) == pending_type) {
        pending *p = (pending *)fut;
        if (p->state != 0) return 0; /* the task cancelled it meanwhile */
        p->state = 1;
        if (exc != NULL) {
            Py_INCREF(exc);
            p->exc = exc;
        } else {
            Py_INCREF(value);
            p->value = value;
        }
        pending_callbacks(p, direct ? run_callback : schedule_callback);
        return 0;
    }
    /* an asyncio future (a group's) */
    PyObject *done = PyObject_CallMethodObjArgs(fut, str_done, NULL);
    int is_done = done ? PyObject_IsTrue(done) : -1;
    Py_XDECREF(done);
    if (is_done != 0) return is_done < 0 ? -1 : 0;
    PyObject *r = exc ? PyObject_CallMethodObjArgs(fut, str_set_exception, exc, NULL)
                      : PyObject_CallMethodObjArgs(fut, str_set_result, value, NULL);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* For speedups_ws.c (speedups_ws.h): a WebSocket's loop reads wake their task as the drain does. */
PyObject *cr_speedups_pending_parked(PyObject *loop) {
    pending *p = (pending *)pending_new_for(loop);
    if (p == NULL) return NULL;
    p->blocking = 1; /* yielded by the awaitable that made it: the task parks on it */
    p->yielded = 1;
    return (PyObject *)p;
}

int cr_speedups_pending_state(PyObject *fut) {
    return Py_TYPE(fut) == pending_type ? ((pending *)fut)->state : -1;
}

int cr_speedups_settle(PyObject *fut, PyObject *value, PyObject *exc, int direct) {
    return settle(fut, value, exc, direct);
}

/* A success: Response(ptr), or the exception a callback of the send kept on its context. */
static int settle_success(waker *self, entry *t, int direct) {
    courier_response *response = t->response;
    t->response = NULL;
    PyObject *fut = PyObject_GetAttr(t->ctx, str_future);
    if (fut == NULL) {
        if (response) fns.response_free(response);
        return -1;
    }
    PyObject *resp = Py_None, *kept = NULL;
    Py_INCREF(resp);
    if (response) {
        PyObject *ptr = PyLong_FromVoidPtr(response);
        Py_DECREF(resp);
        resp = ptr ? PyObject_CallFunctionObjArgs(self->response_type, ptr, NULL) : NULL;
        Py_XDECREF(ptr);
        if (resp == NULL) { /* the response stays unreleased only if Response() failed before owning it */
            if (ptr == NULL) fns.response_free(response);
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            int rc = value ? settle(fut, NULL, value, direct) : -1;
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            Py_DECREF(fut);
            return rc;
        }
    }
    kept = PyObject_GetAttr(t->ctx, str_exc);
    int rc = -1;
    if (kept != NULL) rc = kept != Py_None ? settle(fut, NULL, kept, direct) : settle(fut, resp, NULL, direct);
    Py_XDECREF(kept);
    Py_DECREF(resp);
    Py_DECREF(fut);
    return rc;
}

static PyObject *waker_drain_impl(waker *self, int direct) {
    if (self->lock == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups.Waker: not initialised");
        return NULL;
    }
    Py_INCREF((PyObject *)self); /* settling runs Python code */
#ifndef _WIN32
    char buf[64];
    while (read(self->rfd, buf, sizeof buf) == (ssize_t)sizeof buf) {
    }
#endif
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    entry *q = self->queue;
    Py_ssize_t n = self->n;
    self->queue = NULL; /* what is queued from now on waits for the next drain, */
    self->n = self->cap = 0;
    self->scheduled = 0; /* ... whose wake-up it writes */
    PyThread_release_lock(self->lock);
    PyObject *etype = NULL, *evalue = NULL, *etb = NULL; /* the first failure, raised after the rest */
    int failed = 0, refs = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        entry *t = &q[i];
        int rc;
        if (t->ctx != NULL) {
            rc = settle_success(self, t, direct);
            refs++; /* the reference Waker.send took */
        } else {
            rc = settle(t->fut, t->value, t->exc, direct);
        }
        if (rc < 0) { /* cannot happen with asyncio's futures; the rest are settled still */
            if (!failed) PyErr_Fetch(&etype, &evalue, &etb);
            else PyErr_Clear();
            failed = 1;
        }
        entry_clear(t);
    }
    free(q);
    for (int i = 0; i < refs; i++) Py_DECREF((PyObject *)self);
    Py_DECREF((PyObject *)self);
    if (failed) {
        PyErr_Restore(etype, evalue, etb);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* drain(): the loop's reader of the pipe; a Pending's task is woken here, now. */
static PyObject *waker_drain(PyObject *op, PyObject *noargs) {
    (void)noargs;
    return waker_drain_impl((waker *)op, 1);
}

/* flush(): drain() from inside a task (AsyncEngine.aclose, after the engine's close completed
 * what was in flight): the tasks' wake-ups are scheduled, not run. */
static PyObject *waker_flush(PyObject *op, PyObject *noargs) {
    (void)noargs;
    return waker_drain_impl((waker *)op, 0);
}

static PyObject *waker_fileno(PyObject *op, PyObject *noargs) {
    (void)noargs;
    return PyLong_FromLong(((waker *)op)->rfd);
}

static PyObject *waker_pending(PyObject *op, PyObject *noargs) {
    (void)noargs;
    waker *self = (waker *)op;
    if (self->lock == NULL) return PyLong_FromLong(0);
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    Py_ssize_t n = self->n;
    PyThread_release_lock(self->lock);
    return PyLong_FromSsize_t(n);
}

static PyObject *waker_get_loop(PyObject *op, void *closure) {
    (void)closure;
    PyObject *loop = ((waker *)op)->loop;
    if (loop == NULL) Py_RETURN_NONE;
    Py_INCREF(loop);
    return loop;
}

static PyObject *waker_future(PyObject *op, PyObject *noargs) {
    (void)noargs;
    waker *self = (waker *)op;
    if (self->loop == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "courier._speedups.Waker: not initialised");
        return NULL;
    }
    return pending_new_for(self->loop);
}

static PyMethodDef waker_methods[] = {
    {"future", waker_future, METH_NOARGS, "future() -> a new Pending of this waker's loop"},
    {"send", waker_send, METH_VARARGS, "send(engine, request, ctx) -> request id | courier_error bytes"},
    {"post", waker_post, METH_VARARGS, "post(fut, value, exc=None): settles fut on the loop (any thread)"},
    {"drain", waker_drain, METH_NOARGS, "drain(): settles what is queued (the loop's reader of fileno())"},
    {"flush", waker_flush, METH_NOARGS, "flush(): drain() from inside a task (the wake-ups scheduled)"},
    {"fileno", waker_fileno, METH_NOARGS, "fileno() -> the pipe's end the loop reads"},
    {"pending", waker_pending, METH_NOARGS, "pending() -> how many entries are queued"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef waker_getset[] = {
    {"loop", waker_get_loop, NULL, "the event loop", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot waker_slots[] = {
    {Py_tp_new, waker_new},
    {Py_tp_init, waker_init},
    {Py_tp_dealloc, waker_dealloc},
    {Py_tp_traverse, waker_traverse},
    {Py_tp_clear, waker_clear},
    {Py_tp_methods, waker_methods},
    {Py_tp_getset, waker_getset},
    {Py_tp_doc, "Waker(loop, response_type): completions handed to one asyncio loop, a burst at a time"},
    {0, NULL},
};

static PyType_Spec waker_spec = {
    "courier._speedups.Waker", sizeof(waker), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, waker_slots,
};

static PyMethodDef methods[] = {
    {"init", sp_init, METH_VARARGS, "init(send, send_sync, response_status, response_body, response_free): "
                                    "the addresses of the loaded library's functions"},
    {"send", sp_send, METH_VARARGS, "send(engine, request, ctx) -> request id | courier_error bytes"},
    {"send_sync", sp_send_sync, METH_VARARGS, "send_sync(engine, request) -> (code, response, error bytes)"},
    {"response_status", sp_response_status, METH_O, "courier_response_status"},
    {"response_body", sp_response_body, METH_O, "courier_response_body, as bytes"},
    {"response_free", sp_response_free, METH_O, "courier_response_free"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "courier._speedups", "The binding's hot path in C (see courier/_fast.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "ERROR_SIZE", (long)sizeof(courier_error)) < 0) goto fail;
    if (!(str_complete = PyUnicode_InternFromString("_complete")) || !(str_keep = PyUnicode_InternFromString("keep")) ||
        !(str_done = PyUnicode_InternFromString("done")) ||
        !(str_set_result = PyUnicode_InternFromString("set_result")) ||
        !(str_set_exception = PyUnicode_InternFromString("set_exception")) ||
        !(str_future = PyUnicode_InternFromString("future")) || !(str_exc = PyUnicode_InternFromString("exc")) ||
        !(str_run = PyUnicode_InternFromString("run")) || !(str_call_soon = PyUnicode_InternFromString("call_soon")) ||
        !(str_call_exception_handler = PyUnicode_InternFromString("call_exception_handler")) ||
        !(str_context = PyUnicode_InternFromString("context")) ||
        !(str_message = PyUnicode_InternFromString("message")) ||
        !(str_exception = PyUnicode_InternFromString("exception")))
        goto fail;
    pending_type = (PyTypeObject *)PyType_FromSpec(&pending_spec);
    if (pending_type == NULL) goto fail;
    Py_INCREF(pending_type);
    if (PyModule_AddObject(m, "Pending", (PyObject *)pending_type) < 0) {
        Py_DECREF(pending_type);
        goto fail;
    }
    waker_type = (PyTypeObject *)PyType_FromSpec(&waker_spec);
    if (waker_type == NULL) goto fail;
    Py_INCREF(waker_type);
    if (PyModule_AddObject(m, "Waker", (PyObject *)waker_type) < 0) {
        Py_DECREF(waker_type);
        goto fail;
    }
    if (cr_speedups_ws_add(m) < 0) goto fail; /* speedups_ws.c */
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
