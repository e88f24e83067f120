/* The replay's per-state loop in C: for each row of joint positions, MuJoCo's forward
 * kinematics and collision detection, and the smallest distance of the contacts kept in each
 * category of pairs. PlanReplayChecker._evaluate (check/replay_checker.py) is the reference
 * implementation; this returns the same figures without a Python call per state, and with
 * the GIL released (other threads of the process run meanwhile).
 *
 * clearances(model, data, rows, owner, category, allowed, out, overflow)
 *
 *   model, data  the addresses of an mjModel and of an mjData made for it (MjModel._address,
 *                MjData._address); the caller owns both for the call's duration
 *   rows         float64, C-contiguous, N x nq: the qpos of each state
 *   owner        int32, ngeom: each geom's owner as a row of `category` (environment: n)
 *   category     int32, (n + 1) x (n + 1): owner x owner -> category code in [0, ncat), -1
 *                where the pair is not counted
 *   allowed      uint8, nbody x nbody: 1 where the allowed-collision matrix skips the pair
 *   out          float64, N x ncat, written: the smallest contact distance per state and
 *                category, +inf where the category has no contact
 *   overflow     uint8, N, written: 1 where the contact buffer filled (contacts were dropped)
 *
 * One state, as the reference: qpos = row; mj_kinematics; mj_collision; the contact-full
 * warning counter compared before and after; every contact whose category is >= 0 and whose
 * bodies' pair is not allowed counts, at its distance. An error MuJoCo reports raises
 * mujoco.FatalError, as the reference does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <mujoco/mujoco.h>

/* MuJoCo's thread-local log handler: exported, declared only in its internal headers. Its
 * Python bindings use it the same way: an error (mju_error: an arena too small for the
 * contacts, say) jumps back here and becomes mujoco.FatalError, as the reference raises,
 * instead of MuJoCo's default handler ending the process. */
extern mjfLogHandler _mjPRIVATE_setTlsLogHandler(mjfLogHandler handler);

static PyObject *fatal_error;   /* mujoco.FatalError */
static _Thread_local jmp_buf error_jump;
static _Thread_local char error_text[1024];
static _Thread_local mjfLogHandler outer_handler;

static void on_log(const mjLogMessage *msg) {
    if (msg->level >= mjLOG_ERROR) {
        snprintf(error_text, sizeof error_text, "%s", msg->subject);
        longjmp(error_jump, 1);
    }
    /* anything else goes where it would have gone (the warnings of a full contact buffer) */
    _mjPRIVATE_setTlsLogHandler(outer_handler);
    mju_message(msg);
    _mjPRIVATE_setTlsLogHandler(on_log);
}

static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t count, char format,
                      Py_ssize_t itemsize, int writable, const char *name) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS |
                           PyBUF_FORMAT) < 0)
        return -1;
    const char *f = view->format ? view->format : "?";
    if (f[0] == '<' || f[0] == '=' || f[0] == '@')
        f++;
    int same_int = (format == 'i' && itemsize == 4 && (f[0] == 'i' || f[0] == 'l') &&
                    view->itemsize == 4);
    if (view->itemsize != itemsize || (f[0] != format && !same_int) ||
        view->len != count * itemsize) {
        PyErr_Format(PyExc_ValueError, "_contact_kernel.clearances: %s must be %zd contiguous "
                     "values of format '%c' (%zd bytes each), got %zd bytes of format '%s'",
                     name, count, format, itemsize, view->len, f);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* the bytes of obj's buffer (its length, for the checks that follow), or -1 with an error set */
static Py_ssize_t buffer_bytes(PyObject *obj, int writable) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS |
                           PyBUF_FORMAT) < 0)
        return -1;
    Py_ssize_t bytes = view.len;
    PyBuffer_Release(&view);
    return bytes;
}

static PyObject *clearances(PyObject *self, PyObject *args) {
    unsigned long long model_address, data_address;
    PyObject *rows_obj, *owner_obj, *category_obj, *allowed_obj, *out_obj, *overflow_obj;
    if (!PyArg_ParseTuple(args, "KKOOOOOO", &model_address, &data_address, &rows_obj,
                          &owner_obj, &category_obj, &allowed_obj, &out_obj, &overflow_obj))
        return NULL;
    const mjModel *m = (const mjModel *)(uintptr_t)model_address;
    mjData *d = (mjData *)(uintptr_t)data_address;
    if (m == NULL || d == NULL) {
        PyErr_SetString(PyExc_ValueError, "_contact_kernel.clearances: a null model or data");
        return NULL;
    }
    Py_buffer rows, owner, category, allowed, out, overflow;
    Py_ssize_t nq = m->nq, ngeom = m->ngeom, nbody = m->nbody;
    /* the sizes the other buffers imply: rows (N x nq), category (side x side), out (N x ncat) */
    Py_ssize_t rows_bytes = buffer_bytes(rows_obj, 0), category_bytes = buffer_bytes(category_obj, 0),
               out_bytes = buffer_bytes(out_obj, 1);
    if (rows_bytes < 0 || category_bytes < 0 || out_bytes < 0)
        return NULL;
    Py_ssize_t n_rows = nq > 0 ? rows_bytes / (Py_ssize_t)(sizeof(double) * nq) : 0;
    Py_ssize_t side = (Py_ssize_t)llround(sqrt((double)(category_bytes / 4)));
    Py_ssize_t ncat = n_rows > 0 ? out_bytes / (Py_ssize_t)(sizeof(double) * n_rows) : 0;
    if (get_buffer(rows_obj, &rows, n_rows * nq, 'd', sizeof(double), 0, "rows") < 0)
        return NULL;
    if (get_buffer(owner_obj, &owner, ngeom, 'i', 4, 0, "owner") < 0)
        goto fail_rows;
    if (get_buffer(category_obj, &category, side * side, 'i', 4, 0, "category") < 0)
        goto fail_owner;
    if (get_buffer(allowed_obj, &allowed, nbody * nbody, 'B', 1, 0, "allowed") < 0)
        goto fail_category;
    if (get_buffer(out_obj, &out, n_rows * ncat, 'd', sizeof(double), 1, "out") < 0)
        goto fail_allowed;
    if (get_buffer(overflow_obj, &overflow, n_rows, 'B', 1, 1, "overflow") < 0)
        goto fail_out;

    const int *own = (const int *)owner.buf, *cat = (const int *)category.buf;
    const unsigned char *skip = (const unsigned char *)allowed.buf;
    for (Py_ssize_t g = 0; g < ngeom; g++) {
        if (own[g] < 0 || own[g] >= side) {
            PyErr_Format(PyExc_ValueError, "_contact_kernel.clearances: geom %zd's owner %d is "
                         "not a row of the %zd x %zd category table", g, own[g], side, side);
            goto fail_all;
        }
    }
    for (Py_ssize_t k = 0; k < side * side; k++) {
        if (cat[k] >= ncat) {
            PyErr_Format(PyExc_ValueError, "_contact_kernel.clearances: category code %d is "
                         "not a column of out (%zd columns)", cat[k], ncat);
            goto fail_all;
        }
    }
    const double *q = (const double *)rows.buf;
    double *o = (double *)out.buf;
    unsigned char *full = (unsigned char *)overflow.buf;
    volatile int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    outer_handler = _mjPRIVATE_setTlsLogHandler(on_log);
    if (setjmp(error_jump) != 0) {   /* MuJoCo reported an error: no row after it is run */
        failed = 1;
        goto done;
    }
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        double *row_out = o + r * ncat;
        for (Py_ssize_t c = 0; c < ncat; c++)
            row_out[c] = INFINITY;
        memcpy(d->qpos, q + r * nq, sizeof(double) * nq);
        mj_kinematics(m, d);
        int before = d->warning[mjWARN_CONTACTFULL].number;
        mj_collision(m, d);
        full[r] = d->warning[mjWARN_CONTACTFULL].number != before;
        for (int i = 0; i < d->ncon; i++) {
            const mjContact *con = d->contact + i;
            int g1 = con->geom[0], g2 = con->geom[1];
            if (g1 < 0 || g2 < 0)   /* a flex contact: no geom pair (none in a scene this package builds) */
                continue;
            int code = cat[own[g1] * side + own[g2]];
            if (code < 0 || skip[m->geom_bodyid[g1] * nbody + m->geom_bodyid[g2]])
                continue;
            if (con->dist < row_out[code])
                row_out[code] = con->dist;
        }
    }
done:
    _mjPRIVATE_setTlsLogHandler(outer_handler);
    if (failed)   /* the jump left MuJoCo's stack marked: clean for the next call */
        mj_resetData(m, d);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_SetString(fatal_error, error_text);
        goto fail_all;
    }
    PyBuffer_Release(&overflow);
    PyBuffer_Release(&out);
    PyBuffer_Release(&allowed);
    PyBuffer_Release(&category);
    PyBuffer_Release(&owner);
    PyBuffer_Release(&rows);
    Py_RETURN_NONE;

fail_all:
    PyBuffer_Release(&overflow);
fail_out:
    PyBuffer_Release(&out);
fail_allowed:
    PyBuffer_Release(&allowed);
fail_category:
    PyBuffer_Release(&category);
fail_owner:
    PyBuffer_Release(&owner);
fail_rows:
    PyBuffer_Release(&rows);
    return NULL;
}

static PyMethodDef methods[] = {
    {"clearances", clearances, METH_VARARGS,
     "clearances(model, data, rows, owner, category, allowed, out, overflow): see the source"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_contact_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__contact_kernel(void) {
    if (mj_version() != mjVERSION_HEADER) {
        PyErr_Format(PyExc_ImportError, "_contact_kernel was built against MuJoCo %d and "
                     "runs with %d: rebuild it (make setup)", mjVERSION_HEADER, mj_version());
        return NULL;
    }
    PyObject *mujoco = PyImport_ImportModule("mujoco");
    if (mujoco == NULL)
        return NULL;
    fatal_error = PyObject_GetAttrString(mujoco, "FatalError");
    Py_DECREF(mujoco);
    if (fatal_error == NULL)
        return NULL;
    return PyModule_Create(&module);
}
