/*
 * pyembed.c -- the evaluator's embedded Python: the only file that includes
 * Python.h.  It is longer than the 800 lines a file should stay under
 * because it is the whole of the Python C API in STARK: each foreign
 * runtime stays in one file, where its reference counting and its errors
 * are mapped to ours.
 *
 * It starts the interpreter found at build time (STARK_PYTHON: program name
 * and executable are set to it, so a virtual environment's site-packages is
 * found the way that interpreter would find it), registers the builtin
 * module _stark, executes the harness modules linked into the binary
 * (pysrc.S), and calls stark_referee.evaluate() with the request as a dict.
 * The dict it returns is converted into a proto_result strictly: the
 * harness is our code, but a typo in it must become a clear "error" result,
 * never a malformed frame.
 *
 * _stark holds the primitives that need C:
 *   fork_worker(fd, window=-1)
 *                    fork with Python's fork hooks; in the child: wipe the
 *                    secret seed, die with the referee (PDEATHSIG), own
 *                    process group, close every descriptor >= 3 but fd and
 *                    window -- the result channel, the GPU lock and other
 *                    workers' sockets with them
 *   secret_seed()    the master seed, then a second (drawn here), each once and wiped
 *   narrow()         sandbox_narrow() when jailed (run jail), else nothing
 *   set_dumpable(b)  prctl(PR_SET_DUMPABLE)
 *   jailed(), start_ns(), limits()
 *
 * Version differences (3.11 here, 3.12 on the GPU machine; torch 1.13 and
 * 2.x are handled in the harness) are confined to this file: PyConfig is
 * used on both, and safe_path only exists from 3.11 on.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "evaluator/evaluator.h"
#include "evaluator/evaluator_int.h"
#include "evaluator/pysrc.h"
#include "sandbox/sandbox.h"

#ifndef STARK_PYTHON
#define STARK_PYTHON "/usr/bin/python3"
#endif

/* The harness, embedded by pysrc.S and executed in the order of pysrc.h. */
#define PYSRC_DECLARE(name) extern const char stark_py_##name##_start[], stark_py_##name##_end[];
STARK_HARNESS(PYSRC_DECLARE)
#undef PYSRC_DECLARE

static const struct {
	const char *name;
	const char *start;
	const char *end;
} harness[] = {
#define PYSRC_ENTRY(name) {"stark_" #name, stark_py_##name##_start, stark_py_##name##_end},
	STARK_HARNESS(PYSRC_ENTRY)
#undef PYSRC_ENTRY
};

/* Init-once process state. */
static struct evpy_opts opts;
static bool started;
/* The master seed, and a second one for an evaluation judged again in
   this process (stark_referee._again_alone): drawn here, independent of
   the first, so a seed that lingers in the referee's memory -- which the
   second evaluation's workers are forked with -- tells nothing of it. */
static uint64_t secret[2];
static int secret_n;            /* seeds held: secret[0..secret_n-1] */
static int secret_taken;        /* of them, taken by secret_seed() */

void evpy_set_secret(uint64_t seed)
{
	secret[0] = seed;
	secret_n = 1;
	secret_taken = 0;
	if (getrandom(&secret[1], sizeof(secret[1]), 0) == (ssize_t)sizeof(secret[1]))
		secret_n = 2;
}

static void wipe_secret(void)
{
	explicit_bzero(secret, sizeof(secret));
	secret_n = secret_taken = 0;
}

/* ---- _stark ---------------------------------------------------------- */

static void close_range_or_loop(unsigned lo, unsigned hi)
{
	if (lo > hi)
		return;
#ifdef SYS_close_range
	if (syscall(SYS_close_range, lo, hi, 0) == 0)
		return;
#endif
	long max = sysconf(_SC_OPEN_MAX);

	for (long fd = lo; fd <= (long)hi && fd < max; fd++)
		close((int)fd);
}

/* The child's first steps, before any Python of the worker runs.  keep[]:
   the descriptors that survive besides stdio, ascending. */
static void worker_child_setup(const int *keep, int nkeep, pid_t referee)
{
	unsigned lo = 3;

	wipe_secret();
	/* Die with the referee; if it is already gone, go now. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != referee)
		_exit(70);
	/* Own process group, so the referee can stop and kill the worker
	   together with whatever it spawns. */
	(void)setpgid(0, 0);
	/* A fault in candidate code kills the worker with the true signal,
	   which the referee names; a sanitizer's handlers would turn it into
	   an abort. */
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	signal(SIGFPE, SIG_DFL);
	signal(SIGILL, SIG_DFL);
	/* Only stdio, this worker's socket, the output window and its crash
	   memfd survive: the result channel (fd 3), the GPU lock (fd 4) and
	   the other workers' sockets and memfds are closed. */
	for (int i = 0; i < nkeep; i++) {
		close_range_or_loop(lo, (unsigned)keep[i] - 1);
		lo = (unsigned)keep[i] + 1;
	}
	close_range_or_loop(lo, ~0u);
}

/* fork_worker(sock, window=-1, crash=-1): sock is the worker's socket,
   window an optional second descriptor it keeps (the output window's
   memfd), crash an optional third (the memfd its fault handler writes its
   Python frames to when a fatal signal ends it). */
static PyObject *py_fork_worker(PyObject *self, PyObject *args)
{
	pid_t pid, referee = getpid();
	int keep[3], nkeep = 0, sock, window = -1, crash = -1;

	(void)self;
	if (!PyArg_ParseTuple(args, "i|ii", &sock, &window, &crash))
		return NULL;
	if (sock <= EVAL_FD_RESULT || (window >= 0 && window <= EVAL_FD_RESULT) ||
	    (crash >= 0 && crash <= EVAL_FD_RESULT) || window == sock ||
	    (crash >= 0 && (crash == sock || crash == window))) {
		PyErr_SetString(PyExc_ValueError,
				"fork_worker: the worker's descriptors must be distinct and above fd 3, "
				"the result channel");
		return NULL;
	}
	/* Ascending, as worker_child_setup closes the gaps between them. */
	keep[nkeep++] = sock;
	if (window >= 0)
		keep[nkeep++] = window;
	if (crash >= 0)
		keep[nkeep++] = crash;
	for (int i = 1; i < nkeep; i++)
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];

			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	PyOS_BeforeFork();
	pid = fork();
	if (pid == 0) {
		PyOS_AfterFork_Child();
		worker_child_setup(keep, nkeep, referee);
		return PyLong_FromLong(0);
	}
	PyOS_AfterFork_Parent();
	if (pid < 0)
		return PyErr_SetFromErrno(PyExc_OSError);
	return PyLong_FromLong((long)pid);
}

static PyObject *py_secret_seed(PyObject *self, PyObject *noargs)
{
	PyObject *v;

	(void)self;
	(void)noargs;
	if (secret_taken >= secret_n) {
		PyErr_SetString(PyExc_RuntimeError, "secret_seed: the seeds were already taken");
		return NULL;
	}
	v = PyLong_FromUnsignedLongLong((unsigned long long)secret[secret_taken]);
	explicit_bzero(&secret[secret_taken], sizeof(secret[0]));
	if (++secret_taken == secret_n)
		wipe_secret();
	return v;
}

static PyObject *py_narrow(PyObject *self, PyObject *noargs)
{
	(void)self;
	(void)noargs;
	if (!opts.jailed)
		Py_RETURN_FALSE;
	if (sandbox_narrow() < 0) {
		PyErr_SetString(PyExc_OSError, "narrow: installing the sandbox's narrow seccomp filter failed");
		return NULL;
	}
	Py_RETURN_TRUE;
}

#define EXEC_PATHS_MAX 64

/* restrict_exec(paths): sandbox_restrict_exec; returns the number of paths
 * skipped (absent); raises OSError naming the step where it failed. */
static PyObject *py_restrict_exec(PyObject *self, PyObject *arg)
{
	const char *paths[EXEC_PATHS_MAX + 1];
	PyObject *seq = PySequence_Fast(arg, "restrict_exec: a list of paths");
	char err[256] = "";
	size_t skipped = 0;
	Py_ssize_t n;
	int rc;

	(void)self;
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n > EXEC_PATHS_MAX) {
		Py_DECREF(seq);
		PyErr_SetString(PyExc_ValueError, "restrict_exec: too many paths");
		return NULL;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		paths[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
		if (!paths[i]) {
			Py_DECREF(seq);
			return NULL;
		}
	}
	paths[n] = NULL;
	rc = sandbox_restrict_exec(paths, &skipped, err, sizeof(err));
	Py_DECREF(seq);
	if (rc) {
		PyErr_Format(PyExc_OSError, "%s%s", err,
			     rc == ST_EDENIED ? " (this kernel has no Landlock)" : "");
		return NULL;
	}
	return PyLong_FromSize_t(skipped);
}

static PyObject *py_set_dumpable(PyObject *self, PyObject *arg)
{
	int on = PyObject_IsTrue(arg);

	(void)self;
	if (on < 0)
		return NULL;
	if (prctl(PR_SET_DUMPABLE, on ? 1 : 0) < 0)
		return PyErr_SetFromErrno(PyExc_OSError);
	Py_RETURN_NONE;
}

static PyObject *py_jailed(PyObject *self, PyObject *noargs)
{
	(void)self;
	(void)noargs;
	return PyBool_FromLong(opts.jailed);
}

static PyObject *py_start_ns(PyObject *self, PyObject *noargs)
{
	(void)self;
	(void)noargs;
	return PyLong_FromUnsignedLongLong((unsigned long long)opts.start_ns);
}

static PyObject *py_limits(PyObject *self, PyObject *noargs)
{
	(void)self;
	(void)noargs;
	return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n}", "message_max",
			     (Py_ssize_t)PROTO_MESSAGE_MAX, "log_max", (Py_ssize_t)PROTO_LOG_MAX,
			     "flags_max", (Py_ssize_t)PROTO_FLAGS_MAX, "env_max",
			     (Py_ssize_t)PROTO_ENV_MAX, "env_val_max", (Py_ssize_t)PROTO_ENV_VAL_MAX,
			     "name_max", (Py_ssize_t)PROTO_NAME_MAX);
}

/* mt_rand(key, left, next, out) -> (left, next): torch.rand()'s floats
   into the writable buffer out (eval_mt_rand), from the engine state key (a
   writable buffer of its 624 words, updated) and torch's counters; the GIL
   is let go while the numbers are made. */
static PyObject *py_mt_rand(PyObject *self, PyObject *args)
{
	Py_buffer key, out;
	int left;
	unsigned int next;
	int32_t l;
	uint32_t nx;
	int rc;

	(void)self;
	if (!PyArg_ParseTuple(args, "w*iIw*", &key, &left, &next, &out))
		return NULL;
	if (key.len != (Py_ssize_t)(EVAL_MT_WORDS * sizeof(uint32_t)) ||
	    ((uintptr_t)key.buf % _Alignof(uint32_t)) || ((uintptr_t)out.buf % _Alignof(float)) ||
	    out.len % (Py_ssize_t)sizeof(float)) {
		PyBuffer_Release(&key);
		PyBuffer_Release(&out);
		PyErr_SetString(PyExc_ValueError,
				"mt_rand: key must be 624 aligned 32-bit words and out whole aligned floats");
		return NULL;
	}
	l = left;
	nx = next;
	Py_BEGIN_ALLOW_THREADS
	rc = eval_mt_rand(key.buf, &l, &nx, out.buf, (size_t)out.len / sizeof(float));
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&key);
	PyBuffer_Release(&out);
	if (rc < 0) {
		PyErr_Format(PyExc_ValueError, "mt_rand: left %d and next %u are not a state of the engine",
			     left, next);
		return NULL;
	}
	return Py_BuildValue("(iI)", (int)l, (unsigned int)nx);
}

static PyMethodDef stark_methods[] = {
	{"fork_worker", py_fork_worker, METH_VARARGS,
	 "fork a worker keeping its socket (and window, crash memfd)"},
	{"secret_seed", py_secret_seed, METH_NOARGS, "the master seed, then a second one, each once"},
	{"narrow", py_narrow, METH_NOARGS, "install the narrow filter when jailed"},
	{"set_dumpable", py_set_dumpable, METH_O, "prctl(PR_SET_DUMPABLE)"},
	{"restrict_exec", py_restrict_exec, METH_O, "Landlock: only these files may be exec'd"},
	{"jailed", py_jailed, METH_NOARGS, "whether the evaluator runs in a run jail"},
	{"start_ns", py_start_ns, METH_NOARGS, "monotonic start time of the program"},
	{"limits", py_limits, METH_NOARGS, "caps of the result fields"},
	{"mt_rand", py_mt_rand, METH_VARARGS, "torch.rand()'s CPU floats from its engine's state"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef stark_module = {
	PyModuleDef_HEAD_INIT, "_stark", "privileged primitives of the STARK evaluator", -1,
	stark_methods, NULL, NULL, NULL, NULL,
};

static PyObject *stark_module_init(void)
{
	return PyModule_Create(&stark_module);
}

/* ---- start-up -------------------------------------------------------- */

/* Writes the pending Python exception (with traceback) into out. */
static void exception_text(struct dbuf *out)
{
	PyObject *type, *value, *tb, *mod = NULL, *lines = NULL, *text = NULL, *sep = NULL;
	const char *s;

	PyErr_Fetch(&type, &value, &tb);
	if (!type)
		goto out_plain;
	PyErr_NormalizeException(&type, &value, &tb);
	mod = PyImport_ImportModule("traceback");
	if (mod)
		lines = PyObject_CallMethod(mod, "format_exception", "OOO", type,
					    value ? value : Py_None, tb ? tb : Py_None);
	sep = PyUnicode_FromString("");
	if (lines && sep)
		text = PyUnicode_Join(sep, lines);
	if (text && (s = PyUnicode_AsUTF8(text))) {
		dbuf_append_trunc(out, s, strlen(s));
		goto out_free;
	}
	PyErr_Clear();
	if (value && (text = PyObject_Str(value)) && (s = PyUnicode_AsUTF8(text))) {
		dbuf_append_trunc(out, s, strlen(s));
		goto out_free;
	}
out_plain:
	PyErr_Clear();
	dbuf_append_trunc(out, "unknown python error", 20);
out_free:
	Py_XDECREF(text);
	Py_XDECREF(sep);
	Py_XDECREF(lines);
	Py_XDECREF(mod);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
}

static int load_harness(char *err, size_t errlen)
{
	char fname[64];

	for (size_t i = 0; i < ST_ARRAY_LEN(harness); i++) {
		PyObject *code, *mod, *src;
		int rc;

		snprintf(fname, sizeof(fname), "<stark-eval>/%s.py", harness[i].name);
		code = Py_CompileStringExFlags(harness[i].start, fname, Py_file_input, NULL, 0);
		mod = code ? PyImport_ExecCodeModuleEx(harness[i].name, code, fname) : NULL;
		Py_XDECREF(code);
		if (!mod) {
			struct dbuf tb;

			dbuf_init(&tb, 4096);
			exception_text(&tb);
			snprintf(err, errlen, "harness module %s does not load: %s",
				 harness[i].name, dbuf_str(&tb));
			dbuf_release(&tb);
			return ST_EIO;
		}
		/* A module's own text, for the one that is also run as a
		   program (stark_nvcc, written into build folders). */
		src = PyUnicode_DecodeUTF8(harness[i].start,
					   harness[i].end - harness[i].start, "strict");
		rc = src ? PyObject_SetAttrString(mod, "__stark_source__", src) : -1;
		Py_XDECREF(src);
		Py_DECREF(mod);
		if (rc < 0) {
			PyErr_Clear();
			snprintf(err, errlen, "harness module %s: its text is not kept",
				 harness[i].name);
			return ST_EIO;
		}
	}
	return 0;
}

int evpy_init(const struct evpy_opts *o, char *err, size_t errlen)
{
	PyConfig config;
	PyStatus st;
	char *argv[] = {(char *)EVAL_PROGRAM, NULL};

	if (started) {
		opts = *o; /* a process forked from one that started it */
		return 0;
	}
	opts = *o;
	if (PyImport_AppendInittab("_stark", stark_module_init) < 0) {
		snprintf(err, errlen, "python: cannot register the _stark module");
		return ST_EIO;
	}
	PyConfig_InitPythonConfig(&config);
	/* The environment does not steer the interpreter (PYTHONPATH and
	   friends); no user site, no bytecode files, no argv parsing. */
	config.use_environment = 0;
	config.user_site_directory = 0;
	config.write_bytecode = 0;
	config.parse_argv = 0;
	config.install_signal_handlers = 1; /* SIGPIPE ignored: EPIPE instead */
#if PY_VERSION_HEX >= 0x030B0000
	config.safe_path = 1;
#endif
	st = PyConfig_SetBytesString(&config, &config.program_name, STARK_PYTHON);
	if (!PyStatus_Exception(st))
		st = PyConfig_SetBytesString(&config, &config.executable, STARK_PYTHON);
	if (!PyStatus_Exception(st))
		st = PyConfig_SetBytesArgv(&config, 1, argv);
	if (!PyStatus_Exception(st))
		st = Py_InitializeFromConfig(&config);
	PyConfig_Clear(&config);
	if (PyStatus_Exception(st)) {
		snprintf(err, errlen, "python: interpreter %s does not start: %s", STARK_PYTHON,
			 st.err_msg ? st.err_msg : "unknown error");
		return ST_EIO;
	}
	started = true;
	return load_harness(err, errlen);
}

/* ---- the zygote's forks ----------------------------------------------- */

/* Flushes sys.stdout and sys.stderr, and C's streams, before a fork. */
static void flush_streams(void)
{
	static const char *const names[] = {"stdout", "stderr"};

	for (size_t i = 0; started && i < ST_ARRAY_LEN(names); i++) {
		PyObject *f = PySys_GetObject(names[i]), *r; /* borrowed */

		if (!f || f == Py_None)
			continue;
		r = PyObject_CallMethod(f, "flush", NULL);
		if (!r)
			PyErr_Clear();
		Py_XDECREF(r);
	}
	fflush(NULL);
}

void evpy_before_fork(void)
{
	flush_streams();
	if (started)
		PyOS_BeforeFork();
}

void evpy_after_fork_parent(void)
{
	if (started)
		PyOS_AfterFork_Parent();
}

void evpy_after_fork_child(void)
{
	if (started)
		PyOS_AfterFork_Child();
}

pid_t evpy_fork(void)
{
	pid_t pid;

	evpy_before_fork();
	pid = fork();
	if (pid == 0)
		evpy_after_fork_child();
	else
		evpy_after_fork_parent();
	return pid;
}

/* True when torch is imported and its CUDA runtime initialized. */
static int cuda_initialized(void)
{
	PyObject *mods = PyImport_GetModuleDict(), *cuda, *r; /* borrowed */
	int on;

	if (!mods || !PyDict_GetItemString(mods, "torch"))
		return 0;
	cuda = PyImport_ImportModule("torch.cuda");
	r = cuda ? PyObject_CallMethod(cuda, "is_initialized", NULL) : NULL;
	on = r ? PyObject_IsTrue(r) : -1;
	Py_XDECREF(r);
	Py_XDECREF(cuda);
	if (on < 0)
		PyErr_Clear();
	return on;
}

int evpy_prewarm(char *err, size_t errlen)
{
	PyObject *mod, *fn, *r = NULL;
	struct dbuf tb;
	int rc = 0;

	err[0] = '\0';
	if (!started)
		return ST_EINVAL;
	mod = PyImport_ImportModule("stark_referee");
	fn = mod ? PyObject_GetAttrString(mod, "prewarm") : NULL;
	if (!fn) {
		PyErr_Clear(); /* a harness without prewarm(): nothing to do */
	} else if (!(r = PyObject_CallNoArgs(fn))) {
		dbuf_init(&tb, 4096);
		exception_text(&tb);
		snprintf(err, errlen, "stark_referee.prewarm() raised: %s", dbuf_str(&tb));
		dbuf_release(&tb);
		rc = ST_EIO;
	}
	Py_XDECREF(r);
	Py_XDECREF(fn);
	Py_XDECREF(mod);
	flush_streams();
	/* A CUDA context made here would be unusable in every forked
	   evaluation (CUDA does not survive fork): fail them all, loudly. */
	if (cuda_initialized() != 0) {
		snprintf(err, errlen, "the zygote's start-up initialized CUDA (stark_referee.prewarm?), which no forked evaluation can use");
		rc = ST_EDENIED;
	}
	return rc;
}

/* ---- request -> dict ------------------------------------------------- */

/* Sets d[key] = v, taking the reference to v; -1 when v is NULL or on error. */
static int put(PyObject *d, const char *key, PyObject *v)
{
	int rc;

	if (!v)
		return -1;
	rc = PyDict_SetItemString(d, key, v);
	Py_DECREF(v);
	return rc;
}

static PyObject *text(const char *s)
{
	return PyUnicode_DecodeUTF8(s ? s : "", s ? (Py_ssize_t)strlen(s) : 0, "replace");
}

static PyObject *source(const char *s, size_t len)
{
	if (!s)
		return PyBytes_FromStringAndSize("", 0);
	return PyBytes_FromStringAndSize(s, (Py_ssize_t)(len ? len : strlen(s)));
}

static const char *stage_name(enum proto_stage s)
{
	switch (s) {
	case PROTO_STAGE_COMPILE: return "compile";
	case PROTO_STAGE_RUN: return "run";
	case PROTO_STAGE_ALL: return "all";
	}
	return "all";
}

/* The request as the harness sees it: everything but the secret seed. */
static PyObject *request_dict(const struct proto_request *rq)
{
	PyObject *d = PyDict_New();

	if (!d)
		return NULL;
	if (put(d, "id", text(rq->id)) || put(d, "stage", text(stage_name(rq->stage))) ||
	    put(d, "device", text(rq->device)) || put(d, "format", text(rq->format)) ||
	    put(d, "problem_name", text(rq->problem_name)) ||
	    put(d, "problem_src", source(rq->problem_src, rq->problem_len)) ||
	    put(d, "solution_name", text(rq->solution_name)) ||
	    put(d, "solution_src", source(rq->solution_src, rq->solution_len)) ||
	    put(d, "cache_dir", text(rq->cache_dir)) ||
	    put(d, "build_dir", text(rq->build_dir)) ||
	    put(d, "jit_dir", text(rq->jit_dir)) ||
	    put(d, "trials", PyLong_FromUnsignedLong(rq->trials)) ||
	    put(d, "kb_trials", PyLong_FromUnsignedLong(rq->kb_trials)) ||
	    put(d, "atol32", PyFloat_FromDouble(rq->tol_fp32.atol)) ||
	    put(d, "rtol32", PyFloat_FromDouble(rq->tol_fp32.rtol)) ||
	    put(d, "atol16", PyFloat_FromDouble(rq->tol_fp16.atol)) ||
	    put(d, "rtol16", PyFloat_FromDouble(rq->tol_fp16.rtol)) ||
	    put(d, "timing", PyBool_FromLong(rq->timing)) ||
	    put(d, "warmup", PyLong_FromUnsignedLong(rq->warmup)) ||
	    put(d, "min_reps", PyLong_FromUnsignedLong(rq->min_reps)) ||
	    put(d, "max_reps", PyLong_FromUnsignedLong(rq->max_reps)) ||
	    put(d, "max_time_ms", PyLong_FromUnsignedLong(rq->max_time_ms)) ||
	    put(d, "target_rse", PyFloat_FromDouble(rq->target_rse)) ||
	    put(d, "placements", PyLong_FromUnsignedLong(rq->placements)) ||
	    put(d, "l2_flush", PyBool_FromLong(rq->l2_flush)) ||
	    put(d, "host_mem_mib", PyLong_FromUnsignedLong(rq->host_mem_mib)) ||
	    put(d, "wall_ms", PyLong_FromUnsignedLong(rq->wall_ms)) ||
	    put(d, "queue_ms", PyLong_FromUnsignedLong(rq->queue_ms)) ||
	    put(d, "verdict", text(rq->verdict)) ||
	    put(d, "language", text(rq->language)) ||
	    put(d, "precision", text(rq->precision)) ||
	    put(d, "baseline", text(rq->baseline && *rq->baseline ? rq->baseline : "eager")) ||
	    put(d, "plan", text(rq->plan)) ||
	    put(d, "jit_exec", PyBool_FromLong(proto_request_jit_exec(rq))) ||
	    put(d, "run_exec", PyBool_FromLong(proto_request_run_exec(rq)))) {
		Py_DECREF(d);
		return NULL;
	}
	return d;
}

/* ---- dict -> result -------------------------------------------------- */

enum rkind { R_STATUS, R_MESSAGE, R_LOG, R_STR, R_U32, R_DOUBLE, R_STAGES, R_FLAGS, R_ENV };

static const struct rfield {
	const char *name;
	enum rkind kind;
	size_t off;   /* R_STR, R_U32, R_DOUBLE: offset in struct proto_result */
	uint32_t max; /* R_U32: inclusive cap; R_STR: bytes kept */
} rfields[] = {
	{"status", R_STATUS, 0, 0},
	{"message", R_MESSAGE, 0, 0},
	{"log", R_LOG, 0, 0},
	{"first_bad", R_STR, offsetof(struct proto_result, first_bad), PROTO_NAME_MAX},
	{"verdict", R_STR, offsetof(struct proto_result, verdict), PROTO_NAME_MAX},
	{"stark_status", R_STR, offsetof(struct proto_result, stark_status), PROTO_NAME_MAX},
	{"stark_reason", R_STR, offsetof(struct proto_result, stark_reason), PROTO_REASON_MAX},
	{"kb_status", R_STR, offsetof(struct proto_result, kb_status), PROTO_NAME_MAX},
	{"kb_reason", R_STR, offsetof(struct proto_result, kb_reason), PROTO_REASON_MAX},
	{"kb_trials_run", R_U32, offsetof(struct proto_result, kb_trials_run), PROTO_TRIALS_MAX},
	{"kb_trials_passed", R_U32, offsetof(struct proto_result, kb_trials_passed),
	 PROTO_TRIALS_MAX},
	{"kb_max_diff", R_DOUBLE, offsetof(struct proto_result, kb_max_diff), 0},
	{"trials_run", R_U32, offsetof(struct proto_result, trials_run), PROTO_TRIALS_MAX},
	{"trials_passed", R_U32, offsetof(struct proto_result, trials_passed), PROTO_TRIALS_MAX},
	{"reps", R_U32, offsetof(struct proto_result, reps), PROTO_REPS_MAX},
	{"max_abs_err", R_DOUBLE, offsetof(struct proto_result, max_abs_err), 0},
	{"max_rel_err", R_DOUBLE, offsetof(struct proto_result, max_rel_err), 0},
	{"runtime_us", R_DOUBLE, offsetof(struct proto_result, runtime_us), 0},
	{"runtime_lo_us", R_DOUBLE, offsetof(struct proto_result, runtime_lo_us), 0},
	{"runtime_hi_us", R_DOUBLE, offsetof(struct proto_result, runtime_hi_us), 0},
	{"ref_runtime_us", R_DOUBLE, offsetof(struct proto_result, ref_runtime_us), 0},
	{"ref_lo_us", R_DOUBLE, offsetof(struct proto_result, ref_lo_us), 0},
	{"ref_hi_us", R_DOUBLE, offsetof(struct proto_result, ref_hi_us), 0},
	{"speedup", R_DOUBLE, offsetof(struct proto_result, speedup), 0},
	{"ref_compile_us", R_DOUBLE, offsetof(struct proto_result, ref_compile_us), 0},
	{"ref_compile_lo_us", R_DOUBLE, offsetof(struct proto_result, ref_compile_lo_us), 0},
	{"ref_compile_hi_us", R_DOUBLE, offsetof(struct proto_result, ref_compile_hi_us), 0},
	{"speedup_compile", R_DOUBLE, offsetof(struct proto_result, speedup_compile), 0},
	{"baseline_compile_error", R_STR, offsetof(struct proto_result, baseline_compile_error),
	 PROTO_REASON_MAX},
	{"stage_ms", R_STAGES, 0, 0},
	{"flags", R_FLAGS, 0, 0},
	{"env", R_ENV, 0, 0},
};

static const char *const stage_keys[4] = {"startup_ms", "compile_ms", "check_ms", "time_ms"};

/* UTF-8 bytes of a str (invalid code points replaced); new reference. */
static PyObject *utf8_of(PyObject *s)
{
	if (!PyUnicode_Check(s)) {
		PyErr_SetString(PyExc_TypeError, "expected str");
		return NULL;
	}
	return PyUnicode_AsEncodedString(s, "utf-8", "replace");
}

static int get_double(PyObject *v, double *out)
{
	if (!PyFloat_Check(v) && !PyLong_Check(v))
		return ST_EINVAL;
	*out = PyFloat_AsDouble(v);
	if (*out == -1.0 && PyErr_Occurred()) {
		PyErr_Clear();
		return ST_EINVAL;
	}
	return 0;
}

static int set_string_field(char **dst, PyObject *v, size_t max)
{
	PyObject *b = utf8_of(v);
	const char *s;
	size_t n;
	char *copy;

	if (!b) {
		PyErr_Clear();
		return ST_EINVAL;
	}
	s = PyBytes_AS_STRING(b);
	n = strnlen(s, (size_t)PyBytes_GET_SIZE(b));
	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--; /* do not split a UTF-8 sequence */
	}
	copy = strndup(s, n);
	Py_DECREF(b);
	if (!copy)
		return ST_ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

static int conv_stages(PyObject *v, struct proto_result *rs, char *err, size_t errlen)
{
	PyObject *k, *x;
	Py_ssize_t pos = 0;

	if (!PyDict_Check(v)) {
		snprintf(err, errlen, "result field \"stage_ms\": expected a dict");
		return ST_EINVAL;
	}
	while (PyDict_Next(v, &pos, &k, &x)) {
		const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
		size_t i;

		for (i = 0; name && i < ST_ARRAY_LEN(stage_keys); i++)
			if (!strcmp(name, stage_keys[i]))
				break;
		if (!name || i == ST_ARRAY_LEN(stage_keys) || get_double(x, &rs->stage_ms[i])) {
			PyErr_Clear();
			snprintf(err, errlen, "result field \"stage_ms\": bad entry %s",
				 name ? name : "(not a str)");
			return ST_EINVAL;
		}
	}
	return 0;
}

static int conv_flags(PyObject *v, struct proto_result *rs, char *err, size_t errlen)
{
	if (!PyList_Check(v)) {
		snprintf(err, errlen, "result field \"flags\": expected a list");
		return ST_EINVAL;
	}
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
		PyObject *b = utf8_of(PyList_GET_ITEM(v, i));
		int rc;

		if (!b) {
			PyErr_Clear();
			snprintf(err, errlen, "result field \"flags\": entry %zd is not a str", i);
			return ST_EINVAL;
		}
		rc = proto_result_add_flag(rs, PyBytes_AS_STRING(b));
		Py_DECREF(b);
		if (rc) {
			snprintf(err, errlen, "result field \"flags\": entry %zd: %s", i,
				 stark_strerror(rc));
			return rc;
		}
	}
	return 0;
}

static int conv_env(PyObject *v, struct proto_result *rs, char *err, size_t errlen)
{
	PyObject *k, *x;
	Py_ssize_t pos = 0;

	if (!PyDict_Check(v)) {
		snprintf(err, errlen, "result field \"env\": expected a dict");
		return ST_EINVAL;
	}
	while (PyDict_Next(v, &pos, &k, &x)) {
		PyObject *kb = utf8_of(k), *vb = kb ? utf8_of(x) : NULL;
		int rc = ST_EINVAL;

		if (kb && vb)
			rc = proto_result_add_env(rs, PyBytes_AS_STRING(kb), PyBytes_AS_STRING(vb));
		else
			PyErr_Clear();
		if (rc)
			snprintf(err, errlen, "result field \"env\": entry %s: %s",
				 kb ? PyBytes_AS_STRING(kb) : "(not a str)",
				 kb && vb ? stark_strerror(rc) : "expected str to str");
		Py_XDECREF(kb);
		Py_XDECREF(vb);
		if (rc)
			return rc;
	}
	return 0;
}

static int conv_field(const struct rfield *f, PyObject *v, struct proto_result *rs, char *err,
		      size_t errlen)
{
	PyObject *b;
	int rc = 0;

	switch (f->kind) {
	case R_STATUS:
		b = utf8_of(v);
		if (!b || proto_status_parse(PyBytes_AS_STRING(b), &rs->status)) {
			PyErr_Clear();
			snprintf(err, errlen, "result field \"status\": not a status name");
			rc = ST_EINVAL;
		}
		Py_XDECREF(b);
		return rc;
	case R_MESSAGE:
	case R_LOG:
		b = utf8_of(v);
		if (!b) {
			PyErr_Clear();
			snprintf(err, errlen, "result field \"%s\": expected str", f->name);
			return ST_EINVAL;
		}
		if (f->kind == R_MESSAGE)
			rc = proto_result_set_message(rs, "%s", PyBytes_AS_STRING(b));
		else
			rc = proto_result_set_log(rs, PyBytes_AS_STRING(b),
						  strnlen(PyBytes_AS_STRING(b),
							  (size_t)PyBytes_GET_SIZE(b)));
		Py_DECREF(b);
		if (rc)
			snprintf(err, errlen, "result field \"%s\": %s", f->name, stark_strerror(rc));
		return rc;
	case R_STR:
		rc = set_string_field((char **)((char *)rs + f->off), v, f->max);
		if (rc)
			snprintf(err, errlen, "result field \"%s\": expected str", f->name);
		return rc;
	case R_U32: {
		unsigned long long x;

		if (!PyLong_Check(v) || PyBool_Check(v) ||
		    ((x = PyLong_AsUnsignedLongLong(v)) == (unsigned long long)-1 && PyErr_Occurred()) ||
		    x > f->max) {
			PyErr_Clear();
			snprintf(err, errlen, "result field \"%s\": expected an int in 0..%u", f->name,
				 f->max);
			return ST_EINVAL;
		}
		*(uint32_t *)((char *)rs + f->off) = (uint32_t)x;
		return 0;
	}
	case R_DOUBLE:
		if (get_double(v, (double *)((char *)rs + f->off))) {
			snprintf(err, errlen, "result field \"%s\": expected a number", f->name);
			return ST_EINVAL;
		}
		return 0;
	case R_STAGES: return conv_stages(v, rs, err, errlen);
	case R_FLAGS: return conv_flags(v, rs, err, errlen);
	case R_ENV: return conv_env(v, rs, err, errlen);
	}
	return ST_EINVAL;
}

/* Fills rs (initialized) from the harness's dict. */
static int result_from_dict(PyObject *d, struct proto_result *rs, char *err, size_t errlen)
{
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	bool have_status = false;

	if (!PyDict_Check(d)) {
		snprintf(err, errlen, "result: expected a dict, got %s", Py_TYPE(d)->tp_name);
		return ST_EINVAL;
	}
	while (PyDict_Next(d, &pos, &k, &v)) {
		const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
		const struct rfield *f = NULL;
		int rc;

		for (size_t i = 0; name && i < ST_ARRAY_LEN(rfields); i++)
			if (!strcmp(name, rfields[i].name))
				f = &rfields[i];
		if (!f) {
			PyErr_Clear();
			snprintf(err, errlen, "result: unknown field \"%.100s\"",
				 name ? name : "(not a str)");
			return ST_EINVAL;
		}
		rc = conv_field(f, v, rs, err, errlen);
		if (rc)
			return rc;
		have_status |= f->kind == R_STATUS;
	}
	if (!have_status) {
		snprintf(err, errlen, "result: no \"status\"");
		return ST_EINVAL;
	}
	if (rs->trials_passed > rs->trials_run) {
		snprintf(err, errlen, "result: trials_passed exceeds trials_run");
		return ST_EINVAL;
	}
	if (rs->kb_trials_passed > rs->kb_trials_run) {
		snprintf(err, errlen, "result: kb_trials_passed exceeds kb_trials_run");
		return ST_EINVAL;
	}
	return 0;
}

/* Replaces whatever rs holds by an "error" result naming the cause. */
static int internal_error(struct proto_result *rs, const char *id, const char *what,
			  const char *log)
{
	int rc;

	proto_result_release(rs);
	rs->status = PROTO_ST_ERROR;
	rs->id = str_dup(id ? id : "");
	if (!rs->id)
		return ST_ENOMEM;
	rc = proto_result_set_message(rs, "evaluator internal error: %s", what);
	if (!rc && log && *log)
		rc = proto_result_set_log(rs, log, strlen(log));
	return rc;
}

int evpy_evaluate(const struct proto_request *rq, struct proto_result *rs)
{
	PyObject *mod = NULL, *req = NULL, *ret = NULL;
	struct dbuf tb;
	char err[512];
	int rc;

	dbuf_init(&tb, PROTO_LOG_MAX);
	if (!started)
		return internal_error(rs, rq->id, "python is not initialized", NULL);
	mod = PyImport_ImportModule("stark_referee");
	req = mod ? request_dict(rq) : NULL;
	ret = req ? PyObject_CallMethod(mod, "evaluate", "O", req) : NULL;
	if (!ret) {
		exception_text(&tb);
		rc = internal_error(rs, rq->id, "the harness raised an exception (see the log)",
				    dbuf_str(&tb));
		goto out;
	}
	rc = result_from_dict(ret, rs, err, sizeof(err));
	if (rc == ST_ENOMEM)
		goto out;
	if (rc) {
		rc = internal_error(rs, rq->id, err, NULL);
		goto out;
	}
	free(rs->id);
	rs->id = str_dup(rq->id ? rq->id : "");
	rc = rs->id ? 0 : ST_ENOMEM;
out:
	Py_XDECREF(ret);
	Py_XDECREF(req);
	Py_XDECREF(mod);
	dbuf_release(&tb);
	return rc;
}

void evpy_after_result(void)
{
	PyObject *mod, *ret = NULL;

	if (!started)
		return;
	mod = PyImport_ImportModule("stark_referee");
	if (mod)
		ret = PyObject_CallMethod(mod, "after_result", NULL);
	if (!ret) {
		/* Nothing left to report to: the exit reaps what is left. */
		PyErr_Print();
	}
	Py_XDECREF(ret);
	Py_XDECREF(mod);
}

/* ---- test hooks ------------------------------------------------------ */

static PyObject *eval_expr(const struct proto_request *rq, const char *expr)
{
	PyObject *globals = PyDict_New(), *ret = NULL;

	if (!globals)
		return NULL;
	if (PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()))
		goto out;
	for (size_t i = 0; i < ST_ARRAY_LEN(harness); i++)
		if (put(globals, harness[i].name, PyImport_ImportModule(harness[i].name)))
			goto out;
	if (put(globals, "torch", PyImport_ImportModule("torch")))
		goto out;
	if (rq ? put(globals, "req", request_dict(rq)) :
		 PyDict_SetItemString(globals, "req", Py_None))
		goto out;
	ret = PyRun_String(expr, Py_eval_input, globals, globals);
out:
	Py_DECREF(globals);
	return ret;
}

int evpy_eval(const struct proto_request *rq, const char *expr, struct dbuf *out)
{
	PyObject *v, *s = NULL;
	const char *p;

	if (!started)
		return ST_EINVAL;
	v = eval_expr(rq, expr);
	if (v)
		s = PyObject_Str(v);
	Py_XDECREF(v);
	if (!s || !(p = PyUnicode_AsUTF8(s))) {
		Py_XDECREF(s);
		exception_text(out);
		return ST_EINVAL;
	}
	dbuf_append_trunc(out, p, strlen(p));
	Py_DECREF(s);
	return 0;
}

int evpy_doctor(const char *device, struct dbuf *out)
{
	PyObject *mod, *v = NULL;
	const char *p;
	int rc = ST_EINVAL;

	if (!started)
		return ST_EINVAL;
	mod = PyImport_ImportModule("stark_env");
	if (mod)
		v = PyObject_CallMethod(mod, "report_json", "s", device);
	if (v && PyUnicode_Check(v) && (p = PyUnicode_AsUTF8(v)))
		rc = dbuf_puts(out, p);
	else
		exception_text(out);
	Py_XDECREF(v);
	Py_XDECREF(mod);
	return rc;
}

int evpy_result_from_expr(const char *expr, struct proto_result *rs, char *err, size_t errlen)
{
	PyObject *v;
	int rc;

	if (!started) {
		snprintf(err, errlen, "python is not initialized");
		return ST_EINVAL;
	}
	v = eval_expr(NULL, expr);
	if (!v) {
		PyErr_Clear();
		snprintf(err, errlen, "expression raised");
		return ST_EINVAL;
	}
	rc = result_from_dict(v, rs, err, errlen);
	Py_DECREF(v);
	return rc;
}
