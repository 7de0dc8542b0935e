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
 *   set_completion(fn)              fn(ctx, request_id, code, response | None, error address | None)
 *                                   is what the completion calls, with the GIL, on the worker.
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

static PyObject *completion_fn; /* set_completion's function */

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

static PyObject *sp_set_completion(PyObject *self, PyObject *fn) {
    (void)self;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "courier._speedups.set_completion: not callable");
        return NULL;
    }
    PyObject *old = completion_fn;
    Py_INCREF(fn);
    completion_fn = fn;
    Py_XDECREF(old);
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
    if (rid && pcode && presp && perr && completion_fn) {
        result = PyObject_CallFunctionObjArgs(completion_fn, ctx, rid, pcode, presp, perr, NULL);
    } else if (response) {
        fns.response_free(response); /* no Python object took it (out of memory) */
    }
    if (result == NULL && PyErr_Occurred()) PyErr_WriteUnraisable(ctx); /* the function guards itself */
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

static PyMethodDef methods[] = {
    {"init", sp_init, METH_VARARGS, "init(send, send_sync, response_status, response_body, response_free): "
                                    "the addresses of the loaded library's functions"},
    {"set_completion", sp_set_completion, METH_O,
     "set_completion(fn): fn(ctx, request_id, code, response, error_address) runs each completion"},
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
    if (PyModule_AddIntConstant(m, "ERROR_SIZE", (long)sizeof(courier_error)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
