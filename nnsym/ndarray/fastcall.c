/* The imperative fast path of nnsym.nd.<op>: a callable (FastOp) that recognises a call it has
 * seen before (same number of NDArray arguments with the same shapes and dtypes, no keyword
 * arguments), allocates the output, runs the prebound kernel and returns a new NDArray, all
 * without entering Python. Anything else goes to the Python function it wraps (``slow``),
 * which compiles the call and registers it here with ``add``.
 *
 * This file is fixed text: nothing from a user ever enters it. It is compiled once per
 * (Python, numpy, compiler) and kept in the kernel cache like generated kernels.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

typedef void (*kernel_fn)(void *const *p, const int64_t *ia, const double *fa);

#define MAX_IN 4
#define MAX_NDIM 8
#define MAX_ENTRIES 8

typedef struct {
    int n_in;
    int in_ndim[MAX_IN];
    int in_type[MAX_IN];
    npy_intp in_dims[MAX_IN][MAX_NDIM];
    int out_ndim;
    int out_type;
    npy_intp out_dims[MAX_NDIM];
    int release_gil;
    kernel_fn fn;
    const int64_t *ia;
    const double *fa;
    PyObject *keep; /* keeps the kernel's library and ia/fa arrays alive */
} Entry;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *slow;
    int n_entries;
    int next;
    Entry entries[MAX_ENTRIES];
} FastOp;

/* The NDArray class and the offsets of its __slots__ (set once by ``setup``). */
static PyTypeObject *nd_type = NULL;
static Py_ssize_t off_data = -1, off_ctx = -1, off_buf = -1;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static PyObject *fastop_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    FastOp *self = (FastOp *)self_;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL && nargs >= 1 && nargs <= MAX_IN && self->n_entries > 0 &&
        nd_type != NULL) {
        PyArrayObject *arrs[MAX_IN];
        int ok = 1;
        for (Py_ssize_t i = 0; i < nargs; i++) {
            PyObject *a = args[i];
            if (Py_TYPE(a) != nd_type) { ok = 0; break; }
            PyObject *d = SLOT(a, off_data);
            if (d == NULL || !PyArray_CheckExact(d)) { ok = 0; break; }
            PyArrayObject *arr = (PyArrayObject *)d;
            if (!PyArray_ISCARRAY_RO(arr) || !PyArray_ISNOTSWAPPED(arr)) { ok = 0; break; }
            arrs[i] = arr;
        }
        if (ok) {
            for (int k = 0; k < self->n_entries; k++) {
                Entry *e = &self->entries[k];
                if (e->n_in != nargs) continue;
                int match = 1;
                for (Py_ssize_t i = 0; i < nargs && match; i++) {
                    int nd = PyArray_NDIM(arrs[i]);
                    match = nd == e->in_ndim[i] && PyArray_TYPE(arrs[i]) == e->in_type[i] &&
                            memcmp(PyArray_DIMS(arrs[i]), e->in_dims[i],
                                   (size_t)nd * sizeof(npy_intp)) == 0;
                }
                if (!match) continue;
                PyObject *out = PyArray_SimpleNew(e->out_ndim, e->out_dims, e->out_type);
                if (out == NULL) return NULL;
                void *p[MAX_IN + 1];
                for (Py_ssize_t i = 0; i < nargs; i++) p[i] = PyArray_DATA(arrs[i]);
                p[nargs] = PyArray_DATA((PyArrayObject *)out);
                if (e->release_gil) {
                    Py_BEGIN_ALLOW_THREADS
                    e->fn(p, e->ia, e->fa);
                    Py_END_ALLOW_THREADS
                } else {
                    e->fn(p, e->ia, e->fa);
                }
                PyObject *res = nd_type->tp_alloc(nd_type, 0);
                if (res == NULL) { Py_DECREF(out); return NULL; }
                PyObject *ctx = SLOT(args[0], off_ctx);
                Py_XINCREF(ctx);
                Py_INCREF(Py_None);
                SLOT(res, off_data) = out;
                SLOT(res, off_ctx) = ctx;
                SLOT(res, off_buf) = Py_None;
                return res;
            }
        }
    }
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *fastop_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *slow;
    if (!PyArg_ParseTuple(args, "O:FastOp", &slow)) return NULL;
    if (!PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "FastOp needs a callable");
        return NULL;
    }
    FastOp *self = (FastOp *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    Py_INCREF(slow);
    self->slow = slow;
    self->vectorcall = fastop_vectorcall;
    return (PyObject *)self;
}

static void clear_entries(FastOp *self)
{
    for (int k = 0; k < self->n_entries; k++) Py_CLEAR(self->entries[k].keep);
    self->n_entries = 0;
    self->next = 0;
}

static int fastop_traverse(FastOp *self, visitproc visit, void *arg)
{
    Py_VISIT(self->slow);
    Py_VISIT(self->dict);
    for (int k = 0; k < self->n_entries; k++) Py_VISIT(self->entries[k].keep);
    return 0;
}

static int fastop_clear(FastOp *self)
{
    Py_CLEAR(self->slow);
    Py_CLEAR(self->dict);
    clear_entries(self);
    return 0;
}

static void fastop_dealloc(FastOp *self)
{
    PyObject_GC_UnTrack(self);
    fastop_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int read_shape(PyObject *seq, int *ndim, npy_intp *dims)
{
    PyObject *t = PySequence_Tuple(seq);
    if (t == NULL) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    if (n > MAX_NDIM) { Py_DECREF(t); return 1; }
    for (Py_ssize_t i = 0; i < n; i++) {
        dims[i] = (npy_intp)PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
        if (dims[i] == -1 && PyErr_Occurred()) { Py_DECREF(t); return -1; }
    }
    *ndim = (int)n;
    Py_DECREF(t);
    return 0;
}

/* add(in_sigs, out_shape, out_typenum, fn_addr, ia_addr, fa_addr, release_gil, keep) -> bool
 * in_sigs: a tuple of (shape, typenum), one per input. Returns False (nothing registered)
 * where the call is outside what the fast path handles (too many inputs or dimensions). */
static PyObject *fastop_add(FastOp *self, PyObject *args)
{
    PyObject *in_sigs, *out_shape, *keep;
    int out_type, release;
    unsigned long long fn, ia, fa;
    if (!PyArg_ParseTuple(args, "O!OiKKKpO:add", &PyTuple_Type, &in_sigs, &out_shape, &out_type,
                          &fn, &ia, &fa, &release, &keep))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(in_sigs);
    if (n < 1 || n > MAX_IN) Py_RETURN_FALSE;
    Entry e;
    memset(&e, 0, sizeof e);
    e.n_in = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sig = PyTuple_GET_ITEM(in_sigs, i);
        PyObject *shape;
        int typenum;
        if (!PyArg_ParseTuple(sig, "Oi", &shape, &typenum)) return NULL;
        int r = read_shape(shape, &e.in_ndim[i], e.in_dims[i]);
        if (r < 0) return NULL;
        if (r > 0) Py_RETURN_FALSE;
        e.in_type[i] = typenum;
    }
    int r = read_shape(out_shape, &e.out_ndim, e.out_dims);
    if (r < 0) return NULL;
    if (r > 0) Py_RETURN_FALSE;
    e.out_type = out_type;
    e.release_gil = release;
    e.fn = (kernel_fn)(uintptr_t)fn;
    e.ia = (const int64_t *)(uintptr_t)ia;
    e.fa = (const double *)(uintptr_t)fa;
    Py_INCREF(keep);
    e.keep = keep;
    int slot = -1;
    for (int k = 0; k < self->n_entries && slot < 0; k++) { /* same signature: replace it */
        Entry *o = &self->entries[k];
        int same = o->n_in == e.n_in;
        for (int i = 0; i < e.n_in && same; i++)
            same = o->in_ndim[i] == e.in_ndim[i] && o->in_type[i] == e.in_type[i] &&
                   memcmp(o->in_dims[i], e.in_dims[i], (size_t)e.in_ndim[i] * sizeof(npy_intp)) == 0;
        if (same) {
            slot = k;
            Py_CLEAR(o->keep);
        }
    }
    if (slot >= 0) {
        /* replaced in place */
    } else if (self->n_entries < MAX_ENTRIES) {
        slot = self->n_entries++;
    } else { /* replace round-robin: the Python path keeps every signature anyway */
        slot = self->next;
        self->next = (self->next + 1) % MAX_ENTRIES;
        Py_CLEAR(self->entries[slot].keep);
    }
    self->entries[slot] = e;
    Py_RETURN_TRUE;
}

static PyObject *fastop_clear_method(FastOp *self, PyObject *Py_UNUSED(ignored))
{
    clear_entries(self);
    Py_RETURN_NONE;
}

static PyObject *fastop_count(FastOp *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLong(self->n_entries);
}

static PyMethodDef fastop_methods[] = {
    {"add", (PyCFunction)fastop_add, METH_VARARGS, "Register a compiled call signature."},
    {"clear", (PyCFunction)fastop_clear_method, METH_NOARGS, "Forget every signature."},
    {"count", (PyCFunction)fastop_count, METH_NOARGS, "Number of registered signatures."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef fastop_members[] = {
    {"slow", T_OBJECT_EX, offsetof(FastOp, slow), READONLY, "The Python function wrapped."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject FastOpType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nnsym.FastOp",
    .tp_basicsize = sizeof(FastOp),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "An nnsym.nd operator function with a C fast path for repeated calls.",
    .tp_new = fastop_new,
    .tp_dealloc = (destructor)fastop_dealloc,
    .tp_traverse = (traverseproc)fastop_traverse,
    .tp_clear = (inquiry)fastop_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FastOp, vectorcall),
    .tp_dictoffset = offsetof(FastOp, dict),
    .tp_methods = fastop_methods,
    .tp_members = fastop_members,
};

static Py_ssize_t slot_offset(PyTypeObject *t, const char *name)
{
    PyObject *d = PyDict_GetItemString(t->tp_dict, name);
    if (d == NULL || !PyObject_TypeCheck(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s has no __slots__ member %s", t->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", t->tp_name, name);
        return -1;
    }
    return m->offset;
}

/* setup(NDArray): remember the class and where its _data, _ctx and _buf slots are. */
static PyObject *setup(PyObject *Py_UNUSED(mod), PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "setup needs the NDArray class");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)cls;
    Py_ssize_t d = slot_offset(t, "_data"), c = slot_offset(t, "_ctx"), b = slot_offset(t, "_buf");
    if (d < 0 || c < 0 || b < 0) return NULL;
    Py_INCREF(cls);
    Py_XSETREF(nd_type, t);
    off_data = d;
    off_ctx = c;
    off_buf = b;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_O, "Tell the fast path the NDArray class."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_nnsym_fast", "nnsym's imperative fast path.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__nnsym_fast(void)
{
    import_array();
    if (PyType_Ready(&FastOpType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    Py_INCREF(&FastOpType);
    if (PyModule_AddObject(m, "FastOp", (PyObject *)&FastOpType) < 0) {
        Py_DECREF(&FastOpType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
