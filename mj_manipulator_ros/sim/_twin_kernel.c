/* The actuator twin's tick loop in C: ActuatorTwin.advance's numpy loop (the reference
 * implementation, sim/actuator_twin.py) without a Python call per operation.
 *
 * advance(ticks, dt, q, v, tau, acc, minus_load, drive, kp, kd, limit, beta, dt_over_j,
 *         coulomb, inv_vs, viscous, res, inv_res, load_step, step_matrix)
 *
 * Every array argument is a C-contiguous float64 buffer of n values (step_matrix: n x n,
 * row-major; load_step and step_matrix may be None). q, v, tau, acc and minus_load are written.
 * One tick, per joint j, in the reference's order of operations:
 *   q_enc   = res_j > 0 ? rint(q_j * inv_res_j) * res_j : q_j
 *   cmd     = clip(drive_j - kp_j q_enc - kd_j v_j, -limit_j, limit_j)
 *   tau_j  += beta_j (cmd - tau_j)
 *   f_j     = tau_j - load_j - coulomb_j tanh(v_j inv_vs) - viscous_j v_j
 *   dv      = step_matrix ? step_matrix f : dt_over_j f
 *   v      += dv;  q += v dt;  minus_load -= load_step
 * and acc = dv / dt of the last tick.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>

#define N_BUFFERS 17

static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t want, int writable,
                      const char *name) {
    if (obj == Py_None) {
        view->obj = NULL;
        view->buf = NULL;
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS |
                           PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != (Py_ssize_t)sizeof(double) || view->format == NULL ||
        view->format[0] != 'd' || view->len != want * (Py_ssize_t)sizeof(double)) {
        PyErr_Format(PyExc_ValueError, "_twin_kernel.advance: %s must be %zd contiguous "
                     "float64 values, got %zd bytes of format %s", name, want, view->len,
                     view->format ? view->format : "?");
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    return 0;
}

static PyObject *advance(PyObject *self, PyObject *args) {
    (void)self;
    static const char *names[N_BUFFERS] = {
        "q", "v", "tau", "acc", "minus_load", "drive", "kp", "kd", "limit", "beta",
        "dt_over_j", "coulomb", "viscous", "res", "inv_res", "load_step", "step_matrix"};
    static const int writable[N_BUFFERS] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    long ticks;
    double dt, inv_vs;
    PyObject *objs[N_BUFFERS];
    Py_buffer views[N_BUFFERS];
    if (!PyArg_ParseTuple(args, "ldOOOOOOOOOOOOdOOOOO", &ticks, &dt, &objs[0], &objs[1],
                          &objs[2], &objs[3], &objs[4], &objs[5], &objs[6], &objs[7], &objs[8],
                          &objs[9], &objs[10], &objs[11], &inv_vs, &objs[12], &objs[13],
                          &objs[14], &objs[15], &objs[16]))
        return NULL;
    for (int k = 0; k < N_BUFFERS; k++) views[k].obj = NULL;
    Py_buffer first;
    if (PyObject_GetBuffer(objs[0], &first, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t n = first.len / (Py_ssize_t)sizeof(double);
    PyBuffer_Release(&first);
    int ok = 1;
    for (int k = 0; k < N_BUFFERS && ok; k++) {
        if (k < 15 && objs[k] == Py_None) {
            PyErr_Format(PyExc_TypeError, "_twin_kernel.advance: %s is required", names[k]);
            ok = 0;
            break;
        }
        if (get_buffer(objs[k], &views[k], k == 16 ? n * n : n, writable[k], names[k]) < 0)
            ok = 0;
    }
    double *scratch = ok ? (double *)malloc(sizeof(double) * (size_t)(2 * (n > 0 ? n : 1)))
                         : NULL;
    if (ok && scratch == NULL) {
        PyErr_NoMemory();
        ok = 0;
    }
    if (ok) {
        double *q = views[0].buf, *v = views[1].buf, *tau = views[2].buf, *acc = views[3].buf;
        double *minus_load = views[4].buf;
        const double *drive = views[5].buf, *kp = views[6].buf, *kd = views[7].buf;
        const double *limit = views[8].buf, *beta = views[9].buf, *dt_over_j = views[10].buf;
        const double *coulomb = views[11].buf, *viscous = views[12].buf, *res = views[13].buf;
        const double *inv_res = views[14].buf, *load_step = views[15].buf;
        const double *step_matrix = views[16].buf;
        double *f = scratch, *dv = scratch + n;
        Py_BEGIN_ALLOW_THREADS
        for (long t = 0; t < ticks; t++) {
            for (Py_ssize_t j = 0; j < n; j++) {
                double q_enc = res[j] > 0 ? nearbyint(q[j] * inv_res[j]) * res[j] : q[j];
                double cmd = drive[j] - kp[j] * q_enc;
                cmd -= kd[j] * v[j];
                if (cmd > limit[j]) cmd = limit[j];
                if (cmd < -limit[j]) cmd = -limit[j];
                tau[j] += beta[j] * (cmd - tau[j]);
                double force = tau[j] + minus_load[j];
                if (coulomb[j] != 0) force -= coulomb[j] * tanh(v[j] * inv_vs);
                if (viscous[j] != 0) force -= viscous[j] * v[j];
                f[j] = force;
            }
            if (step_matrix != NULL) {
                for (Py_ssize_t i = 0; i < n; i++) {
                    const double *row = step_matrix + i * n;
                    double sum = 0.0;
                    for (Py_ssize_t j = 0; j < n; j++) sum += row[j] * f[j];
                    dv[i] = sum;
                }
            } else {
                for (Py_ssize_t j = 0; j < n; j++) dv[j] = f[j] * dt_over_j[j];
            }
            for (Py_ssize_t j = 0; j < n; j++) {
                v[j] += dv[j];
                q[j] += v[j] * dt;
                if (load_step != NULL) minus_load[j] -= load_step[j];
            }
        }
        if (ticks > 0)
            for (Py_ssize_t j = 0; j < n; j++) acc[j] = dv[j] / dt;
        Py_END_ALLOW_THREADS
    }
    free(scratch);
    for (int k = 0; k < N_BUFFERS; k++)
        if (views[k].obj != NULL) PyBuffer_Release(&views[k]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"advance", advance, METH_VARARGS,
     "advance(ticks, dt, q, v, tau, acc, minus_load, drive, kp, kd, limit, beta, dt_over_j, "
     "coulomb, inv_vs, viscous, res, inv_res, load_step, step_matrix): the actuator twin's "
     "ticks (see sim/actuator_twin.py)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_twin_kernel",
                                    "The actuator twin's tick loop in C.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__twin_kernel(void) { return PyModule_Create(&module); }
