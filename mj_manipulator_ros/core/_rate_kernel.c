/* The stop search's inner loop in C (core/stop_ends.py, _Search._peaks): a plan's joint
 * velocities and accelerations at many times, composed with a time scaling's rate, as
 * fractions of the joints' limits, and the largest fraction over each request's samples.
 * The numpy code it replaces (interpolation.sample_rates and the ratios after it) is the
 * reference: the same Horner steps on the same coefficients, the same products and sums in
 * the same order, each rounded (built with -ffp-contract=off: no fused multiply-add), so the
 * same numbers; test_stop_ends.py compares the two bit for bit.
 *
 * peaks(times, coef, ts, rate, rate_dot, vel_limit, acc_limit, starts, out_v, out_a)
 *
 *   times      float64 (N,), N >= 2: the plan's knot times, increasing
 *   coef       float64 (N - 1, 6, 2J), C-contiguous: each segment's velocity and acceleration
 *              polynomial coefficients in the segment's local time, lowest power first
 *   ts         float64 (M,): plan times to sample
 *   rate       float64 (M,): the scaling's rate at each sample; rate_dot its derivative
 *   vel_limit  float64 (J,), acc_limit float64 (J,): the limits (inf: none)
 *   starts     int64 (K,): each request's first sample (increasing; the last ends at M)
 *   out_v      float64 (K,), written: the largest |v * rate| / vel_limit over the request's
 *              samples and joints; NaN where any such figure is NaN (numpy's maximum)
 *   out_a      float64 (K,), written: the same for |a * rate^2 + v * rate_dot| / acc_limit
 *
 * A sample outside [times[0], times[N-1]] has zero velocity and acceleration, as the reference.
 * An infinite limit gives a fraction of 0.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static int view(PyObject *obj, Py_buffer *b, Py_ssize_t count, Py_ssize_t itemsize,
                int writable, const char *name) {
    if (PyObject_GetBuffer(obj, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (b->itemsize != itemsize || (count >= 0 && b->len != count * itemsize)) {
        PyErr_Format(PyExc_ValueError, "_rate_kernel.peaks: %s must be %zd contiguous values "
                     "of %zd bytes, got %zd bytes of %zd", name, count, itemsize, b->len,
                     b->itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* numpy's maximum over a running figure: NaN once any figure is NaN */
static inline void take(double x, double *best, int *nan_seen) {
    if (x != x)
        *nan_seen = 1;
    else if (x > *best)
        *best = x;
}

static PyObject *peaks(PyObject *self, PyObject *args) {
    PyObject *o[10];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8], &o[9]))
        return NULL;
    Py_buffer b[10];
    int got = 0;
    PyObject *result = NULL;
    if (view(o[0], &b[0], -1, 8, 0, "times") < 0) goto done;
    got = 1;
    Py_ssize_t n = b[0].len / 8;
    if (view(o[5], &b[1], -1, 8, 0, "vel_limit") < 0) goto done;
    got = 2;
    Py_ssize_t J = b[1].len / 8;
    if (n < 2 || J < 1) {
        PyErr_SetString(PyExc_ValueError, "_rate_kernel.peaks: needs >= 2 knots and >= 1 joint");
        goto done;
    }
    if (view(o[1], &b[2], (n - 1) * 6 * 2 * J, 8, 0, "coef") < 0) goto done;
    got = 3;
    if (view(o[2], &b[3], -1, 8, 0, "ts") < 0) goto done;
    got = 4;
    Py_ssize_t M = b[3].len / 8;
    if (view(o[3], &b[4], M, 8, 0, "rate") < 0) goto done;
    got = 5;
    if (view(o[4], &b[5], M, 8, 0, "rate_dot") < 0) goto done;
    got = 6;
    if (view(o[6], &b[6], J, 8, 0, "acc_limit") < 0) goto done;
    got = 7;
    if (view(o[7], &b[7], -1, 8, 0, "starts") < 0) goto done;
    got = 8;
    Py_ssize_t K = b[7].len / 8;
    if (view(o[8], &b[8], K, 8, 1, "out_v") < 0) goto done;
    got = 9;
    if (view(o[9], &b[9], K, 8, 1, "out_a") < 0) goto done;
    got = 10;
    const double *times = b[0].buf, *vlim = b[1].buf, *coef = b[2].buf, *ts = b[3].buf;
    const double *rate = b[4].buf, *rate_dot = b[5].buf, *alim = b[6].buf;
    const int64_t *starts = b[7].buf;
    double *out_v = b[8].buf, *out_a = b[9].buf;
    for (Py_ssize_t k = 0; k < K; k++) {
        if (starts[k] < 0 || starts[k] > M || (k && starts[k] < starts[k - 1])) {
            PyErr_Format(PyExc_ValueError, "_rate_kernel.peaks: starts[%zd] = %lld is not an "
                         "increasing index into %zd samples", k, (long long)starts[k], M);
            goto done;
        }
    }
    double *r = malloc(sizeof(double) * 2 * J);
    if (!r) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K; k++) {
        Py_ssize_t first = starts[k], last = k + 1 < K ? starts[k + 1] : M;
        double best_v = -INFINITY, best_a = -INFINITY;
        int nan_v = 0, nan_a = 0;
        for (Py_ssize_t m = first; m < last; m++) {
            double t = ts[m];
            /* numpy's searchsorted(times, t, side="right") - 1, clamped to [0, n - 2] */
            Py_ssize_t lo = 0, hi = n;
            if (t != t) {
                lo = n;   /* NaN sorts last */
            } else {
                while (lo < hi) {
                    Py_ssize_t mid = (lo + hi) / 2;
                    if (times[mid] <= t) lo = mid + 1;
                    else hi = mid;
                }
            }
            Py_ssize_t seg = lo - 1;
            if (seg < 0) seg = 0;
            if (seg > n - 2) seg = n - 2;
            double t0 = times[seg], t1 = times[seg + 1];
            int outside = t < times[0] || t > times[n - 1];
            double x = t < t0 ? t0 : t;   /* np.maximum, np.minimum: NaN stays NaN */
            if (x == x && t0 != t0) x = t0;
            x = x > t1 ? t1 : x;
            if (x == x && t1 != t1) x = t1;
            x = x - t0;
            const double *d = coef + seg * 6 * 2 * J;
            for (Py_ssize_t c = 0; c < 2 * J; c++) {
                double acc = d[5 * 2 * J + c];
                for (int p = 4; p >= 0; p--)
                    acc = d[p * 2 * J + c] + x * acc;
                r[c] = outside ? 0.0 : acc;
            }
            double f = rate[m], fd = rate_dot[m], f2 = f * f;
            for (Py_ssize_t j = 0; j < J; j++) {
                double v = r[j], a = r[J + j];
                double vel = v * f;
                double acc = a * f2 + v * fd;
                take(isfinite(vlim[j]) ? fabs(vel) / vlim[j] : 0.0, &best_v, &nan_v);
                take(isfinite(alim[j]) ? fabs(acc) / alim[j] : 0.0, &best_a, &nan_a);
            }
        }
        out_v[k] = nan_v ? NAN : best_v;
        out_a[k] = nan_a ? NAN : best_a;
    }
    Py_END_ALLOW_THREADS
    free(r);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    return result;
}

/* goal_peaks(coef, rows, xs, beyond, vel_limit, acc_limit, starts, out_v, out_a): the same
 * figures for goals built as splines of their own (core/stop_ends.py, _SentGoals._batch):
 *
 *   coef       float64 (S, 6, 3J), C-contiguous: each goal segment's position, velocity and
 *              acceleration coefficients (columns [0, J), [J, 2J), [2J, 3J)), lowest power first
 *   rows       int64 (Q,): each sample's segment; xs float64 (Q,): its time in the segment
 *   beyond     uint8 (Q,): 1 where the sample is past the goal's end (velocity and
 *              acceleration 0)
 *   starts, out_v, out_a: as peaks (the fractions of |v| and |a| themselves, no rate)
 */
static PyObject *goal_peaks(PyObject *self, PyObject *args) {
    PyObject *o[9];
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8]))
        return NULL;
    Py_buffer b[9];
    int got = 0;
    PyObject *result = NULL;
    if (view(o[4], &b[0], -1, 8, 0, "vel_limit") < 0) goto done;
    got = 1;
    Py_ssize_t J = b[0].len / 8;
    if (view(o[5], &b[1], J, 8, 0, "acc_limit") < 0) goto done;
    got = 2;
    if (view(o[0], &b[2], -1, 8, 0, "coef") < 0) goto done;
    got = 3;
    Py_ssize_t S = J ? b[2].len / (8 * 6 * 3 * J) : 0;
    if (J < 1 || b[2].len != S * 6 * 3 * J * 8) {
        PyErr_Format(PyExc_ValueError, "_rate_kernel.goal_peaks: coef must be (S, 6, 3J) with "
                     "J = %zd >= 1, got %zd bytes", J, b[2].len);
        goto done;
    }
    if (view(o[1], &b[3], -1, 8, 0, "rows") < 0) goto done;
    got = 4;
    Py_ssize_t Q = b[3].len / 8;
    if (view(o[2], &b[4], Q, 8, 0, "xs") < 0) goto done;
    got = 5;
    if (view(o[3], &b[5], Q, 1, 0, "beyond") < 0) goto done;
    got = 6;
    if (view(o[6], &b[6], -1, 8, 0, "starts") < 0) goto done;
    got = 7;
    Py_ssize_t K = b[6].len / 8;
    if (view(o[7], &b[7], K, 8, 1, "out_v") < 0) goto done;
    got = 8;
    if (view(o[8], &b[8], K, 8, 1, "out_a") < 0) goto done;
    got = 9;
    const double *vlim = b[0].buf, *alim = b[1].buf, *coef = b[2].buf, *xs = b[4].buf;
    const int64_t *rows = b[3].buf, *starts = b[6].buf;
    const uint8_t *beyond = b[5].buf;
    double *out_v = b[7].buf, *out_a = b[8].buf;
    for (Py_ssize_t k = 0; k < K; k++) {
        if (starts[k] < 0 || starts[k] > Q || (k && starts[k] < starts[k - 1])) {
            PyErr_Format(PyExc_ValueError, "_rate_kernel.goal_peaks: starts[%zd] = %lld is not "
                         "an increasing index into %zd samples", k, (long long)starts[k], Q);
            goto done;
        }
    }
    for (Py_ssize_t q = 0; q < Q; q++) {
        if (rows[q] < 0 || rows[q] >= S) {
            PyErr_Format(PyExc_ValueError, "_rate_kernel.goal_peaks: rows[%zd] = %lld is not a "
                         "segment of %zd", q, (long long)rows[q], S);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    const Py_ssize_t W = 3 * J;
    for (Py_ssize_t k = 0; k < K; k++) {
        Py_ssize_t first = starts[k], last = k + 1 < K ? starts[k + 1] : Q;
        double best_v = -INFINITY, best_a = -INFINITY;
        int nan_v = 0, nan_a = 0;
        for (Py_ssize_t q = first; q < last; q++) {
            const double *d = coef + rows[q] * 6 * W;
            double x = xs[q];
            for (Py_ssize_t j = 0; j < J; j++) {
                double v = d[5 * W + J + j], a = d[5 * W + 2 * J + j];
                for (int p = 4; p >= 0; p--) {
                    v = d[p * W + J + j] + x * v;
                    a = d[p * W + 2 * J + j] + x * a;
                }
                if (beyond[q]) {
                    v = 0.0;
                    a = 0.0;
                }
                take(isfinite(vlim[j]) ? fabs(v) / vlim[j] : 0.0, &best_v, &nan_v);
                take(isfinite(alim[j]) ? fabs(a) / alim[j] : 0.0, &best_a, &nan_a);
            }
        }
        out_v[k] = nan_v ? NAN : best_v;
        out_a[k] = nan_a ? NAN : best_a;
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"goal_peaks", goal_peaks, METH_VARARGS,
     "goal_peaks(coef, rows, xs, beyond, vel_limit, acc_limit, starts, out_v, out_a): the "
     "largest fraction of each limit over each request's goal samples (see the source)"},
    {"peaks", peaks, METH_VARARGS,
     "peaks(times, coef, ts, rate, rate_dot, vel_limit, acc_limit, starts, out_v, out_a): "
     "the largest fraction of each limit over each request's samples (see the source)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rate_kernel",
                                    "The stop search's rate samples in C (core/stop_ends.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__rate_kernel(void) { return PyModule_Create(&module); }
