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
 *   Waker(loop)                     asyncio's hand-over (courier/aio.py): post(fut, value, exc)
 *                                   on the worker queues a settlement and wakes the loop with
 *                                   loop.call_soon_threadsafe only when no drain is pending; the
 *                                   drain settles what is queued in order (set_result or
 *                                   set_exception, skipping a future already done).
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

#include <stdint.h>
#include <string.h>

#include "courier.h"

/* The library's functions, typed by the header's own declarations. */
static struct {
    __typeof__(&courier_send) send;
    __typeof__(&courier_send_sync) send_sync;
    __typeof__(&courier_response_status) response_status;
    __typeof__(&courier_response_body) response_body;
    __typeof__(&courier_response_free) response_free;
} fns;

static PyObject *str_complete, *str_keep, *str_done, *str_set_result, *str_set_exception, *str_call_soon_threadsafe;

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


/* ---- Waker: completions handed to one asyncio loop, a burst at a time (courier/aio.py) ------------
 * Everything here runs with the GIL: post() on the engine's worker, drain() on the loop. The queue
 * is a C array of (future, value, exception) triples. post() appends and, when no drain is pending,
 * schedules one with loop.call_soon_threadsafe (a write to the loop's self-pipe). drain() takes the
 * whole queue, settles it in order, and takes again what was posted meanwhile (settling runs Python:
 * the worker may post then); "the queue is empty" and "no drain is pending" are set together, with
 * no Python code between, so a completion that arrives while the loop drains needs no wake-up. */
typedef struct {
    PyObject *fut, *value, *exc; /* exc NULL: set_result(value) */
} settlement;

typedef struct {
    PyObject_HEAD
    PyObject *loop;
    PyObject *wake;  /* loop.call_soon_threadsafe */
    PyObject *drain; /* this waker's bound drain, made once */
    settlement *queue;
    Py_ssize_t n, cap;
    int scheduled;
} waker;

static void settlement_clear(settlement *t) {
    Py_XDECREF(t->fut);
    Py_XDECREF(t->value);
    Py_XDECREF(t->exc);
}

static int waker_init(PyObject *op, PyObject *args, PyObject *kw) {
    waker *self = (waker *)op;
    PyObject *loop;
    if (kw != NULL && PyDict_Size(kw) != 0) {
        PyErr_SetString(PyExc_TypeError, "Waker(loop) takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O", &loop)) return -1;
    PyObject *wake = PyObject_GetAttr(loop, str_call_soon_threadsafe);
    if (wake == NULL) return -1;
    PyObject *drain = PyObject_GetAttrString(op, "drain");
    if (drain == NULL) {
        Py_DECREF(wake);
        return -1;
    }
    PyObject *old[3] = {self->loop, self->wake, self->drain};
    Py_INCREF(loop);
    self->loop = loop;
    self->wake = wake;
    self->drain = drain; /* a cycle (the bound method holds self): tp_traverse finds it, tp_clear breaks it */
    for (int i = 0; i < 3; i++) Py_XDECREF(old[i]);
    return 0;
}

static int waker_traverse(PyObject *op, visitproc visit, void *arg) {
    waker *self = (waker *)op;
    Py_VISIT(self->loop);
    Py_VISIT(self->wake);
    Py_VISIT(self->drain);
    for (Py_ssize_t i = 0; i < self->n; i++) {
        Py_VISIT(self->queue[i].fut);
        Py_VISIT(self->queue[i].value);
        Py_VISIT(self->queue[i].exc);
    }
#if PY_VERSION_HEX >= 0x03090000
    Py_VISIT(Py_TYPE(op)); /* a heap type */
#endif
    return 0;
}

static int waker_clear(PyObject *op) {
    waker *self = (waker *)op;
    Py_CLEAR(self->loop);
    Py_CLEAR(self->wake);
    Py_CLEAR(self->drain);
    settlement *q = self->queue;
    Py_ssize_t n = self->n;
    self->queue = NULL;
    self->n = self->cap = 0;
    for (Py_ssize_t i = 0; i < n; i++) settlement_clear(&q[i]);
    PyMem_Free(q);
    return 0;
}

static void waker_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    waker_clear(op);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(op);
    Py_DECREF(tp);
}

/* post(fut, value, exc=None): on the worker (any thread), with the GIL. */
static PyObject *waker_post(PyObject *op, PyObject *args) {
    waker *self = (waker *)op;
    PyObject *fut, *value, *exc = Py_None;
    if (!PyArg_UnpackTuple(args, "post", 2, 3, &fut, &value, &exc)) return NULL;
    if (self->n == self->cap) {
        Py_ssize_t cap = self->cap ? self->cap * 2 : 64;
        settlement *q = PyMem_Realloc(self->queue, (size_t)cap * sizeof *q);
        if (q == NULL) return PyErr_NoMemory();
        self->queue = q;
        self->cap = cap;
    }
    settlement *t = &self->queue[self->n++];
    Py_INCREF(fut);
    t->fut = fut;
    if (exc != Py_None) {
        Py_INCREF(exc);
        t->exc = exc;
        t->value = NULL;
    } else {
        Py_INCREF(value);
        t->value = value;
        t->exc = NULL;
    }
    if (!self->scheduled && self->wake != NULL) {
        /* two threads may both get here: the second drain finds nothing */
        self->scheduled = 1;
        PyObject *r = PyObject_CallFunctionObjArgs(self->wake, self->drain, NULL);
        if (r == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_RuntimeError)) return NULL;
            PyErr_Clear(); /* the loop is closed: nobody awaits this any more */
        }
        Py_XDECREF(r);
    }
    Py_RETURN_NONE;
}

/* drain(): on the loop. */
static PyObject *waker_drain(PyObject *op, PyObject *noargs) {
    (void)noargs;
    waker *self = (waker *)op;
    Py_INCREF(op); /* settling runs Python code */
    PyObject *etype = NULL, *evalue = NULL, *etb = NULL; /* the first failure, raised after the rest */
    int failed = 0;
    while (self->n > 0) {
        settlement *q = self->queue;
        Py_ssize_t n = self->n;
        self->queue = NULL; /* what is posted while these settle starts a new array */
        self->n = self->cap = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            settlement *t = &q[i];
            {
                PyObject *done = PyObject_CallMethodObjArgs(t->fut, str_done, NULL);
                int is_done = done ? PyObject_IsTrue(done) : -1;
                Py_XDECREF(done);
                PyObject *r = NULL;
                if (is_done == 0) { /* else: the task was cancelled meanwhile */
                    r = t->exc ? PyObject_CallMethodObjArgs(t->fut, str_set_exception, t->exc, NULL)
                               : PyObject_CallMethodObjArgs(t->fut, str_set_result, t->value, NULL);
                } else if (is_done > 0) {
                    r = Py_None;
                    Py_INCREF(r);
                }
                if (r == NULL) { /* cannot happen with asyncio's futures; the rest are settled still */
                    if (!failed) PyErr_Fetch(&etype, &evalue, &etb);
                    else PyErr_Clear();
                    failed = 1;
                }
                Py_XDECREF(r);
            }
            settlement_clear(t);
        }
        PyMem_Free(q);
    }
    self->scheduled = 0; /* with the queue empty, and no Python code since the check */
    Py_DECREF(op);
    if (failed) {
        PyErr_Restore(etype, evalue, etb);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *waker_pending(PyObject *op, PyObject *noargs) {
    (void)noargs;
    return PyLong_FromSsize_t(((waker *)op)->n);
}

static PyObject *waker_get_loop(PyObject *op, void *closure) {
    (void)closure;
    PyObject *loop = ((waker *)op)->loop;
    if (loop == NULL) Py_RETURN_NONE;
    Py_INCREF(loop);
    return loop;
}

static PyMethodDef waker_methods[] = {
    {"post", waker_post, METH_VARARGS, "post(fut, value, exc=None): settles fut on the loop (any thread)"},
    {"drain", waker_drain, METH_NOARGS, "drain(): settles what is queued (on the loop)"},
    {"pending", waker_pending, METH_NOARGS, "pending() -> how many settlements are queued"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef waker_getset[] = {
    {"loop", waker_get_loop, NULL, "the event loop", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot waker_slots[] = {
    {Py_tp_init, waker_init},
    {Py_tp_dealloc, waker_dealloc},
    {Py_tp_traverse, waker_traverse},
    {Py_tp_clear, waker_clear},
    {Py_tp_methods, waker_methods},
    {Py_tp_getset, waker_getset},
    {Py_tp_doc, "Waker(loop): completions handed to one asyncio loop, a burst at a time"},
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
        !(str_call_soon_threadsafe = PyUnicode_InternFromString("call_soon_threadsafe")))
        goto fail;
    PyObject *waker_type = PyType_FromSpec(&waker_spec);
    if (waker_type == NULL) goto fail;
    if (PyModule_AddObject(m, "Waker", waker_type) < 0) {
        Py_DECREF(waker_type);
        goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
