/* The position controller's steady control cycles in C: what TrajectoryFollower.update (the
 * reference implementation, sim/trajectory_follower.py) does on a cycle where nothing happens,
 * without a Python call per arm.
 *
 * A Follow is bound once to one arm: the MjData arrays qpos, qvel and ctrl (their addresses are
 * stable for the MjData's life), the arm's first qpos / dof / actuator address (its joints and
 * position servos contiguous), and a command buffer (J,). Its mode, set by the follower:
 *   PYTHON  every cycle is the follower's (a fault, or no goal loaded)
 *   HOLD    ctrl = command = the hold positions
 *   FOLLOW  the active goal's spline (and the move to its first point): per cycle
 *             ref (3, J) = spline at now (position, velocity, acceleration)
 *             feedback   = [ref | q | qd | now | segment index | max |q - ref[0]|]  (5J + 3,)
 *             ctrl = command = ref[0]
 *           unless the cycle holds an event, which the follower handles instead (nothing written):
 *           now >= end (the goal checks), a path tolerance exceeded, the motion's onset.
 * dirty (set by other threads on a submit, a cancel or new faults) hands the next cycle to the
 * follower.
 *
 * cycle(now, follows) runs every Follow of the tuple (None: that arm is always the follower's) and
 * returns the bit mask of the arms whose cycle the follower must run. The GIL is held throughout:
 * a reader copying a feedback buffer in one operation sees one cycle's values.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MODE_PYTHON = 0, MODE_HOLD = 1, MODE_FOLLOW = 2 };
#define ONSET_THRESHOLD 1e-9   /* rad: sim/trajectory_follower.py ONSET_THRESHOLD */

typedef struct {
    Py_ssize_t nt;             /* knots */
    const double *times;       /* (nt,) */
    const double *coef;        /* (nt - 1, 6, 3J), or NULL when nt < 2 */
    const double *before;      /* (3J,) rest state before the first knot */
    const double *after;       /* (3J,) after the last */
} Spline;

typedef struct {
    PyObject_HEAD
    int mode;
    int dirty;
    int onset_pending;
    int has_pre;
    int check_position, check_velocity;
    Py_ssize_t n, qadr, vadr, cadr;
    Py_buffer qpos, qvel, ctrl, command;
    double *hold, *ref;
    /* FOLLOW: the goal's arrays, held while loaded */
    Py_buffer goal[12];
    Spline main, pre;
    double start, first, end;
    const double *tol_position, *tol_velocity, *p0;
    double *feedback;
} Follow;

static PyTypeObject FollowType;

static void release_goal(Follow *self) {
    for (int k = 0; k < 12; k++)
        if (self->goal[k].obj != NULL) PyBuffer_Release(&self->goal[k]);
    self->feedback = NULL;
}

/* a C-contiguous float64 buffer of `want` values (want < 0: any count, returned in *count) */
static int get_doubles(PyObject *obj, Py_buffer *view, Py_ssize_t want, int writable,
                       const char *name, Py_ssize_t *count) {
    view->obj = NULL;
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS |
                           PyBUF_FORMAT) < 0)
        return -1;
    Py_ssize_t have = view->len / (Py_ssize_t)sizeof(double);
    if (view->itemsize != (Py_ssize_t)sizeof(double) || view->format == NULL ||
        view->format[0] != 'd' || (want >= 0 && have != want)) {
        PyErr_Format(PyExc_ValueError, "_follow_kernel: %s must be contiguous float64 values "
                     "(%zd expected), got %zd bytes of format %s", name, want, view->len,
                     view->format ? view->format : "?");
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    if (count) *count = have;
    return 0;
}

static void Follow_dealloc(Follow *self) {
    release_goal(self);
    Py_buffer *views[4] = {&self->qpos, &self->qvel, &self->ctrl, &self->command};
    for (int k = 0; k < 4; k++)
        if (views[k]->obj != NULL) PyBuffer_Release(views[k]);
    free(self->hold);
    free(self->ref);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Follow_init(Follow *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"qpos", "qvel", "ctrl", "qadr", "vadr", "cadr", "command", NULL};
    PyObject *qpos, *qvel, *ctrl, *command;
    Py_ssize_t qadr, vadr, cadr, nq, nv, nu, n;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOnnnO", kwlist, &qpos, &qvel, &ctrl, &qadr,
                                     &vadr, &cadr, &command))
        return -1;
    if (self->hold != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_follow_kernel.Follow: already bound");
        return -1;
    }
    if (get_doubles(qpos, &self->qpos, -1, 0, "qpos", &nq) < 0 ||
        get_doubles(qvel, &self->qvel, -1, 0, "qvel", &nv) < 0 ||
        get_doubles(ctrl, &self->ctrl, -1, 1, "ctrl", &nu) < 0 ||
        get_doubles(command, &self->command, -1, 1, "command", &n) < 0)
        return -1;
    if (n < 1 || qadr < 0 || vadr < 0 || cadr < 0 || qadr + n > nq || vadr + n > nv ||
        cadr + n > nu) {
        PyErr_Format(PyExc_ValueError, "_follow_kernel.Follow: %zd joints at qpos %zd, dof %zd, "
                     "ctrl %zd do not fit arrays of %zd, %zd and %zd values", n, qadr, vadr,
                     cadr, nq, nv, nu);
        return -1;
    }
    self->n = n;
    self->qadr = qadr;
    self->vadr = vadr;
    self->cadr = cadr;
    self->hold = calloc((size_t)n, sizeof(double));
    self->ref = calloc((size_t)(3 * n), sizeof(double));
    if (self->hold == NULL || self->ref == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->mode = MODE_PYTHON;
    return 0;
}

static PyObject *Follow_python(Follow *self, PyObject *unused) {
    (void)unused;
    release_goal(self);
    self->mode = MODE_PYTHON;
    Py_RETURN_NONE;
}

static PyObject *Follow_hold(Follow *self, PyObject *arg) {
    Py_buffer view;
    if (self->hold == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_follow_kernel.Follow: not bound");
        return NULL;
    }
    if (get_doubles(arg, &view, self->n, 0, "hold", NULL) < 0) return NULL;
    memcpy(self->hold, view.buf, sizeof(double) * (size_t)self->n);
    PyBuffer_Release(&view);
    release_goal(self);
    self->mode = MODE_HOLD;
    Py_RETURN_NONE;
}

/* a spline's parts (times, coefficients or None, before, after) into goal[first .. first+3] */
static int load_spline(Follow *self, PyObject *parts, Spline *s, int first, const char *name) {
    PyObject *times, *coef, *before, *after;
    Py_ssize_t nt, nc;
    if (!PyArg_ParseTuple(parts, "OOOO", &times, &coef, &before, &after)) return -1;
    if (get_doubles(times, &self->goal[first], -1, 0, name, &nt) < 0) return -1;
    if (nt < 1) {
        PyErr_Format(PyExc_ValueError, "_follow_kernel: %s has no knots", name);
        return -1;
    }
    s->nt = nt;
    s->times = self->goal[first].buf;
    s->coef = NULL;
    if (coef != Py_None) {
        if (get_doubles(coef, &self->goal[first + 1], -1, 0, name, &nc) < 0) return -1;
        if (nc != (nt - 1) * 6 * 3 * self->n) {
            PyErr_Format(PyExc_ValueError, "_follow_kernel: %s has %zd coefficients, expected "
                         "%zd (segments x 6 x 3J)", name, nc, (nt - 1) * 18 * self->n);
            return -1;
        }
        s->coef = self->goal[first + 1].buf;
    } else if (nt >= 2) {
        PyErr_Format(PyExc_ValueError, "_follow_kernel: %s has %zd knots and no coefficients",
                     name, nt);
        return -1;
    }
    if (get_doubles(before, &self->goal[first + 2], 3 * self->n, 0, name, NULL) < 0 ||
        get_doubles(after, &self->goal[first + 3], 3 * self->n, 0, name, NULL) < 0)
        return -1;
    s->before = self->goal[first + 2].buf;
    s->after = self->goal[first + 3].buf;
    return 0;
}

static PyObject *Follow_follow(Follow *self, PyObject *args) {
    PyObject *main_parts, *pre_parts, *tolp, *tolv, *p0, *feedback;
    double start, first, end;
    int check_position, check_velocity, onset_pending;
    if (self->hold == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_follow_kernel.Follow: not bound");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOdddOOppOOp", &main_parts, &pre_parts, &start, &first, &end,
                          &tolp, &tolv, &check_position, &check_velocity, &p0, &feedback,
                          &onset_pending))
        return NULL;
    release_goal(self);
    self->mode = MODE_PYTHON;   /* until everything is loaded */
    for (int k = 0; k < 12; k++) self->goal[k].obj = NULL;
    if (load_spline(self, main_parts, &self->main, 0, "spline") < 0) goto fail;
    self->has_pre = pre_parts != Py_None;
    if (self->has_pre && load_spline(self, pre_parts, &self->pre, 4, "pre-spline") < 0) goto fail;
    if (get_doubles(tolp, &self->goal[8], self->n, 0, "path position tolerance", NULL) < 0 ||
        get_doubles(tolv, &self->goal[9], self->n, 0, "path velocity tolerance", NULL) < 0 ||
        get_doubles(p0, &self->goal[10], self->n, 0, "first point", NULL) < 0 ||
        get_doubles(feedback, &self->goal[11], 5 * self->n + 3, 1, "feedback", NULL) < 0)
        goto fail;
    self->tol_position = self->goal[8].buf;
    self->tol_velocity = self->goal[9].buf;
    self->p0 = self->goal[10].buf;
    self->feedback = self->goal[11].buf;
    self->start = start;
    self->first = first;
    self->end = end;
    self->check_position = check_position;
    self->check_velocity = check_velocity;
    self->onset_pending = onset_pending;
    self->mode = MODE_FOLLOW;
    Py_RETURN_NONE;
fail:
    release_goal(self);
    return NULL;
}

/* first index whose value is > t (Python's bisect.bisect_right) */
static Py_ssize_t bisect_right(const double *a, Py_ssize_t n, double t) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (t < a[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Spline.at (core/interpolation.py): out (3J) */
static void spline_at(const Spline *s, Py_ssize_t n, double t, double *out) {
    Py_ssize_t w = 3 * n;
    if (t < s->times[0]) { memcpy(out, s->before, sizeof(double) * (size_t)w); return; }
    if (t > s->times[s->nt - 1] || s->nt < 2) {
        memcpy(out, s->after, sizeof(double) * (size_t)w);
        return;
    }
    Py_ssize_t k = bisect_right(s->times, s->nt, t) - 1;
    if (k > s->nt - 2) k = s->nt - 2;
    double x = t - s->times[k], x2 = x * x, x3 = x2 * x;
    double p[6] = {1.0, x, x2, x3, x2 * x2, x3 * x2};
    const double *c = s->coef + k * 6 * w;
    for (Py_ssize_t j = 0; j < w; j++) {
        double sum = 0.0;
        for (int i = 0; i < 6; i++) sum += p[i] * c[i * w + j];
        out[j] = sum;
    }
}

/* one arm's cycle: 0 done, 1 the follower's */
static int follow_cycle(Follow *self, double now) {
    Py_ssize_t n = self->n;
    double *ctrl = (double *)self->ctrl.buf + self->cadr;
    double *command = self->command.buf;
    if (self->dirty || self->mode == MODE_PYTHON) return 1;
    if (self->mode == MODE_HOLD) {
        memcpy(ctrl, self->hold, sizeof(double) * (size_t)n);
        memcpy(command, self->hold, sizeof(double) * (size_t)n);
        return 0;
    }
    if (now >= self->end) return 1;   /* the goal checks */
    const double *q = (const double *)self->qpos.buf + self->qadr;
    const double *qd = (const double *)self->qvel.buf + self->vadr;
    double *ref = self->ref;
    if (self->has_pre && now < self->first) spline_at(&self->pre, n, now, ref);
    else spline_at(&self->main, n, now - self->start, ref);
    double local = now - self->start, worst = 0.0;
    if (self->onset_pending && local >= self->main.times[0]) {
        for (Py_ssize_t j = 0; j < n; j++)
            if (fabs(ref[j] - self->p0[j]) > ONSET_THRESHOLD) return 1;   /* the onset */
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        double e = fabs(q[j] - ref[j]);
        if (isnan(e) || isnan(qd[j])) return 1;   /* not finite: the follower's */
        if (e > worst) worst = e;
        if (self->check_position && e > self->tol_position[j]) return 1;
        if (self->check_velocity && fabs(qd[j] - ref[n + j]) > self->tol_velocity[j]) return 1;
    }
    double *fb = self->feedback;
    memcpy(fb, ref, sizeof(double) * (size_t)(3 * n));
    memcpy(fb + 3 * n, q, sizeof(double) * (size_t)n);
    memcpy(fb + 4 * n, qd, sizeof(double) * (size_t)n);
    fb[5 * n] = now;
    fb[5 * n + 1] = (double)bisect_right(self->main.times, self->main.nt, local);
    if (!(fb[5 * n + 2] >= worst)) fb[5 * n + 2] = worst;
    memcpy(ctrl, ref, sizeof(double) * (size_t)n);
    memcpy(command, ref, sizeof(double) * (size_t)n);
    return 0;
}

static PyObject *cycle(PyObject *module, PyObject *args) {
    (void)module;
    double now;
    PyObject *follows;
    if (!PyArg_ParseTuple(args, "dO!", &now, &PyTuple_Type, &follows)) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(follows);
    if (count > 62) {
        PyErr_SetString(PyExc_ValueError, "_follow_kernel.cycle: at most 62 arms");
        return NULL;
    }
    long long mask = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyTuple_GET_ITEM(follows, i);
        if (item == Py_None || !PyObject_TypeCheck(item, &FollowType)) {
            if (item != Py_None) {
                PyErr_Format(PyExc_TypeError, "_follow_kernel.cycle: item %zd is a %s, expected "
                             "a Follow or None", i, Py_TYPE(item)->tp_name);
                return NULL;
            }
            mask |= 1LL << i;
            continue;
        }
        if (follow_cycle((Follow *)item, now)) mask |= 1LL << i;
    }
    return PyLong_FromLongLong(mask);
}

static PyMemberDef Follow_members[] = {
    {"dirty", T_INT, offsetof(Follow, dirty), 0,
     "non-zero: the next cycle is the follower's (a submit, a cancel, new faults)"},
    {"onset_pending", T_INT, offsetof(Follow, onset_pending), 0,
     "non-zero: the motion's onset is not yet recorded (its cycle is the follower's)"},
    {"mode", T_INT, offsetof(Follow, mode), READONLY, "0 python, 1 hold, 2 follow"},
    {NULL, 0, 0, 0, NULL}};

static PyMethodDef Follow_methods[] = {
    {"python", (PyCFunction)Follow_python, METH_NOARGS,
     "python(): every cycle is the follower's"},
    {"hold", (PyCFunction)Follow_hold, METH_O, "hold(positions (J,)): hold them"},
    {"follow", (PyCFunction)Follow_follow, METH_VARARGS,
     "follow(spline, pre_spline or None, start, first, end, path_position (J,), "
     "path_velocity (J,), check_position, check_velocity, first_point (J,), feedback (5J+3,), "
     "onset_pending): follow a goal; a spline is (times (N,), coefficients (N-1, 6, 3J) or "
     "None, before (3J,), after (3J,))"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject FollowType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mj_manipulator_ros.sim._follow_kernel.Follow",
    .tp_doc = "Follow(qpos, qvel, ctrl, qadr, vadr, cadr, command): one arm's steady cycles",
    .tp_basicsize = sizeof(Follow),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Follow_init,
    .tp_dealloc = (destructor)Follow_dealloc,
    .tp_members = Follow_members,
    .tp_methods = Follow_methods,
};

static PyMethodDef methods[] = {
    {"cycle", cycle, METH_VARARGS,
     "cycle(now, follows): every arm's steady cycle; returns the bit mask of the arms whose "
     "cycle the follower must run"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_follow_kernel",
                                    "The position controller's steady control cycles in C.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__follow_kernel(void) {
    if (PyType_Ready(&FollowType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&FollowType);
    if (PyModule_AddObject(m, "Follow", (PyObject *)&FollowType) < 0) {
        Py_DECREF(&FollowType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
