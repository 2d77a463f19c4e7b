/*
 * test_evaluator.c -- unit tests for evaluator/: the embedded interpreter
 * and the harness, driven from C.
 *
 *  - result dicts -> proto_result: every field, NaN, strictness (unknown
 *    keys, wrong types, bad status names, caps), trials_passed <= trials_run;
 *  - the request dict the harness sees: every field, sources as bytes, and
 *    never the secret seed;
 *  - pure harness pieces: the median and its confidence interval, the
 *    output comparison (tolerances, NaN and Inf rules, integers), the bound
 *    on a GPU worker's own timings, the roofline floor, the variant input
 *    distribution, input descriptions and output digests, prewarm() for
 *    the zygote, the build cache key, tracebacks without the harness's own
 *    frames, the secret seed taken once;
 *  - whole evaluations in this process (the referee forks its workers from
 *    the test): correct, incorrect with the first bad index, runtime_error
 *    with the traceback, a solution without ModelNew, a bad problem, a
 *    crash with the signal named, an aliasing output rejected, inputs that
 *    are not tensors, a kernel caught by the variant distribution, a
 *    candidate that changes the problem's sizes, a run stage without its
 *    build, timing on the CPU, the GPU lock on fd 4.
 *
 * The interpreter is started once in the parent (an unchecked fixture), so
 * each forked test inherits it, as the evaluator's workers do.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "evaluator/evaluator_int.h"
#include "proto/proto.h"

#define ERRLEN 512

static void start_python(void)
{
	struct evpy_opts o = {.jailed = false, .start_ns = 0};
	char err[ERRLEN];
	int fd;

	/* The referee keeps fd 3 for its result channel, so the workers'
	   sockets must land above it, as in stark-eval: if fd 3 is free (Check
	   may hold it), occupy it. */
	if (fcntl(EVAL_FD_RESULT, F_GETFD) < 0) {
		fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd >= 0 && fd != EVAL_FD_RESULT) {
			dup2(fd, EVAL_FD_RESULT);
			close(fd);
		}
	}
	o.start_ns = clock_mono_ns();
	if (evpy_init(&o, err, sizeof(err))) {
		fprintf(stderr, "test_evaluator: %s\n", err);
		exit(1);
	}
}

/* Evaluates expr (with `req` from rq) and checks str() of it. */
static void expect_eval(const struct proto_request *rq, const char *expr, const char *want)
{
	struct dbuf out;
	int rc;

	dbuf_init(&out, 1 << 20);
	rc = evpy_eval(rq, expr, &out);
	ck_assert_msg(rc == 0, "%s raised: %s", expr, dbuf_str(&out));
	ck_assert_msg(!strcmp(dbuf_str(&out), want), "%s gave '%s', expected '%s'", expr,
		      dbuf_str(&out), want);
	dbuf_release(&out);
}

/* Evaluates expr and checks that it raises with needle in the message. */
static void expect_raises(const char *expr, const char *needle)
{
	struct dbuf out;
	int rc;

	dbuf_init(&out, 1 << 20);
	rc = evpy_eval(NULL, expr, &out);
	ck_assert_msg(rc != 0, "%s did not raise: %s", expr, dbuf_str(&out));
	ck_assert_msg(strstr(dbuf_str(&out), needle), "%s raised '%s', expected '%s'", expr,
		      dbuf_str(&out), needle);
	dbuf_release(&out);
}

/* ---- dict -> result ---- */

START_TEST(result_full)
{
	struct proto_result rs;
	char err[ERRLEN];

	proto_result_init(&rs);
	ck_assert_int_eq(evpy_result_from_expr(
				 "{'status': 'correct', 'message': 'fine', 'log': 'l', 'trials_run': 5,"
				 " 'trials_passed': 5, 'max_abs_err': 0.5, 'max_rel_err': 2,"
				 " 'first_bad': '[1, 2]', 'runtime_us': 10.0, 'runtime_lo_us': 9.0,"
				 " 'runtime_hi_us': 11.0, 'ref_runtime_us': 20.0, 'ref_lo_us': 19.0,"
				 " 'ref_hi_us': 21.0, 'reps': 100, 'speedup': 2.0,"
				 " 'stage_ms': {'startup_ms': 1, 'compile_ms': 2.5, 'check_ms': 3,"
				 " 'time_ms': 4}, 'flags': ['a', 'b'], 'env': {'k': 'v'}}",
				 &rs, err, sizeof(err)),
			 0);
	ck_assert_int_eq(rs.status, PROTO_ST_CORRECT);
	ck_assert_str_eq(rs.message, "fine");
	ck_assert_str_eq(rs.log, "l");
	ck_assert_str_eq(rs.first_bad, "[1, 2]");
	ck_assert_uint_eq(rs.trials_run, 5);
	ck_assert_uint_eq(rs.reps, 100);
	ck_assert(rs.max_rel_err == 2.0 && rs.speedup == 2.0 && rs.stage_ms[1] == 2.5);
	ck_assert_uint_eq(rs.nflags, 2);
	ck_assert_str_eq(rs.flags[1], "b");
	ck_assert_uint_eq(rs.nenv, 1);
	ck_assert_str_eq(rs.env[0].val, "v");
	ck_assert_int_eq(proto_result_check(&rs, err, sizeof(err)), 0);
	proto_result_release(&rs);
}
END_TEST

START_TEST(result_nan_and_defaults)
{
	struct proto_result rs;
	char err[ERRLEN];

	proto_result_init(&rs);
	ck_assert_int_eq(evpy_result_from_expr("{'status': 'timeout', 'speedup': float('nan'),"
					       " 'max_abs_err': float('inf')}",
					       &rs, err, sizeof(err)),
			 0);
	ck_assert_int_eq(rs.status, PROTO_ST_TIMEOUT);
	ck_assert(isnan(rs.speedup) && isinf(rs.max_abs_err) && isnan(rs.runtime_us));
	proto_result_release(&rs);
}
END_TEST

static const char *const bad_results[] = {
	"{'message': 'no status'}",
	"{'status': 'sort of correct'}",
	"{'status': 'correct', 'bogus': 1}",
	"{'status': 'correct', 'trials_run': -1}",
	"{'status': 'correct', 'trials_run': 1.5}",
	"{'status': 'correct', 'trials_run': True}",
	"{'status': 'correct', 'trials_run': 1001}",
	"{'status': 'correct', 'reps': 10**30}",
	"{'status': 'correct', 'speedup': '2'}",
	"{'status': 'correct', 'message': 3}",
	"{'status': 'correct', 'flags': 'a'}",
	"{'status': 'correct', 'flags': [1]}",
	"{'status': 'correct', 'flags': ['']}",
	"{'status': 'correct', 'flags': ['f%d' % i for i in range(40)]}",
	"{'status': 'correct', 'env': {'': 'x'}}",
	"{'status': 'correct', 'env': {'k': 1}}",
	"{'status': 'correct', 'env': ['k']}",
	"{'status': 'correct', 'stage_ms': {'boot_ms': 1}}",
	"{'status': 'correct', 'stage_ms': [1, 2]}",
	"{'status': 'correct', 'trials_run': 1, 'trials_passed': 2}",
	"{1: 'correct'}",
	"['status', 'correct']",
};

START_TEST(result_strict)
{
	struct proto_result rs;
	char err[ERRLEN] = "";

	proto_result_init(&rs);
	ck_assert_msg(evpy_result_from_expr(bad_results[_i], &rs, err, sizeof(err)) != 0,
		      "accepted %s", bad_results[_i]);
	ck_assert_msg(err[0], "no message for %s", bad_results[_i]);
	proto_result_release(&rs);
}
END_TEST

START_TEST(result_caps_and_text)
{
	struct proto_result rs;
	char err[ERRLEN];

	proto_result_init(&rs);
	/* Oversized text is cut, lone surrogates are replaced: what is stored
	   always encodes. */
	ck_assert_int_eq(evpy_result_from_expr("{'status': 'incorrect', 'message': 'm' * 200000,"
					       " 'log': 'x\\ud800y' * 1000000,"
					       " 'first_bad': '[' + '1, ' * 400 + '1]'}",
					       &rs, err, sizeof(err)),
			 0);
	ck_assert_uint_le(strlen(rs.message), PROTO_MESSAGE_MAX);
	ck_assert_uint_le(strlen(rs.log), PROTO_LOG_MAX);
	ck_assert_uint_le(strlen(rs.first_bad), PROTO_NAME_MAX);
	ck_assert_int_eq(proto_result_check(&rs, err, sizeof(err)), 0);
	proto_result_release(&rs);
}
END_TEST

/* ---- request -> dict ---- */

/* An evaluation and the rest of its teardown, as eval_serve_one() runs them. */
static int evaluate_all(const struct proto_request *rq, struct proto_result *rs)
{
	int rc = evpy_evaluate(rq, rs);

	evpy_after_result();
	return rc;
}

static void fill_request(struct proto_request *rq, const char *problem, const char *solution)
{
	proto_request_init(rq);
	rq->id = str_dup("t1");
	rq->device = str_dup("cpu");
	rq->format = str_dup("kernelbench");
	rq->problem_name = str_dup("problem.py");
	rq->solution_name = str_dup("solution.py");
	rq->problem_src = str_dup(problem);
	rq->solution_src = str_dup(solution);
	rq->cache_dir = str_dup("");
	rq->seed = 0x5eed5eed5eedULL;
	rq->trials = 2;
	rq->timing = false;
	rq->wall_ms = 600000; /* counted from the fixture's start */
}

START_TEST(request_dict)
{
	struct proto_request rq;

	fill_request(&rq, "p\xc3\xa9", "s");
	rq.stage = PROTO_STAGE_RUN;
	expect_eval(&rq, "sorted(req)",
		    "['atol16', 'atol32', 'baseline', 'build_dir', 'cache_dir', 'device', 'format', "
		    "'host_mem_mib', 'id', 'jit_dir', 'jit_exec', 'kb_trials', "
		    "'l2_flush', 'language', 'max_reps', 'max_time_ms', 'min_reps', 'placements', 'plan', "
		    "'precision', 'problem_name', 'problem_src', 'queue_ms', 'rtol16', 'rtol32', 'run_exec', "
		    "'solution_name', 'solution_src', 'stage', 'target_rse', 'timing', 'trials', "
		    "'verdict', 'wall_ms', 'warmup']");
	expect_eval(&rq, "'seed' in req or any(str(0x5eed5eed5eed) in repr(v) for v in req.values())",
		    "False");
	expect_eval(&rq, "(req['stage'], req['trials'], req['timing'], req['device'])",
		    "('run', 2, False, 'cpu')");
	expect_eval(&rq, "req['problem_src']", "b'p\\xc3\\xa9'");
	expect_eval(&rq, "(req['atol32'], req['rtol16'], req['wall_ms'], req['queue_ms'])",
		    "(0.0001, 0.01, 600000, 0)");
	expect_eval(&rq, "repr(req['verdict'])", "''"); /* not set: stark decides */
	/* not set: eager, and no exec in the run jail */
	expect_eval(&rq, "(req['baseline'], req['jit_exec'], req['run_exec'])",
		    "('eager', False, False)");
	rq.baseline = strdup("compile");
	expect_eval(&rq, "(req['baseline'], req['jit_exec'], req['run_exec'])",
		    "('compile', False, True)");
	proto_request_release(&rq);
}
END_TEST

/* The compiled reference's loose check of its outputs against the eager
 * ones (stark_compiled.compare_loosely), and what inductor may execute. */
START_TEST(compiled_compare)
{
	expect_eval(NULL,
		    "stark_compiled.compare_loosely(torch.ones(4, 3), torch.ones(4, 3) + 1e-4)",
		    "None");
	/* 16-bit outputs get the looser tolerance */
	expect_eval(NULL,
		    "stark_compiled.compare_loosely((torch.ones(8, dtype=torch.bfloat16),), "
		    "(torch.ones(8, dtype=torch.bfloat16) * 1.03,))",
		    "None");
	expect_eval(NULL,
		    "stark_compiled.compare_loosely(torch.ones(1000), "
		    "torch.cat([torch.ones(997), torch.full((3,), 1.5)]))",
		    "output 0 differs from eager PyTorch's in 3 of 1000 elements beyond "
		    "atol=rtol=0.01 (largest difference 0.5)");
	/* NaN where eager has NaN, the same infinity: equal; a NaN of its own: not */
	expect_eval(NULL,
		    "stark_compiled.compare_loosely(torch.tensor([float('nan'), float('inf'), 1.0]), "
		    "torch.tensor([float('nan'), float('inf'), 1.0]))",
		    "None");
	expect_eval(NULL,
		    "stark_compiled.compare_loosely(torch.tensor([1.0, 2.0]), torch.tensor([1.0, "
		    "float('nan')]))[:39]",
		    "output 0 differs from eager PyTorch's i");
	expect_eval(NULL,
		    "stark_compiled.compare_loosely(torch.zeros(2, 3), torch.zeros(3, 2))",
		    "output 0 is float32[3, 2], eager PyTorch's float32[2, 3]");
	expect_eval(NULL,
		    "stark_compiled.compare_loosely((torch.zeros(2),), (torch.zeros(2), torch.zeros(2)))",
		    "returned 2 outputs, eager PyTorch 1");
	expect_eval(NULL,
		    "stark_compiled.compare_loosely(torch.arange(4), torch.arange(4) + 1)[:40]",
		    "output 0 differs from eager PyTorch's in");
	/* the C++ compiler and what it runs are on the list, a shell is not */
	expect_eval(NULL,
		    "(lambda p: (any(x.endswith(('g++', 'c++', 'clang++')) for x in p), "
		    "any(x.endswith('cc1plus') or x in ('/usr/lib/gcc', '/usr/libexec/gcc') for x in p), "
		    "'/bin/sh' in p, '/usr/bin/python3' in p))(stark_compiled.exec_paths({'PATH': "
		    "'/usr/bin:/bin'}))",
		    "(True, True, False, False)");
	/* and the nvcc PATH finds (inductor asks its version) */
	expect_eval(NULL,
		    "(lambda d: (open(d + '/nvcc', 'w').close(), __import__('os').chmod(d + '/nvcc', 0o755), "
		    "d + '/nvcc' in stark_compiled.exec_paths({'PATH': d + ':/usr/bin:/bin'}), "
		    "__import__('shutil').rmtree(d))[2])(__import__('tempfile').mkdtemp())",
		    "True");
}
END_TEST

/* ---- harness pieces ---- */

START_TEST(median_interval)
{
	expect_eval(NULL, "stark_referee_readings.median_ci([3, 1, 2])[:3]", "(2, 1, 3)");
	expect_eval(NULL, "stark_referee_readings.median_ci(list(range(1, 101)))[:3]", "(50.5, 40, 61)");
	expect_eval(NULL, "round(stark_referee_readings.median_ci([10.0] * 50)[3], 6)", "0.0");
	expect_eval(NULL, "stark_referee_readings.median_ci([])[3]", "inf");
}
END_TEST

START_TEST(compare_rules)
{
	expect_eval(NULL,
		    "stark_tensors.compare_tensor(torch.tensor([1.0, 2.0]), "
		    "torch.tensor([1.00005, 2.0]), 1e-4, 1e-4)['nbad']",
		    "0");
	expect_eval(NULL,
		    "(lambda r: (r['nbad'], r['first'], r['got'], r['want']))("
		    "stark_tensors.compare_tensor(torch.tensor([1.0, 2.5, 3.0]), "
		    "torch.tensor([1.0, 2.0, 3.0]), 1e-4, 1e-4))",
		    "(1, 1, 2.5, 2.0)");
	/* NaN matches only NaN; an infinity only the same infinity. */
	expect_eval(NULL,
		    "stark_tensors.compare_tensor(torch.tensor([float('nan'), float('inf'), 1.0]), "
		    "torch.tensor([float('nan'), float('inf'), 1.0]), 1e-4, 1e-4)['nbad']",
		    "0");
	expect_eval(NULL,
		    "(lambda r: (r['nbad'], r['first'], r['max_abs']))(stark_tensors.compare_tensor("
		    "torch.tensor([1.0, float('nan'), -float('inf')]), "
		    "torch.tensor([1.0, 5.0, float('inf')]), 1e-4, 1e-4))",
		    "(2, 1, inf)");
	expect_eval(NULL,
		    "stark_tensors.compare_tensor(torch.tensor([0.0]), torch.tensor([float('nan')]),"
		    " 1e-4, 1e-4)['nbad']",
		    "1");
	/* Integers are exact; fp16 uses its own tolerance. */
	expect_eval(NULL,
		    "stark_tensors.compare_tensor(torch.tensor([1, 2]), torch.tensor([1, 3]), 1e-4,"
		    " 1e-4)['nbad']",
		    "1");
	expect_eval(NULL,
		    "stark_tensors.compare_tensor(torch.tensor([1.0]).half(), "
		    "torch.tensor([1.005]).half(), 1e-2, 1e-2)['nbad']",
		    "0");
	expect_eval(NULL, "stark_referee_compare._unravel(17, [4, 5])", "[3, 2]");
	/* The memory plan counts the comparison's temporaries: 1 GiB of
	 * outputs against 1 MiB is twice (kept and copied) 1023 MiB more, and
	 * 400 MiB of temporaries (the cap) against 13 MiB (13 per byte). */
	expect_eval(NULL,
		    "(stark_tensors.COMPARE_TEMP_BYTES == stark_memory.COMPARE_TEMP_BYTES, "
		    "stark_memory.phase_bytes({'in': 0, 'out': 1 << 30, 'weights': 0, 'fwd': 0})"
		    "['compare'][0] - stark_memory.phase_bytes({'in': 0, 'out': 1 << 20, 'weights': 0, "
		    "'fwd': 0})['compare'][0] == 2 * 1023 * 2**20 + (400 - 13) * 2**20)",
		    "(True, True)");
	/* float64 outputs: the reference's are left as they were, and the
	 * figures are of the difference (not of its square). */
	expect_eval(NULL,
		    "(lambda w: (lambda r: (r['max_abs'], r['absmax_want'], w.tolist()))("
		    "stark_tensors.compare_tensor(w + 0.5, w, 1e-4, 1e-4)))("
		    "torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))",
		    "(0.5, 3.0, [1.0, 2.0, 3.0])");
	/* Pieces that pass in one reading and pieces judged element by
	 * element give the figures of one pass over the whole. */
	expect_eval(NULL,
		    "(lambda T, g, w: (lambda a, b: [(k, a[k] == b[k] if type(a[k]) is not float else "
		    "abs(a[k] - b[k]) <= 1e-12 * max(abs(b[k]), 1.0)) for k in sorted(b) if "
		    "k in a and not (a[k] == b[k] or abs(a[k] - b[k]) <= 1e-12 * max(abs(b[k]), 1.0))])("
		    "[setattr(T, 'COMPARE_CHUNK', 4), T.compare_tensor(g, w, 1e-4, 1e-4), "
		    "setattr(T, 'COMPARE_CHUNK', 1 << 22)][1], T.compare_tensor(g, w, 1e-4, 1e-4)))("
		    "stark_tensors, torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.5, 7.0, 8.0, float('inf'), 1.0]), "
		    "torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, float('inf'), 1.0]))",
		    "[]");
	expect_eval(NULL,
		    "(lambda r: (r['nbad'], r['first'], r['max_abs'], r['n_fin']))("
		    "[setattr(stark_tensors, 'COMPARE_CHUNK', 4), stark_tensors.compare_tensor("
		    "torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.5, 7.0, 8.0, 9.0]), "
		    "torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]), 1e-4, 1e-4), "
		    "setattr(stark_tensors, 'COMPARE_CHUNK', 1 << 22)][1])",
		    "(1, 5, 0.5, 9)");
}
END_TEST

/* The referee's bound on what a GPU worker claims (judge_claims). */
START_TEST(claims_bound)
{
	/* Honest: walls exceed claims by the same overhead as the reference's. */
	expect_eval(NULL,
		    "(lambda j: (j['believed'], j['cand'][:2], j['o_ref']))(stark_referee_readings.judge_claims("
		    "[140.0, 142.0, 141.0], [100.0, 101.0, 100.5], [160.0] * 3, [240.0, 241.0, 239.0],"
		    " [200.0, 200.5, 199.5]))",
		    "(True, [100.0, 101.0], 40.0)");
	/* Forged event times: the wall clock is believed instead, less the
	   slack every candidate gets (1040 - 40 overhead - 150). */
	expect_eval(NULL,
		    "(lambda j: (j['believed'], j['cand'], 'exceeds' in j['why'], j['slack']))("
		    "stark_referee_readings.judge_claims([1040.0] * 3, [1.0] * 3, [1060.0] * 3,"
		    " [240.0] * 3, [200.0] * 3))",
		    "(False, [850.0, 850.0, 850.0], True, 150.0)");
	/* An honest kernel whose launcher costs the host a little more than
	   the slack is charged that little, not its whole exchange: no jump
	   from 1.00x to 0.25x as the gap crosses the bound. */
	expect_eval(NULL,
		    "(lambda j: (j['believed'], j['cand']))(stark_referee_readings.judge_claims("
		    "[2088.0 + 48.0 + 170.0] * 3, [48.0] * 3, [9000.0] * 3, [2088.0 + 48.0] * 3,"
		    " [48.0] * 3))",
		    "(False, [68.0, 68.0, 68.0])");
	/* A forger gains nothing by it: whatever it claims for 1000 us of work,
	   it is charged no less than the least claim the bound believes. */
	expect_eval(NULL,
		    "(lambda js: (min(stark_referee_readings.median(j['cand']) for c, j in js),"
		    " min(c for c, j in js if j['believed'])))("
		    "[(c, stark_referee_readings.judge_claims([1040.0] * 3, [float(c)] * 3, [1060.0] * 3,"
		    " [240.0] * 3, [200.0] * 3)) for c in range(0, 1001, 5)])",
		    "(800.0, 800)");
	/* A gap within the slack (CLAIM_SLACK_US, or CLAIM_SLACK_FRAC of the
	   claim) is believed, one beyond it is not. */
	expect_eval(NULL,
		    "(lambda s: [stark_referee_readings.judge_claims([1040.0 + s * k] * 3, [1000.0] * 3,"
		    " [9000.0] * 3, [240.0] * 3, [200.0] * 3)['believed'] for k in (0.9, 1.1)])"
		    "(max(stark_referee_readings.CLAIM_SLACK_US,"
		    " stark_referee_readings.CLAIM_SLACK_FRAC * 1000))",
		    "[True, False]");
	expect_eval(NULL,
		    "(lambda s: [stark_referee_readings.judge_claims([40.0 + 10 + s * k] * 3, [10.0] * 3,"
		    " [9000.0] * 3, [240.0] * 3, [200.0] * 3)['believed'] for k in (0.9, 1.1)])"
		    "(max(stark_referee_readings.CLAIM_SLACK_US, stark_referee_readings.CLAIM_SLACK_FRAC * 10))",
		    "[True, False]");
	/* A busy host slows more than half of the candidate's exchanges: the
	   lower quartiles still agree, so an honest claim stands; a forged one
	   under the same load does not. */
	expect_eval(NULL,
		    "[stark_referee_readings.judge_claims([140.0 + b] * 10 + [400.0 + b] * 11, [100.0 + b] * 21,"
		    " [9000.0] * 21, [240.0] * 21, [200.0] * 21)['believed'] for b in (0.0, 900.0)]",
		    "[True, True]");
	expect_eval(NULL,
		    "stark_referee_readings.judge_claims([1040.0] * 10 + [1400.0] * 11, [1.0] * 21,"
		    " [9000.0] * 21, [240.0] * 21, [200.0] * 21)['believed']",
		    "False");
	expect_eval(NULL,
		    "[stark_referee_readings.quantile(x, q) for x, q in (([], 0.5),"
		    " ([3.0, 1.0, 2.0, 4.0], 0.25), ([5.0], 0.25), ([1.0, 2.0], 1.0))]",
		    "[nan, 1.75, 5.0, 2.0]");
	/* Negative, NaN, or longer than the exchange the referee timed: forged. */
	expect_eval(NULL,
		    "[(lambda j: (j['believed'], j['forged']))(stark_referee_readings.judge_claims("
		    "[140.0] * 3, [100.0, c, 100.0], [160.0] * 3, [240.0] * 3, [200.0] * 3))"
		    " for c in (-1.0, float('nan'), 170.0)]",
		    "[(False, True), (False, True), (False, True)]");
	/* A gap alone (host time the claims leave out) is timed by the wall
	   clock but is no proof of forgery. */
	expect_eval(NULL,
		    "(lambda j: (j['believed'], j['forged']))(stark_referee_readings.judge_claims("
		    "[1040.0] * 3, [1.0] * 3, [1060.0] * 3, [240.0] * 3, [200.0] * 3))",
		    "(False, False)");
	/* The reference's events missing: both by the wall clock, no verdict on the claims. */
	expect_eval(NULL,
		    "(lambda j: (j['believed'], j['cand'], j['ref']))(stark_referee_readings.judge_claims("
		    "[140.0], [100.0], [160.0], [240.0], [float('nan')]))",
		    "(True, [140.0], [240.0])");
	/* Calls' claims: the stream's events plus the median guard gap beyond
	   the base; the guard's noise in single calls adds nothing. */
	expect_eval(NULL,
		    "stark_referee_readings.claims_from([{'ev_us': 50, 'guard_us': 65},"
		    " {'ev_us': 40, 'guard_us': 60}, {'ev_us': 45, 'guard_us': 60}], 15.0)",
		    "[50.0, 40.0, 45.0]");
	/* Work left off the stream in most calls counts in every claim. */
	expect_eval(NULL,
		    "stark_referee_readings.claims_from([{'ev_us': 5, 'guard_us': 515},"
		    " {'ev_us': 5, 'guard_us': 515}, {'ev_us': 50, 'guard_us': 65},"
		    " {'ev_us': 'x', 'guard_us': 1}, {}], 15.0)",
		    "[500.0, 500.0, 545.0, nan, nan]");
	/* The base: the reference's own median gap in timed calls, or the
	   timed no-ops' when the reference leaves work off its stream. */
	expect_eval(NULL,
		    "[stark_referee_readings.guard_base([{'ev_us': 50, 'guard_us': 50 + g}] * 3, 12.0)"
		    " for g in (17.0, 200.0)] + [stark_referee_readings.guard_base([], 12.0)]",
		    "[17.0, 12.0, 12.0]");
	/* The candidate's allowance for a slower host: its no-ops' median gap
	   beyond the reference's, never negative, capped, 0 without readings
	   (NaN, missing or non-dict replies give none). */
	expect_eval(NULL,
		    "(lambda n: [stark_referee_readings.guard_host_slack(n(10, 20), n(10, c))"
		    " for c in (38, 15, 900)]"
		    " + [stark_referee_readings.guard_host_slack(n(10, 20),"
		    " [{'ev_us': float('nan'), 'guard_us': 1}, 7, {}]),"
		    " stark_referee_readings.guard_host_slack([], n(10, 30))])"
		    "(lambda e, g: [{'ev_us': e, 'guard_us': e + g}] * 3)",
		    "[18.0, 0.0, 25.0, 0.0, 0.0]");
	/* With that allowance as part of the base, a slow host's gaps add
	   nothing; work off the stream beyond it still counts. */
	expect_eval(NULL,
		    "[stark_referee_readings.claims_from([{'ev_us': 58, 'guard_us': 58 + g}] * 3, 23.6 + 18.0)"
		    " for g in (42.0, 80.0)]",
		    "[[58.0, 58.0, 58.0], [96.4, 96.4, 96.4]]");
	/* Work found off the stream is charged from the floor, not from the
	   base with the allowance: the side-stream kernel of the H100 (stream
	   1.2 us, gap 67.3 us, reference's gap 24.5 us, allowance 25 us, least
	   guard with no work 18 us) is charged 49.3 us, not 19.0 us; an
	   honest model's gaps within the allowance still add nothing. */
	expect_eval(NULL,
		    "[[round(c, 6) for c in stark_referee_readings.claims_from("
		    "[{'ev_us': 1.2, 'guard_us': 1.2 + g}] * 3, 24.5 + 25.0, f)]"
		    " for g, f in ((67.3, 18.0), (67.3, None), (40.0, 18.0))]",
		    "[[50.5, 50.5, 50.5], [19.0, 19.0, 19.0], [1.2, 1.2, 1.2]]");
	/* The floor: the least gap of the reference's no-ops and timed calls,
	   never negative, NaN without readings; a floor above the base (no
	   readings below it) falls back to the base. */
	expect_eval(NULL,
		    "(lambda n: [stark_referee_readings.guard_floor(n(10, 20), n(50, 17), n(5, 30)),"
		    " stark_referee_readings.guard_floor(n(10, -3)),"
		    " str(stark_referee_readings.guard_floor([], [{}])),"
		    " stark_referee_readings.guard_extra(n(5, 60), 20.0, 30.0)])"
		    "(lambda e, g: [{'ev_us': e, 'guard_us': e + g}] * 3)",
		    "[17.0, 0.0, 'nan', 40.0]");
}
END_TEST

/* placement_adjusted: calls on several memory placements are brought to
   the fastest placement's level (each scaled by fastest median / its
   placement's median); placements of one call are not candidates and keep
   their times; one placement, or none with two calls, changes nothing;
   non-finite times are left as they are. */
START_TEST(placement_adjusted)
{
	expect_eval(NULL,
		    "(lambda r: ([round(x, 6) for x in r[0]], sorted(r[1].items())))("
		    "stark_referee_readings.placement_adjusted([10.0, 12.0, 10.0, 12.0, 11.0, 9.0],"
		    " [0, 1, 0, 1, 2, 0]))",
		    "([10.0, 10.0, 10.0, 10.0, 11.0, 9.0], [(0, 10.0), (1, 12.0), (2, 11.0)])");
	expect_eval(NULL,
		    "[stark_referee_readings.placement_adjusted([5.0, 6.0, 7.0], [0, 0, 0])[0],"
		    " stark_referee_readings.placement_adjusted([5.0, 6.0], [0, 1])[0],"
		    " stark_referee_readings.placement_adjusted([5.0, float('inf'), 6.0, 6.0, 5.0],"
		    " [0, 1, 1, 1, 0])[0]]",
		    "[[5.0, 6.0, 7.0], [5.0, 6.0], [5.0, inf, 5.0, 5.0, 5.0]]");
}
END_TEST

/* compare_exact, the float64 recheck: the candidate may be off the exact
   result by the tolerance plus slack times the reference's own largest
   error; beyond that it fails; an infinity the reference overflowed to
   stays the expected value; a float64 run that is not the same
   computation (an error beyond RECHECK_MAX_REL of the magnitude, a value
   that is not finite) gives no second opinion. */
START_TEST(compare_exact_rules)
{
	/* want is 0.01 off the exact 1.0: its error is 0.01, so with slack 4
	   a candidate 0.03 off passes, one 0.05 off does not. */
	expect_eval(NULL,
		    "(lambda w, x: [(r['nbad'], round(r['ref_err'], 6)) for r in ("
		    "stark_tensors.compare_exact(torch.tensor([1.03, 2.0]), w, x, 1e-4, 1e-4, 4.0),"
		    " stark_tensors.compare_exact(torch.tensor([1.05, 2.0]), w, x, 1e-4, 1e-4, 4.0))])("
		    "torch.tensor([1.01, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64))",
		    "[(0, 0.01), (1, 0.01)]");
	/* The reference overflowed where float64 did not: inf stays expected
	   there, and its error is measured over the finite elements. */
	expect_eval(NULL,
		    "(lambda r: (r['nbad'], r['ref_err']))(stark_tensors.compare_exact("
		    "torch.tensor([float('inf'), 1.0]), torch.tensor([float('inf'), 1.0]),"
		    " torch.tensor([1e39, 1.0], dtype=torch.float64), 1e-4, 1e-4, 4.0))",
		    "(0, 0.0)");
	expect_eval(NULL,
		    "[sorted(stark_tensors.compare_exact(torch.tensor([1.0]), torch.tensor([1.0]), x,"
		    " 1e-4, 1e-4, 4.0)) for x in (torch.tensor([1.5], dtype=torch.float64),"
		    " torch.tensor([float('nan')], dtype=torch.float64),"
		    " torch.tensor([1.0, 2.0], dtype=torch.float64))]",
		    "[['error'], ['error'], ['error']]");
	/* A reference 1.2% of the magnitude off its float64 run: rounding
	   in bfloat16 (under 2 of its epsilons), so the recheck is made;
	   not in float32, where the float64 run is taken for another
	   computation. */
	expect_eval(NULL,
		    "[(lambda r: ('ref_err' in r, 'error' in r))(stark_tensors.compare_exact("
		    "w, w, torch.tensor([5.25, 1.0], dtype=torch.float64), 1e-2, 1e-2, 4.0))"
		    " for w in (torch.tensor([5.3125, 1.0], dtype=torch.bfloat16),"
		    " torch.tensor([5.3125, 1.0]))]",
		    "[(True, False), (False, True)]");
	/* exact_error uncapped (a float64 run known to be the same
	   computation, on scaled inputs): the error beyond the cap comes
	   back as a number; a value that is not finite still refuses. */
	expect_eval(NULL,
		    "[(lambda e: e if isinstance(e, float) else sorted(e))(stark_tensors.exact_error("
		    "torch.tensor([1.5, 2.0]), x, 1e-4, capped=c)) for x, c in ("
		    "(torch.tensor([1.0, 2.0], dtype=torch.float64), True),"
		    " (torch.tensor([1.0, 2.0], dtype=torch.float64), False),"
		    " (torch.tensor([float('nan'), 2.0], dtype=torch.float64), False))]",
		    "[['error'], 0.5, ['error']]");
}
END_TEST

/* The scale rule (stark_rules.scale_bad, scale_exact): an output whose
   values all sit under atol passes elementwise as zeros, a constant or a
   half-scaled copy; its RMS error against its own RMS does not.  Honest
   rounding passes; an output that is all zeros, or mostly the reference's
   own rounding noise, has no scale to follow. */
START_TEST(scale_rules)
{
	expect_eval(NULL, "(stark_rules.scale_fraction(1e-4), stark_rules.scale_fraction(1e-2))",
		    "(0.01, 0.25)");
	expect_eval(NULL,
		    "(lambda w: [(lambda r: (r['nbad'], stark_rules.scale_bad(r, 0.01)))("
		    "stark_tensors.compare_tensor(g, w, 1e-4, 1e-4)) for g in (torch.zeros(1000), w * 0.5,"
		    " torch.full((1000,), float(w.mean())), w * (1 + 1e-6), w.double().float())])("
		    "torch.rand(1000, generator=torch.Generator().manual_seed(3)) * 1e-5)",
		    "[(0, True), (0, True), (0, True), (0, False), (0, False)]");
	/* no scale to follow: an all-zero expected output, integers */
	expect_eval(NULL,
		    "[stark_rules.scale_bad(stark_tensors.compare_tensor(g, w, 1e-4, 1e-4), 0.01) for g, w"
		    " in ((torch.full((8,), 1e-6), torch.zeros(8)), (torch.ones(3, dtype=torch.int64),"
		    " torch.ones(3, dtype=torch.int64)))]",
		    "[False, False]");
	/* the figures it judges by */
	expect_eval(NULL,
		    "(lambda r: (r['rms_err'] == r['rms_want'], round(r['rms_want'] / 3.5355339e-05, 6),"
		    " round(r['absmax_want'] / 4e-5, 6)))("
		    "stark_tensors.compare_tensor(torch.tensor([0.0, 0.0]), torch.tensor([3e-5, -4e-5]),"
		    " 1e-4, 1e-4))",
		    "(True, 1.0, 1.0)");
	/* second opinion: zeros against an output that is the reference's
	   rounding noise pass; against a true tiny output they fail */
	expect_eval(NULL,
		    "(lambda g, n: [stark_rules.scale_exact(torch.zeros(64), x.float() + e, x, 0.01,"
		    " 32.0)['bad'] for x, e in ((torch.randn(64, generator=g, dtype=torch.float64)"
		    " * 1e-12, n), (torch.rand(64, generator=g, dtype=torch.float64) * 1e-5,"
		    " n * 1e-6))])(torch.Generator().manual_seed(5), torch.randn(64) * 1e-9)",
		    "[False, True]");
}
END_TEST

/* The precision rule's figures (stark_rules.precision_stats,
   precision_ratios): operands rounded to TF32 land thousands of times
   further from the exact result than float32 rounding and the
   reference's own error; float32 rounding itself does not.  The probe's
   inputs: non-negative floating tensors centred, others unchanged. */
START_TEST(precision_rules)
{
	static const char tf32[] =
		"(lambda t: (t + 0x0FFF + ((t >> 13) & 1)) & ~0x1FFF)";
	char expr[2048];

	snprintf(expr, sizeof(expr),
		 "(lambda g: (lambda a, b: (lambda x, j: [(lambda r: (r[0] > 32, r[1] > 256))("
		 "stark_rules.precision_ratios(stark_rules.precision_stats(c, (a.float() @"
		 " b.float()), x, j))) for c in ((%s(a.float().view(torch.int32)).view(torch.float32)"
		 " @ %s(b.float().view(torch.int32)).view(torch.float32)), (a @ b).float())])("
		 "a @ b, stark_rules.jitter_(a.clone(), g) @ stark_rules.jitter_(b.clone(), g)))("
		 "torch.randn(32, 256, dtype=torch.float64, generator=g).float().double(),"
		 " torch.randn(256, 32, dtype=torch.float64, generator=g).float().double()))("
		 "torch.Generator().manual_seed(7))",
		 tf32, tf32);
	expect_eval(NULL, expr, "[(True, True), (False, False)]");
	/* the floor: an exact reference does not make any rounding look large */
	expect_eval(NULL,
		    "stark_rules.precision_ratios(stark_rules.precision_stats(torch.tensor([1.0 +"
		    " 2**-23]), torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64),"
		    " torch.tensor([1.0], dtype=torch.float64)))",
		    "(2.0, 2.0)");
	expect_eval(NULL,
		    "(lambda t: (float(t.sub(1).abs().max()) <= 2**-24, bool((t != 1).any())))("
		    "stark_rules.jitter_(torch.ones(1000, dtype=torch.float64),"
		    " torch.Generator().manual_seed(1)))",
		    "(True, True)");
	expect_eval(NULL,
		    "(lambda xs: (lambda r: (r[1], abs(float(r[0][0].mean())) < 1e-6, r[0][1] is xs[1],"
		    " r[0][2] is xs[2], r[0][3], float(r[0][4]) == 0.0))(stark_rules.centre_inputs(xs)))"
		    "([torch.rand(100), torch.randn(100), torch.arange(5), 3, torch.tensor(0.5)])",
		    "(1, True, True, True, 3, False)");
	/* float64 inputs are centred into new tensors, the old left alone */
	expect_eval(NULL,
		    "(lambda x: (lambda r: (r[1], r[0][0].tolist(), x.tolist()))("
		    "stark_rules.centre_inputs([x])))(torch.tensor([1.0, 3.0], dtype=torch.float64))",
		    "(1, [-1.0, 1.0], [1.0, 3.0])");
}
END_TEST

/* The candidate's language: declared, or read from imports, decorators
   and includes without running the source; a language this machine lacks
   is an `error` message naming the package (never the candidate's). */
START_TEST(languages)
{
	expect_eval(NULL, "stark_lang.detect(b'import torch\\nfrom torch.utils.cpp_extension import load_inline\\n')",
		    "('cuda', \"no other language's import\")");
	expect_eval(NULL,
		    "stark_lang.detect(b'import torch\\nimport triton\\nimport triton.language as tl\\n"
		    "@triton.jit\\ndef k(x):\\n    pass\\n')",
		    "('triton', 'imports triton (line 2), @triton.jit')");
	expect_eval(NULL,
		    "stark_lang.detect(b'from triton import jit\\n@jit\\ndef k(x):\\n    pass\\n')[0]",
		    "triton");
	/* autotune stacked on jit, called decorators */
	expect_eval(NULL,
		    "stark_lang.detect(b'import triton\\n@triton.autotune(configs=[], key=[])\\n"
		    "@triton.jit\\ndef k(x):\\n    pass\\n')[1]",
		    "imports triton (line 1), @triton.autotune");
	expect_eval(NULL, "stark_lang.detect(b'import cutlass\\nimport cutlass.cute as cute\\n')[0]",
		    "cute");
	expect_eval(NULL, "stark_lang.detect(b'import tilelang\\nimport tilelang.language as T\\n')[0]",
		    "tilelang");
	expect_eval(NULL,
		    "stark_lang.detect(b'src = \"\"\"#include \"kittens.cuh\"\\n\"\"\"\\n')",
		    "('tk', 'includes kittens.cuh')");
	/* a source that does not parse: the text search, then CUDA */
	expect_eval(NULL, "stark_lang.detect(b'import triton\\ndef (:\\n')",
		    "('triton', 'imports triton (source does not parse)')");
	expect_eval(NULL, "stark_lang.detect(b'def (:\\n')[0]", "cuda");
	/* a word in a string or comment is no import */
	expect_eval(NULL, "stark_lang.detect(b'# not triton\\nx = \"import triton\"\\n')[0]", "cuda");
	/* declared wins over the source */
	expect_eval(NULL, "stark_lang.detect(b'import triton\\n', 'cuda')", "('cuda', 'declared')");
	expect_raises("stark_lang.detect(b'', 'rust')", "unknown language");
	/* what is missing: CUDA never; the others name their package */
	expect_eval(NULL, "stark_lang.missing('cuda', 'cpu')", "None");
	expect_eval(NULL, "'needs a GPU' in stark_lang.missing('triton', 'cpu')", "True");
	expect_eval(NULL,
		    "(lambda m: m is None or \"package 'triton'\" in m)(stark_lang.missing('triton', 'cuda'))",
		    "True");
	expect_eval(NULL, "\"package 'stark_no_such_module'\" in (stark_lang.PACKAGES.__setitem__("
		    "'tilelang', ('stark_no_such_module', 'x')) or stark_lang.missing('tilelang', 'cuda'))",
		    "True");
	expect_eval(NULL, "'THUNDERKITTENS_ROOT' in stark_lang.missing('tk', 'cuda', {})", "True");
	expect_eval(NULL,
		    "(lambda d: (__import__('os').makedirs(d + '/include', exist_ok=True),"
		    " open(d + '/include/kittens.cuh', 'w').close(),"
		    " stark_lang.missing('tk', 'cuda', {'THUNDERKITTENS_ROOT': d}))[2])"
		    "(__import__('tempfile').mkdtemp())",
		    "None");
	expect_eval(NULL, "sorted(stark_lang.languages('cpu'))",
		    "['cuda', 'cute', 'tilelang', 'tk', 'triton']");
}
END_TEST

/* A file language's solution is imported from a real file (inspect reads
   it), in the evaluation's folder; Triton's folders point there. */
START_TEST(language_files)
{
	expect_eval(NULL,
		    "(lambda d: (lambda m: (m.__name__, __import__('inspect').getsource(m.f).strip(),"
		    " m.__file__ == d + '/my_sol.py'))(stark_triton.load('x/my-sol.py',"
		    " b'def f():\\n    return 1\\n', d)))(__import__('tempfile').mkdtemp())",
		    "('stark_solution', 'def f():\\n    return 1', True)");
	/* an existing file (a link planted there) is never written through */
	expect_raises("(lambda d: (__import__('os').symlink('/dev/null', d + '/s.py'),"
		      " stark_triton.load('s.py', b'', d)))(__import__('tempfile').mkdtemp())",
		      "File exists");
	expect_eval(NULL,
		    "(lambda d: (lambda c: (c == d + '/cache', __import__('os').environ['TRITON_CACHE_DIR'] == c,"
		    " __import__('os').environ['TRITON_HOME'] == d, 'TRITON_INTERPRET' in __import__('os').environ,"
		    " stark_triton.compiled(c)))(stark_triton.prepare(d)))("
		    "(__import__('os').environ.__setitem__('TRITON_INTERPRET', '1'), __import__('tempfile').mkdtemp())[1])",
		    "(True, True, True, False, 0)");
	expect_eval(NULL,
		    "(lambda c: ([__import__('os').makedirs(c + '/' + k) for k in ('a', 'b')],"
		    " [open(c + p, 'w').close() for p in ('/a/k.json', '/a/k.cubin', '/a/__grp__k.json',"
		    " '/b/j.json', '/x.so')], stark_triton.compiled(c))[2])(__import__('tempfile').mkdtemp())",
		    "2");
	expect_eval(NULL, "stark_triton.compiled('/nonexistent/stark')", "0");
	/* A JIT cache the orchestrator restored is kept where it names this
	   evaluation's key; otherwise (another key, none named: a copy cut
	   short) it is emptied, and a link in its place is removed, never
	   followed. */
	expect_eval(NULL,
		    "(lambda d, os, k: (os.makedirs(d + '/cache/abc'), open(d + '/cache/abc/k.cubin', 'w').write('cu'),"
		    " open(d + '/restored', 'w').write(k), stark_triton.warm(d, k),"
		    " stark_triton.warm(d, 'b' * 64), os.path.exists(d + '/cache'),"
		    " os.makedirs(d + '/cache/x'), os.unlink(d + '/restored'), stark_triton.warm(d, k),"
		    " os.path.exists(d + '/cache'), os.symlink('/etc', d + '/cache'),"
		    " open(d + '/restored', 'w').write(k), stark_triton.warm(d, k), os.path.lexists(d + '/cache'),"
		    " os.path.exists('/etc/passwd'))[3:])"
		    "(__import__('tempfile').mkdtemp(), __import__('os'), 'a' * 64)",
		    "((1, 2), None, False, None, None, None, False, None, 64, None, False, True)");
	/* its key named but no cache beside it: cold, not a failure */
	expect_eval(NULL,
		    "(lambda d: (open(d + '/restored', 'w').write('a' * 64), stark_triton.warm(d, 'a' * 64))[1])"
		    "(__import__('tempfile').mkdtemp())",
		    "None");
	/* The key's fingerprint: the GPU's arch is in it. */
	expect_eval(NULL,
		    "(stark_triton.fingerprint({'STARK_CUDA_ARCH': 'sm_90'}) !="
		    " stark_triton.fingerprint({'STARK_CUDA_ARCH': 'sm_80'}), len(stark_triton.fingerprint()))",
		    "(True, 64)");
	/* With a memo, the count is taken again only where the cache's folder
	   changed: a file added inside a kernel's folder is not seen, a new
	   kernel's folder is; a folder changed just before it was counted is
	   counted again. */
	expect_eval(NULL,
		    "(lambda c, m, os, now: (os.makedirs(c + '/a'), open(c + '/a/k.json', 'w').close(),"
		    " os.utime(c, ns=(now + 10**9, now + 10**9)), stark_triton.compiled(c, m), m['stable'],"
		    " os.utime(c, ns=(now - 10**9, now - 10**9)), stark_triton.compiled(c, m), m['stable'],"
		    " open(c + '/a/j.json', 'w').close(), stark_triton.compiled(c, m),"
		    " stark_triton.compiled(c), os.makedirs(c + '/b'), open(c + '/b/k.json', 'w').close(),"
		    " stark_triton.compiled(c, m))[3:])"
		    "(__import__('tempfile').mkdtemp(), {}, __import__('os'), __import__('time').time_ns())",
		    "(1, False, None, 1, True, None, 1, 2, None, None, 3)");
	/* what Triton's JIT may exec: its tools' folder (when installed), the
	   compiler, the interpreter; never a shell or python */
	expect_eval(NULL,
		    "(lambda p: ('/usr/lib/gcc' in p, '/lib64/ld-linux-x86-64.so.2' in p,"
		    " any(x.endswith('/sh') or 'python' in x for x in p)))(stark_triton.exec_paths("
		    "{'PATH': '/usr/bin:/bin'}))",
		    "(True, True, False)");
	/* Landlock, in a forked child (it cannot be undone): a shell refused,
	   an allowed program run */
	if (access("/usr/bin/true", X_OK) == 0 && access("/bin/sh", X_OK) == 0)
		expect_eval(NULL,
			    "(lambda ns: (exec('import os\\n"
			    "pid = os.fork()\\n"
			    "if pid == 0:\\n"
			    "    try:\\n"
			    "        _stark.restrict_exec([\\'/usr/bin/true\\', \\'/lib64/ld-linux-x86-64.so.2\\',"
			    " \\'/no/such\\'])\\n"
			    "        try:\\n"
			    "            os.execv(\\'/bin/sh\\', [\\'sh\\', \\'-c\\', \\'exit 5\\'])\\n"
			    "        except PermissionError:\\n"
			    "            os.execv(\\'/usr/bin/true\\', [\\'true\\'])\\n"
			    "    finally:\\n"
			    "        os._exit(9)\\n"
			    "rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\\n', ns), ns['rc'])[1])"
			    "({'_stark': __import__('_stark')})",
			    "0");
}
END_TEST

/* KernelBench's verdict, replicated: its trial seeds (torch.manual_seed(42)
   then randint per trial), its input processing (every tensor cast to the
   precision, integers too), torch.allclose with the reference's output
   first (rtol scales the candidate's magnitude), NaN never close, a dtype
   mismatch raising as torch.allclose does. */
/* The fast engine of KernelBench's CPU inputs (mtrand.c) is MT19937 as
 * published: seeded 5489, its 10,000th draw is 4123659995 (the value C++'s
 * std::mt19937 is specified to give), here as torch.rand()'s float (its low
 * 24 bits times 2^-24); the counters move as torch's engine moves them, a
 * draw split anywhere gives the same numbers, and a state torch's engine
 * cannot be in is refused untouched. */
START_TEST(mt_engine)
{
	static uint32_t key[EVAL_MT_WORDS], key2[EVAL_MT_WORDS];
	static float out[10000], out2[10000];
	int32_t left = 1, left2 = 1;
	uint32_t next = 0, next2 = 0;
	size_t at, cut[] = {1, 622, 1, 1, 624, 625, 2000, 6126};
	int i;

	key[0] = 5489;
	for (i = 1; i < EVAL_MT_WORDS; i++)
		key[i] = 1812433253u * (key[i - 1] ^ (key[i - 1] >> 30)) + (uint32_t)i;
	memcpy(key2, key, sizeof(key));
	ck_assert_int_eq(eval_mt_rand(key, &left, &next, out, 10000), 0);
	ck_assert(out[9999] == (float)(4123659995u & 0xffffffu) / 16777216.0f);
	/* 10,000 = 16 blocks of 624 and 16 draws: torch's left and next */
	ck_assert_int_eq(left, 624 - 16 + 1);
	ck_assert_uint_eq(next, 16);
	for (i = 0; i < 10000; i++)
		ck_assert(out[i] >= 0.0f && out[i] < 1.0f);
	for (at = 0, i = 0; i < (int)(sizeof(cut) / sizeof(cut[0])); i++) {
		ck_assert_int_eq(eval_mt_rand(key2, &left2, &next2, out2 + at, cut[i]), 0);
		at += cut[i];
	}
	ck_assert_uint_eq(at, 10000);
	ck_assert(!memcmp(out, out2, sizeof(out)));
	ck_assert(!memcmp(key, key2, sizeof(key)));
	ck_assert(left == left2 && next == next2);
	left2 = 0;
	ck_assert_int_eq(eval_mt_rand(key2, &left2, &next2, out2, 1), ST_EINVAL);
	left2 = 300;
	next2 = 400;
	ck_assert_int_eq(eval_mt_rand(key2, &left2, &next2, out2, 1), ST_EINVAL);
	ck_assert(left2 == 300 && next2 == 400 && !memcmp(key, key2, sizeof(key)));
}
END_TEST

/* stark_rand against this torch, bit for bit: the numbers torch.rand
 * gives under kernelbench_inputs() (the fast engine past MIN_NUMEL) and
 * without, the generator's state after, draws of other distributions and
 * below MIN_NUMEL interleaved, several call forms; the calls it does not
 * take (another dtype, a generator, an out tensor) go to torch's own. */
START_TEST(kb_rand_exact)
{
	expect_eval(NULL, "stark_rand.check()", "");
	expect_eval(NULL,
		    "(lambda torch, S: (lambda draw: (lambda a, b: (a[1] == b[1], "
		    "all(x.dtype == y.dtype and x.shape == y.shape and x.requires_grad == "
		    "y.requires_grad and torch.equal(x.detach().view(torch.int32) if x.dtype == "
		    "torch.float32 else x.detach(), y.detach().view(torch.int32) if y.dtype == "
		    "torch.float32 else y.detach()) for x, y in zip(a[0], b[0]))))(draw(False), "
		    "draw(True)))(lambda fast: (torch.manual_seed(7), (lambda ctx: (ctx.__enter__(), "
		    "[torch.rand(300, 700), torch.rand((1 << 16) + 3), torch.randn(40), "
		    "torch.rand(size=(2, 3, 70000)), torch.rand(100), torch.rand([5000, 31], "
		    "requires_grad=True), torch.rand(70000, dtype=torch.float64), "
		    "torch.rand(1 << 17, dtype=torch.float32, device='cpu'), "
		    "torch.rand(70000, generator=torch.Generator().manual_seed(3))], "
		    "ctx.__exit__(None, None, None))[1])(S.kernelbench_inputs() if fast else "
		    "__import__('contextlib').nullcontext()), bytes(torch.get_rng_state().tolist()))"
		    "[1:]))(torch, stark_rand)",
		    "(True, True)");
	/* what was served: five calls of the fast engine, the rest torch's */
	expect_eval(NULL,
		    "(lambda r: r[r.index(':'):r.index(' in ')])(stark_rand.report())",
		    ": 5 calls, 981611 numbers");
	expect_eval(NULL, "torch.rand is stark_rand._TORCH_RAND", "True");
	expect_raises("__import__('_stark').mt_rand(bytearray(100), 1, 0, bytearray(8))", "624 aligned");
	expect_raises("__import__('_stark').mt_rand(bytearray(2496), 300, 400, bytearray(8))",
		      "not a state of the engine");
}
END_TEST

START_TEST(kb_rules)
{
	expect_eval(NULL,
		    "(torch.manual_seed(42), [torch.randint(0, 2**32 - 1, (1,)).item() for _ in"
		    " range(5)])[1] == stark_rules.kb_trial_seeds()",
		    "True");
	expect_eval(NULL, "len(set(stark_rules.kb_trial_seeds()))", "5");
	expect_eval(NULL,
		    "[(x.dtype, x.tolist()) if isinstance(x, torch.Tensor) else x for x in"
		    " (stark_rules.kb_process_input(v, 'cpu') for v in (torch.tensor([1, 2]),"
		    " torch.tensor([0.5], dtype=torch.float64), 7))]",
		    "[(torch.float32, [1.0, 2.0]), (torch.float32, [0.5]), 7]");
	expect_eval(NULL, "stark_rules.KB_TOLERANCE", "{'fp32': 0.0001, 'fp16': 0.01, 'bf16': 0.01}");
	expect_eval(NULL,
		    "[(x.dtype, x.tolist()) for x in (stark_rules.kb_process_input(v, 'cpu', 'bf16') for v"
		    " in (torch.tensor([1, 2]), torch.tensor([0.5])))]",
		    "[(torch.bfloat16, [1.0, 2.0]), (torch.bfloat16, [0.5])]");
	expect_eval(NULL, "(stark_referee_verdicts.kb_precision({'precision': 'fp16'}),"
		    " stark_referee_verdicts.kb_precision({'precision': ''}),"
		    " stark_referee_verdicts.kb_precision({}))", "('fp16', 'fp32', 'fp32')");
	/* the argument order: allclose(reference, candidate) */
	expect_eval(NULL,
		    "(stark_rules.kb_allclose(torch.tensor([2.0]), torch.tensor([1.0]), 0.0, 0.5)['close'],"
		    " torch.allclose(torch.tensor([1.0]), torch.tensor([2.0]), rtol=0.5, atol=0.0),"
		    " torch.allclose(torch.tensor([2.0]), torch.tensor([1.0]), rtol=0.5, atol=0.0))",
		    "(True, True, False)");
	/* the same answer as torch.allclose on random pairs near the edge */
	expect_eval(NULL,
		    "(lambda g: all(stark_rules.kb_allclose(w + d, w, 1e-4, 1e-4)['close'] =="
		    " torch.allclose(w, w + d, atol=1e-4, rtol=1e-4) for w, d in ((torch.randn(500,"
		    " generator=g), torch.randn(500, generator=g) * s) for s in (1e-5, 5e-5, 1e-4,"
		    " 2e-4, 1e-3) for _ in range(4))))(torch.Generator().manual_seed(2))",
		    "True");
	expect_eval(NULL,
		    "(lambda r: (r['close'], r['nbad'], round(r['used'], 3), r['max_diff'] > 0))("
		    "stark_rules.kb_allclose(torch.tensor([1.00005, 3.0]), torch.tensor([1.0, 3.0]),"
		    " 1e-4, 1e-4))",
		    "(True, 0, 0.25, True)");
	expect_eval(NULL,
		    "(lambda r: (r['close'], r['nbad'], r['first']))(stark_rules.kb_allclose("
		    "torch.tensor([1.0, float('nan')]), torch.tensor([1.0, float('nan')]), 1e-4, 1e-4))",
		    "(False, 1, 1)");
	expect_raises("stark_rules.kb_allclose(torch.ones(2), torch.ones(2, dtype=torch.float64),"
		      " 1e-4, 1e-4)",
		      "did not match");
}
END_TEST

/* The reference's work (stark_referee_checks.work_ops): what it dispatches
   but allocation, views, copies and queries, with the families of heavy
   operators; in-place variants folded; the candidate's share of time. */
START_TEST(op_rules)
{
	expect_eval(NULL,
		    "[stark_referee_checks.op_name(n) for n in ('aten::tanh_', 'aten::add.out',"
		    " 'aten::_softmax', 'cudaLaunchKernel', 'my_ext::gemm', 'aten::_')]",
		    "['aten::tanh', 'aten::add', 'aten::_softmax', None, None, 'aten::_']");
	expect_eval(NULL,
		    "(lambda w: ('aten::linear' in w, 'aten::einsum' in w, 'aten::mm' in w,"
		    " 'aten::empty' in w, 'aten::view' in w, 'aten::add' in w,"
		    " 'aten::conv2d' in w))(stark_referee_checks.work_ops({'aten::matmul', 'aten::mm',"
		    " 'aten::empty', 'aten::view', 'aten::add_', 'aten::copy_'}))",
		    "(True, True, True, False, False, True, False)");
	expect_eval(NULL,
		    "stark_referee_checks.op_shares({'aten::mm': [1, 90.0], 'aten::empty': [2, 5.0],"
		    " 'aten::add_': [1, 5.0], 'cudaMalloc': [1, 1.0]},"
		    " stark_referee_checks.work_ops({'aten::mm', 'aten::add'}), 100.0)",
		    "([('aten::mm', 90.0), ('aten::add', 5.0)], 0.95)");
	expect_eval(NULL,
		    "stark_referee_checks.work_ops({'aten::empty_like', 'aten::copy_', 'aten::reshape'})",
		    "set()");
}
END_TEST

/* speedup_beyond_roofline: the floor from bytes moved and the copy rate. */
START_TEST(roofline)
{
	/* 64 MB in, 64 MB out, 50 MB of L2, 2.5 TB/s copy rate, factor 1.25. */
	expect_eval(NULL, "round(stark_referee_readings.roofline_floor_us(64e6, 64e6, 50e6, 2.5e12), 3)",
		    "24.96");
	/* Outputs that fit in the L2 do not count. */
	expect_eval(NULL, "round(stark_referee_readings.roofline_floor_us(10e6, 40e6, 50e6, 2.5e12), 3)",
		    "3.2");
	expect_eval(NULL, "stark_referee_readings.roofline_floor_us(10e6, 40e6, 50e6, 0.0)", "0.0");
	expect_eval(NULL,
		    "[stark_referee_readings.beyond_roofline(t, 25.0) for t in (10.0, 25.0, 40.0, 0.0, -1.0)]",
		    "[True, False, False, False, False]");
	expect_eval(NULL, "stark_referee_readings.beyond_roofline(1.0, 0.0)", "False");
}
END_TEST

/* The variant input distribution (stark_tensors.vary_inputs). */
START_TEST(variant_rules)
{
	/* [0, 1] tensors, other non-negative ones, integers, bools and values stay. */
	expect_eval(NULL,
		    "(lambda xs: (lambda ys: [a is b for a, b in zip(xs, ys)])("
		    "stark_tensors.vary_inputs(xs, 1234)))([torch.rand(50), torch.rand(50) * 10,"
		    " torch.randint(-5, 5, (50,)), torch.rand(50) > 0.5, 3, -2.5, (1, 2)])",
		    "[True, True, True, True, True, True, True]");
	/* randn-like data is scaled and shifted, the same way for the same seed. */
	expect_eval(NULL,
		    "(lambda x: (lambda a, b: (a is not x, torch.equal(a, b), a.dtype,"
		    " round(float(a.std() / x.std()), 4) == round(stark_tensors.variant_params(7)[0], 4)))("
		    "stark_tensors.vary_inputs([x], 7)[0], stark_tensors.vary_inputs([x], 7)[0]))("
		    "torch.randn(1000))",
		    "(True, True, torch.float32, True)");
	expect_eval(NULL,
		    "stark_tensors.vary_inputs([torch.randn(100).half()], 7)[0].dtype", "torch.float16");
	expect_eval(NULL,
		    "all(0.25 <= s <= 8 and -0.5 <= h <= 0.5 for s, h in"
		    " (stark_tensors.variant_params(i) for i in range(2000)))",
		    "True");
	expect_eval(NULL,
		    "(lambda v: (min(v) < 0.5, max(v) > 4))"
		    "([stark_tensors.variant_params(i)[0] for i in range(2000)])",
		    "(True, True)");
}
END_TEST

/* The output window's chunks (stark_wire): pieces of outputs, digests and
 * comparison results that add up to the whole output's, the in-place
 * variant, and the weighted digest kept instead of large copies. */
START_TEST(stream_pieces)
{
	/* Outputs of 1000, 10 and 300 bytes laid out at 0, 1024 and 1280. */
	expect_eval(NULL,
		    "stark_wire.chunk_parts([(None, None, 1000), (None, None, 10), (None, None, 300)],"
		    " [0, 1024, 1280], 512, 1300)",
		    "[(0, 512, 1000), (1, 0, 10), (2, 0, 20)]");
	expect_eval(NULL, "stark_wire.window_layout([(None, None, 1000), (None, None, 10)])",
		    "([0, 1024], 1280)");
	/* Digests of pieces cut at 256-byte boundaries add up to the output's,
	   whatever word the output's size calls for (8, 4 or 1 bytes). */
	expect_eval(NULL,
		    "[(lambda b: stark_tensors.digest_add(stark_tensors.digest_part(b[:256], b.numel()),"
		    " stark_tensors.digest_add(stark_tensors.digest_part(b[256:768], b.numel()),"
		    " stark_tensors.digest_part(b[768:], b.numel()))) == stark_tensors.output_digest(t))("
		    "t.reshape(-1).view(torch.uint8)) for t in (torch.randn(1000), torch.randn(333),"
		    " torch.randint(0, 255, (1001,), dtype=torch.uint8))]",
		    "[True, True, True]");
	/* Results of pieces merge: counts add, the first bad index is global. */
	expect_eval(NULL,
		    "(lambda a: (a['nbad'], a['first'], a['got'], a['want']))(stark_tensors.merge_results("
		    "stark_tensors.merge_results(None, stark_tensors.compare_tensor(torch.ones(4),"
		    " torch.ones(4), 1e-4, 1e-4), 0), stark_tensors.compare_tensor(torch.tensor([1.0, 5.0,"
		    " 6.0]), torch.ones(3), 1e-4, 1e-4), 4))",
		    "(2, 5, 5.0, 1.0)");
	/* The variant made in place equals vary_inputs' copy. */
	expect_eval(NULL,
		    "[(lambda x: torch.equal(stark_tensors.vary_inputs([x], 5)[0],"
		    " (lambda y: (stark_tensors.vary_tensors_([y], 5), y)[1])(x.clone())))(x)"
		    " for x in (torch.randn(1000), torch.randn(10, 10).double(), torch.randn(64).half())]",
		    "[True, True, True]");
	/* A weighted digest sees a swap that a plain sum does not. */
	expect_eval(NULL,
		    "(lambda x, y: (stark_tensors.output_digest(x) == stark_tensors.output_digest(y),"
		    " stark_tensors.weighted_digest(x) == stark_tensors.weighted_digest(y),"
		    " stark_tensors.weighted_digest(x) == stark_tensors.weighted_digest(x.clone())))("
		    "torch.arange(16.0).double(), torch.arange(16.0).double().flip(0))",
		    "(True, False, True)");
	/* Piece by piece it is the sum of each word times 2i + 1 (wrapping
	 * int64), whatever the pieces' size. */
	expect_eval(NULL,
		    "(lambda x: (lambda want: [(setattr(stark_tensors, 'COMPARE_CHUNK', c), "
		    "stark_tensors.weighted_digest(x) == want)[1] for c in (3, 4, 1 << 22)])("
		    "stark_tensors._wrap64(sum(int(v) * (2 * i + 1) for i, v in "
		    "enumerate(x.view(torch.int64).tolist())))))"
		    "(torch.tensor([2**62, -5, 7, 2**61 + 3, 11, -2**63, 13], dtype=torch.int64))",
		    "[True, True, True]");
	/* The window's capacity: $STARK_WINDOW_BYTES, aligned, at least 4 KiB. */
	expect_eval(NULL,
		    "[stark_wire.window_capacity({'STARK_WINDOW_BYTES': v}) for v in ('5000', '12', 'x', '')]",
		    "[4864, 268435456, 268435456, 268435456]");
}
END_TEST

/* A descriptor sent with a message (the device window's:
 * stark_wire.Channel.send_fd) arrives only where the channel accepts them:
 * a memfd taken by one that does (the same file), dropped by the kernel for
 * one that does not; the message arrives either way.  The device window is
 * the default, STARK_OUTPUT_WINDOW=host turns it off, and the memory plan
 * counts it only where it is on and outputs use it (DWINDOW_MIN): the
 * outputs' size in 2 MiB grains, 1 GiB at most by default (the host
 * window's 256 MiB), or $STARK_WINDOW_BYTES. */
START_TEST(channel_fd)
{
	expect_eval(NULL,
		    "(lambda g: (exec(\"import os, socket\\n"
		    "a, b = socket.socketpair()\\n"
		    "ca, cb = stark_wire.Channel(a), stark_wire.Channel(b)\\n"
		    "fd = os.memfd_create('w')\\n"
		    "ca.send_fd(b'DWIN', {'size': 6}, fd)\\n"
		    "cb.accept_fds = True\\n"
		    "k, o = cb.recv_json({b'DWIN': 64}, None)\\n"
		    "got = cb.take_fd()\\n"
		    "same = os.fstat(got).st_ino == os.fstat(fd).st_ino and got != fd\\n"
		    "os.close(got)\\n"
		    "ca.send_fd(b'DWIN', {'size': 7}, fd)\\n"
		    "cb.accept_fds = False\\n"
		    "k2, o2 = cb.recv_json({b'DWIN': 64}, None)\\n"
		    "r = (k, o, same, k2, o2, cb.take_fd())\\n"
		    "os.close(fd); ca.close(); cb.close()\", g), g['r'])[1])"
		    "({'stark_wire': stark_wire})",
		    "(b'DWIN', {'size': 6}, True, b'DWIN', {'size': 7}, -1)");
	expect_eval(NULL,
		    "([stark_wire.window_on_device(e) for e in ({}, {'STARK_OUTPUT_WINDOW': 'host'},"
		    " {'STARK_OUTPUT_WINDOW': 'device'})],"
		    " [stark_memory.device_window_bytes({'out': o}, e) >> 20 for o, e in ("
		    "(1 << 30, {}), (1 << 30, {'STARK_OUTPUT_WINDOW': 'host'}),"
		    " (1 << 20, {}), (1 << 30, {'STARK_WINDOW_BYTES': str(256 << 20)}),"
		    " (1 << 30, {'STARK_WINDOW_BYTES': 'lots'}), ((40 << 20) + 1, {}), (3 << 30, {}))],"
		    " [stark_wire.window_capacity(e) for e in ({'STARK_WINDOW_BYTES': '5000'},"
		    " {'STARK_WINDOW_BYTES': '100'}, {'STARK_WINDOW_BYTES': str(1 << 40)})],"
		    " [stark_wire.window_capacity({}, d) >> 20 for d in (False, True)])",
		    "([True, False, True], [1024, 0, 0, 256, 1024, 42, 1024],"
		    " [4864, 268435456, 17179869184], [256, 1024])");
}
END_TEST

/* The fused comparison (stark_fused) runs on GPUs alone, but its guard
 * runs anywhere: the self-tests accept kernels whose figures are torch's
 * and refuse one that lets an element out of tolerance pass, or that calls
 * close what KernelBench's torch.allclose does not (naming the dtype and
 * the case); made on the CPU, enable says why torch compares; it is asked
 * for unless STARK_COMPARE_KERNEL=torch. */
START_TEST(fused_guard)
{
	expect_eval(NULL,
		    "(lambda T, F: (lambda K, fig, lax, kbf, kblax: ("
		    "F.self_test(K(fig, kbf)), F.kb_self_test(K(fig, kbf)),"
		    " F.self_test(K(lax, kbf)).split(':')[0],"
		    " F.kb_self_test(K(fig, kblax)).split(':')[0],"
		    " F.enable('cpu').startswith('torch (the fused kernel could not be made'),"
		    " T.FUSED,"
		    " [F.wanted(e) for e in ({}, {'STARK_COMPARE_KERNEL': 'fused'},"
		    " {'STARK_COMPARE_KERNEL': 'torch'})]))("
		    "lambda f, k: type('K', (), {'device': T.torch.device('cpu'),"
		    " 'figures': staticmethod(f), 'kb_figures': staticmethod(k)})(),"
		    " lambda a, b, at, rt: T._torch_figures(a, b, T.torch.float64 if b.dtype =="
		    " T.torch.float64 else T.torch.float32, at, rt),"
		    " lambda a, b, at, rt: [1.0 if i == 1 else x for i, x in enumerate("
		    "T._torch_figures(a, b, T.torch.float64 if b.dtype == T.torch.float64"
		    " else T.torch.float32, at, rt))],"
		    " lambda g, w, at, rt: (lambda r: r if F._kb_usual(r) else None)("
		    "F.kb_torch(g, w, at, rt)),"
		    " lambda g, w, at, rt: dict(F.kb_torch(g, w, at, rt), close=True)))"
		    "(stark_tensors, stark_fused)",
		    "(None, None, 'torch.float32, just out of tolerance',"
		    " \"KernelBench's, torch.float32, tolerance 0.01, just out of tolerance\","
		    " True, None, [True, True, False])");
}
END_TEST

/* The reference worker's start, step by step (stark_referee_memory.
 * note_started): its PLAN reply's marks become ref_ parts of
 * env.startup_parts_ms, after the referee's own; the estimate split into
 * its steps where its marks are there, and the threads beside it that had
 * ended (the NVRTC one here had not); marks missing, not numbers or before
 * the fork are left out, and a reply without them adds nothing. */
START_TEST(startup_steps)
{
	expect_eval(NULL,
		    "[(lambda m: (m.note_started(st), m.res['env'].get('startup_parts_ms'))[1])("
		    "type('M', (stark_referee_memory.MemoryPlan,), {'ref': type('W', (), {'t_fork': 10.0})(),"
		    " 'res': {'env': {'startup_parts_ms': 'spawn 11'}}})()) for st in ("
		    "{'main': 10.1, 'window': 10.1002, 'cuda': 12.6, 'made': 12.7, 'plan': 13.0,"
		    " 'planned': 13.25}, {'main': 10.1, 'window': 10.1002, 'cuda': 12.6, 'made': 12.7,"
		    " 'plan': 13.0, 'measured': 13.02, 'seeded': 13.05, 'built': 13.1, 'planned': 13.25,"
		    " 'warmed': 12.9,"
		    " 'nvrtc': 14.0}, {'main': 9.0, 'cuda': 'soon', 'made': 10.5}, None)]",
		    "['spawn 11 ref_jail 100 ref_window 0 ref_cuda 2500 ref_rest 100 ref_wait 300"
		    " ref_estimate 250', 'spawn 11 ref_jail 100 ref_window 0 ref_cuda 2500 ref_rest 100"
		    " ref_wait 300 ref_devmem 20 ref_seed 30 ref_build 50 ref_forward 150"
		    " ref_warm_thread 300',"
		    " 'spawn 11 ref_rest 500', 'spawn 11']");
}
END_TEST

/* The gate before a timed call (stark_referee_timing.note_launch): sized by
 * the reference's host time to its last launch, the candidate's counting
 * only up to SPIN_CAND_US, so a slow launcher buys no longer blind spot;
 * the compiled reference's host time does not move it; calls whose
 * launching outlasted their gate are counted. */
START_TEST(spin_sizing)
{
	expect_eval(NULL,
		    "[(lambda t: (setattr(t, 'launch_us', {'ref': [], 'cand': [], 'compiled': []}),"
		    " setattr(t, 'spin_short', 0), [t.note_launch(r, {'host_us': [0.0, h]}, 3000)"
		    " for r, h in calls], (t.spin_us, t.spin_short))[-1])("
		    "type('T', (stark_referee_timing.Timing,), {})()) for calls in ("
		    "[('ref', 3000.0)] * 10 + [('cand', 3000.0)] * 10,"
		    " [('ref', 100.0)] * 10 + [('cand', 30000.0)] * 10,"
		    " [('ref', 100.0)] * 10 + [('cand', 500.0)] * 10,"
		    " [('ref', 3300.0)] * 10 + [('cand', 190.0)] * 10,"
		    " [('ref', 3300.0)] * 10 + [('compiled', 9000.0)] * 10)]",
		    "[(4800, 0), (2000, 10), (1050, 0), (5250, 10), (5250, 20)]");
	/* The launch modes are measured for a launch-bound reference only: its
	   host's launching (9 ms) against its GPU time (1.5 ms) on the
	   launch-bound model, not a 5 ms convolution launched in 0.1 ms; no
	   warm-up readings (or none usable), no measurement. */
	expect_eval(NULL,
		    "[type('T', (stark_referee_modes.LaunchModes,), {'launch_us': {'ref': host}})()"
		    ".launch_bound(evs) for host, evs in ("
		    "([9000.0] * 3, [1500.0] * 3), ([100.0] * 3, [5000.0] * 3),"
		    " ([2600.0], [5000.0]), ([], [1500.0]), ([9000.0], []),"
		    " ([9000.0], [float('nan'), -1.0]))]",
		    "[True, False, True, False, False, False]");
	/* Two workers' launch readings are of one mode within 2%: the honest
	   launch-bound copy read 1.00x within 2%, and 0.95x in 3 of 10 at
	   2.3-2.6%. */
	expect_eval(NULL,
		    "[stark_referee_modes.modes_match(500.0, c) for c in"
		    " (500.0, 509.5, 490.5, 511.5, 488.0, 462.5, 0.0, float('nan'))]",
		    "[True, True, True, False, False, False, False, False]");
	/* Which worker is forked again: the one whose reading fewer of the
	   evaluation's readings (the forked ones' included) agree with, then
	   the one further from their median, then the faster.  The third
	   case is the chase the first rule (the faster, always) ended in on
	   an H200: two readings near 560 us, the reference's 525 alone. */
	expect_eval(NULL,
		    "[stark_referee_modes.respawn_choice(r, c, seen) for r, c, seen in ("
		    " (560.0, 505.0, [560.0, 505.0]), (505.0, 560.0, [505.0, 560.0]),"
		    " (525.0, 561.0, [525.0, 505.0, 561.0, 558.0]),"
		    " (504.0, 557.0, [557.0, 560.0, 504.0]), (520.0, 540.0, []))]",
		    "['cand', 'ref', 'ref', 'ref', 'ref']");
	/* Whether the plan's estimate says the reference may be launch-bound:
	   4 us of launching a kernel against 0.3 of its least GPU time -- the
	   launch-bound model's 600 kernels of 2 us, one tiny kernel, three of
	   28 us, ResNet-101's 211 kernels of 2213 us, yes; one 64 MiB relu
	   (28 us), three kernels of 48 us, no; no estimate, no answer. */
	expect_eval(NULL,
		    "[stark_worker_memory.plan_launch_bound(k, g) for k, g in ((600, 1200.0),"
		    " (1, 2.0), (3, 28.0), (211, 2213.0), (1, 28.0), (3, 48.0), (0, 5.0), (5, 0),"
		    " ('5', 3.0), (5, None))]",
		    "[True, True, True, True, False, False, None, None, None, None]");
	/* Matched unless the plan says not launch-bound (no estimate is
	   matched); STARK_LAUNCH_MATCH=1 always, =0 never. */
	expect_eval(NULL,
		    "[(__import__('os').environ.__setitem__('STARK_LAUNCH_MATCH', v) if v else"
		    " __import__('os').environ.pop('STARK_LAUNCH_MATCH', None),"
		    " stark_referee_modes.launch_match_wanted(p))[1] for v, p in (('1', False),"
		    " ('1', None), ('0', True), (None, True), (None, False), (None, None))]",
		    "[True, True, False, True, False, True]");
	/* Modes left apart after the forks are said in a result's message, with
	   the gap and its direction; none where they matched. */
	expect_eval(NULL,
		    "[(lambda ns: ('stayed 4.4% apart after 6 forks (the candidate\\'s worker read the"
		    " reference\\'s model faster)' in __import__('stark_referee').Evaluation.timing_message(ns),"
		    " 'launch modes' in __import__('stark_referee').Evaluation.timing_message("
		    "__import__('types').SimpleNamespace(**dict(vars(ns), mode_unmatched=None)))))("
		    "__import__('types').SimpleNamespace(req={'timing': True}, mode_unmatched=(-4.4, 6),"
		    " baseline_message=lambda: '', res={'reps': 25, 'runtime_us': 567.9, 'runtime_lo_us': 560.0,"
		    " 'runtime_hi_us': 570.0, 'ref_runtime_us': 594.3, 'ref_lo_us': 590.0, 'ref_hi_us': 600.0,"
		    " 'speedup': 1.046, 'env': {}}))]",
		    "[(True, False)]");
	/* The L2 flush is written from PyTorch's context in the reference's
	   worker unless STARK_FLUSH_CONTEXT=own asks for a context of its own
	   (with it, the GRUs' honest copies read 1.12-1.22x on an H100). */
	expect_eval(NULL,
		    "[(__import__('os').environ.__setitem__('STARK_FLUSH_CONTEXT', v) if v else"
		    " __import__('os').environ.pop('STARK_FLUSH_CONTEXT', None),"
		    " __import__('stark_referee_workers').flush_context_wanted())[1]"
		    " for v in (None, 'own', 'shared', 'OWN', '')] +"
		    " [__import__('os').environ.pop('STARK_FLUSH_CONTEXT', None) and None]",
		    "['shared', 'own', 'shared', 'shared', 'shared', None]");
	/* The matching itself, on scripted readings: agreeing at once; the
	   faster forked, then the one further from the readings' median;
	   modes that never agree, given up after 6 forks; a reading missing;
	   a plan that says not launch-bound, nothing read; on the reference's
	   own forward (a footprint within MODEL_MATCH_BYTES) within 1%,
	   forking as before; a worker that cannot time it, both read on the
	   small kernel's launches; a footprint of 4 GiB, on the launches. */
	expect_eval(NULL,
		    "(lambda g: (exec('import contextlib, os\\n"
		    "os.environ.pop(\"STARK_LAUNCH_MATCH\", None)\\n"
		    "class E(stark_referee_modes.LaunchModes):\\n"
		    "    cuda = True\\n"
		    "    def __init__(s, seq, planned=True):\\n"
		    "        s.seq, s.ref, s.cand, s.res = seq, \"ref\", \"cand\", {\"env\": {}}\\n"
		    "        s.planned_launch, s.forks = planned, []\\n"
		    "    def gpu_shared(s, what, step):\\n"
		    "        return contextlib.nullcontext()\\n"
		    "    def mode_readings(s, w, other, reps):\\n"
		    "        return [s.seq[w].pop(0)] if s.seq[w] else []\\n"
		    "    def model_readings(s, w, other, reps):\\n"
		    "        v = s.mseq[w].pop(0) if s.mseq[w] else None\\n"
		    "        if v is None:\\n"
		    "            s.mode_model_error = \"no gate\"\\n"
		    "        return [v] if v else None\\n"
		    "    def respawn(s, role):\\n"
		    "        s.forks.append(role)\\n"
		    "def run(ref, cand, planned=True, mref=(), mcand=(), fp=None):\\n"
		    "    e = E({\"ref\": ref, \"cand\": cand}, planned)\\n"
		    "    e.mseq = {\"ref\": list(mref), \"cand\": list(mcand)}\\n"
		    "    if fp is not None:\\n"
		    "        e.fp_estimated = {\"in\": fp, \"out\": fp, \"weights\": fp, \"fwd\": fp}\\n"
		    "    asked = e.match_modes()\\n"
		    "    return (asked, e.res[\"env\"].get(\"launch_match\", \"\").split(\";\")[0], len(e.forks),\\n"
		    "            e.mode_unmatched, e.res[\"env\"].get(\"launch_match_seen\"))\\n"
		    "out = [run([504.0], [505.0]), run([504.0, 530.0], [560.0, 532.0]),"
		    " run([500.0] * 9, [560.0] * 9), run([500.0], [560.0]), run([500.0], [505.0], False),"
		    " run([], [], True, [1000.0], [1005.0], 1 << 20),"
		    " run([], [], True, [1000.0, 1000.0], [1015.0, 1003.0], 1 << 20),"
		    " run([504.0], [505.0], True, [1000.0], [], 1 << 20),"
		    " run([504.0], [505.0], True, [1000.0], [1001.0], 1 << 30)]\\n', g),"
		    " g['out'])[1])({'stark_referee_modes': stark_referee_modes})",
		    "[(True, 'matched on 300 launches: ref 504.0, cand 505.0 us (+0.2%)', 0, None, None),"
		    " (True, 'matched on 300 launches: ref 530.0, cand 532.0 us (+0.4%), forked again: ref cand', 2, None, 'ref 504.0, cand 560.0, ref 530.0, cand 532.0'),"
		    " (True, 'unmatched on 300 launches: ref 500.0, cand 560.0 us (+12.0%), forked again:"
		    " ref cand ref cand ref cand', 6, (12.0, 6), 'ref 500.0, cand 560.0, ref 500.0, cand 560.0, ref 500.0, cand 560.0, ref 500.0, cand 560.0'),"
		    " (True, 'no readings', 1, None, None), (False, '', 0, None, None),"
		    " (True, \"matched on the reference's forward: ref 1000.0, cand 1005.0 us (+0.5%)\", 0, None, None),"
		    " (True, \"matched on the reference's forward: ref 1000.0, cand 1003.0 us (+0.3%),"
		    " forked again: ref cand\", 2, None, 'ref 1000.0, cand 1015.0, ref 1000.0, cand 1003.0'),"
		    " (True, 'matched on 300 launches (its forward: no gate): ref 504.0, cand 505.0 us (+0.2%)', 0, None, None),"
		    " (True, 'matched on 300 launches: ref 504.0, cand 505.0 us (+0.2%)', 0, None, None)]");
}
END_TEST

/* The footprint estimated on the meta device (stark_worker_memory's PLAN):
 * a Linear(8, 16) on 4 x 8 inputs; a problem that does not run on meta
 * says why; the zygote's warm-up of it. */
START_TEST(footprint_estimate)
{
	static const char *const kernel_cases[][2] = {
		{"Model=lambda n: torch.nn.Sequential(torch.nn.Linear(n, n), torch.nn.ReLU(),"
		 " torch.nn.Linear(n, n)), get_inputs=lambda: [torch.randn(4, 8)],"
		 " get_init_inputs=lambda: [8]", "(3, 6.0)"},
		{"Model=lambda: torch.nn.ReLU(), get_inputs=lambda: [torch.randn(1 << 24)],"
		 " get_init_inputs=lambda: []", "(1, 28.0)"},
	};
	const char *worker =
	    "(lambda prob: type('W', (stark_worker_memory.Memory,), {'problem': prob,"
	    " 'device': torch.device('cpu')})())";
	char expr[1024];

	snprintf(expr, sizeof(expr),
		 "(lambda r: (r['in'], r['out'], r['weights'], r['fwd'] >= r['out']))(%s("
		 "__import__('types').SimpleNamespace(Model=lambda n: torch.nn.Linear(n, 2 * n),"
		 " get_inputs=lambda: [torch.randn(4, 8)], get_init_inputs=lambda: [8])).cmd_plan({}))",
		 worker);
	expect_eval(NULL, expr, "(128, 256, 576, True)");
	/* ... and its kernels: views are none; each at least 2 us, or its
	   bytes at 4.8 TB/s (a relu on 64 MiB: 28 us). */
	for (size_t i = 0; i < sizeof(kernel_cases) / sizeof(kernel_cases[0]); i++) {
		snprintf(expr, sizeof(expr),
			 "(lambda r: (r['kernels'], r['gpu_us_least']))(%s("
			 "__import__('types').SimpleNamespace(%s)).cmd_plan({}))",
			 worker, kernel_cases[i][0]);
		expect_eval(NULL, expr, kernel_cases[i][1]);
	}
	snprintf(expr, sizeof(expr),
		 "'error' in %s(__import__('types').SimpleNamespace(Model=lambda: (lambda x:"
		 " torch.tensor(float(x.sum()))), get_inputs=lambda: [torch.randn(4)],"
		 " get_init_inputs=lambda: [])).cmd_plan({})",
		 worker);
	expect_eval(NULL, expr, "True");
	/* What a CUDA out-of-memory message says failed. */
	expect_eval(NULL,
		    "[stark_worker_memory.tried_bytes(m) for m in ('CUDA out of memory. Tried to"
		    " allocate 6.00 GiB. GPU 0 has', 'Tried to allocate 20.00 MiB', 'nothing')]",
		    "[6442450944, 20971520, 0]");
	/* The zygote's warm-up of the estimate (warm_meta): the models that
	 * ran (this torch has meta kernels for all but MaxPool3d's, at least),
	 * the default dtype as it was, CUDA untouched. */
	expect_eval(NULL,
		    "(lambda r: (int(r.split(' ms, ')[1].split()[0]) >= 3,"
		    " torch.cuda.is_initialized()))(stark_worker_memory.warm_meta())",
		    "(True, False)");
	expect_eval(NULL,
		    "(lambda d: (torch.set_default_dtype(torch.float64),"
		    " stark_worker_memory.warm_meta(), str(torch.get_default_dtype()),"
		    " torch.set_default_dtype(d))[2])(torch.get_default_dtype())",
		    "torch.float64");
}
END_TEST

/* Input descriptions of the two workers (GEN) and output digests. */
START_TEST(inputs_and_digests)
{
	expect_eval(NULL,
		    "(lambda d: (d[0], len(d[1])))(stark_tensors.describe_inputs([torch.zeros(2, 3), 4,"
		    " (1, 2.5), float('nan')]))",
		    "({'items': [{'dtype': 'float32', 'shape': [2, 3], 't': 'tensor', "
		    "'requires_grad': False}, {'t': 'value', 'v': 4}, {'t': 'list', 'v': [1, 2.5], "
		    "'tuple': True}, {'t': 'value', 'v': nan}]}, 1)");
	expect_eval(NULL,
		    "(lambda d: stark_tensors.inputs_mismatch(d, d))("
		    "stark_tensors.describe_inputs([torch.zeros(2), float('nan')])[0])",
		    "None");
	expect_eval(NULL,
		    "stark_tensors.inputs_mismatch(stark_tensors.describe_inputs([torch.zeros(2, 64)])[0],"
		    " stark_tensors.describe_inputs([torch.zeros(2, 32)])[0])",
		    "input 0 is {\"dtype\": \"float32\", \"requires_grad\": false, \"shape\": [2, 32], "
		    "\"t\": \"tensor\"}, the reference's is {\"dtype\": \"float32\", "
		    "\"requires_grad\": false, \"shape\": [2, 64], \"t\": \"tensor\"}");
	expect_eval(NULL,
		    "stark_tensors.inputs_mismatch({'items': [1, 2]}, {'items': [1]})",
		    "1 inputs, the reference has 2");
	expect_eval(NULL, "stark_tensors.inputs_mismatch({'items': [1]}, {'items': 'x'})",
		    "no list of inputs");
	/* Digests: equal bytes, equal digests, in any layout; any change shows. */
	expect_eval(NULL,
		    "(lambda x: (stark_tensors.output_digest(x) == stark_tensors.output_digest(x.t().contiguous().t()),"
		    " stark_tensors.output_digest(x) != stark_tensors.output_digest(x + 1e-6),"
		    " stark_tensors.output_digest(torch.ones(3, dtype=torch.uint8)),"
		    " stark_tensors.output_digest(torch.tensor([True, False, True])),"
		    " stark_tensors.output_digest(torch.zeros(0)), stark_tensors.output_digest('x')))"
		    "(torch.randn(5, 7))",
		    "(True, True, 3, 2, 0, None)");
}
END_TEST

/* prewarm() for the zygote: never raises, never initializes CUDA nor
   imports torch's extension module; checks KernelBench's inputs' engine
   once, for every fork. */
START_TEST(prewarm_safe)
{
	expect_eval(NULL,
		    "(lambda r: ('ms' in r, isinstance(r.get('imports'), str), 'nvrtc' in r,"
		    " torch.cuda.is_initialized(),"
		    " 'torch.utils.cpp_extension' in __import__('sys').modules,"
		    " r.get('kb_rand'), stark_rand.status()))"
		    "(stark_referee.prewarm())",
		    "(True, True, True, False, False, 'checked', '')");
}
END_TEST

START_TEST(cache_key)
{
	const char *k = "stark_build.cache_key('m', 'int f();', None, ['f'], ['-O3'], None, "
			"None, None, None, True, True, {})";
	char same[1024], other[1024];

	snprintf(same, sizeof(same), "%s == %s", k, k);
	expect_eval(NULL, same, "True");
	snprintf(other, sizeof(other),
		 "%s != stark_build.cache_key('m', 'int f();', None, ['f'], ['-O2'], None, None, "
		 "None, None, True, True, {})",
		 k);
	expect_eval(NULL, other, "True");
	expect_eval(NULL, "len(stark_build.cache_key('m', ['a', 'b'], None, None, None, None, "
			  "None, None, None, True, True, {}))",
		    "64");
}
END_TEST

/* The evaluation key: the same vector as buildcache.c's (test_run.c). */
START_TEST(build_key_vector)
{
	expect_eval(NULL,
		    "stark_env.entry_key('ab' * 32, 'cuda:1', b'class Model: pass\\n', "
		    "b'class ModelNew: pass\\n')",
		    "787cedc4a8d34768cb4019a0d99487990f4257632b4eb87d552405f8cdcdffbc");
	expect_eval(NULL,
		    "stark_env.entry_key('ab' * 32, 'cpu', b'class Model: pass\\n', "
		    "b'class ModelNew: pass\\n')",
		    "6ecd0e11fe1156ed13093b5c0eb84f8b0f70900d3097c066df3937db0c9f291e");
	/* the fingerprint: 64 hex digits, stable within a process */
	expect_eval(NULL, "(lambda a, b: (len(a[1]), a[1] == b[1]))(stark_env.toolchain(), "
			  "stark_env.toolchain())",
		    "(64, True)");
}
END_TEST

/* Which failed builds may be remembered: the compiler's verdict on the
 * candidate's own sources, never a missing file, library or tool, nor a
 * killed compiler. */
START_TEST(build_failure_rules)
{
	static const struct {
		const char *log;
		const char *want;
	} cases[] = {
	    {"/c/scratch/ext/m.tmp-5/main.cpp:6:50: error: expected primary-expression before ';' token", "True"},
	    {"/c/ext/cuda.cu(12): error: identifier \"x\" is undefined", "True"},
	    {"/c/main.cpp:1:10: fatal error: torch/extension.h: No such file or directory", "False"},
	    {"/c/cuda.cu(3): catastrophic error: cannot open source file \"cutlass/cutlass.h\"", "False"},
	    {"/usr/include/torch/x.h:3:1: error: bad", "False"},
	    {"main.cpp:4:1: error: x\nc++: fatal error: Killed signal terminated program cc1plus", "False"},
	    {"/usr/bin/ld: cannot find -lcublas", "False"},
	    {"Ninja is required to load C++ extensions", "False"},
	};
	char expr[1024];

	for (size_t i = 0; i < ST_ARRAY_LEN(cases); i++) {
		struct proto_request rq;

		/* the log travels in the request's id, a str the expression reads */
		fill_request(&rq, "x = 1\n", "x = 1\n");
		free(rq.id);
		rq.id = str_dup(cases[i].log);
		snprintf(expr, sizeof(expr), "stark_env.rememberable(req['id'])");
		expect_eval(&rq, expr, cases[i].want);
		proto_request_release(&rq);
	}
}
END_TEST

/* Python code that makes a module unimportable in this (forked) test
 * process and its children, as a machine without it. */
#define HIDE(mod)                                                                          \
	"(lambda sys: (sys.meta_path.insert(0, type('Hide', (), {'find_spec': staticmethod("  \
	"lambda name, path=None, target=None: (_ for _ in ()).throw(ModuleNotFoundError("     \
	"\"No module named '%s'\" % name, name=name)) if name.split('.')[0] == '" mod "' "      \
	"else None)})), [sys.modules.pop(k) for k in list(sys.modules) if k.split('.')[0] == '" \
	mod "' or k == 'torch.utils.cpp_extension']))(__import__('sys'))"

/* What a build needs and this machine lacks: setuptools hidden, ninja and
 * the compiler off PATH; each named with its fix. */
START_TEST(build_env_lacking)
{
	expect_eval(NULL, "[c['name'] for c in stark_env.lacking('cpu')]", "[]");
	expect_eval(NULL, "bool(" HIDE("setuptools") ")", "True");
	expect_eval(NULL, "(lambda m: (len(m), m[0]['name'], 'setuptools' in m[0]['fix']))"
			  "(stark_env.lacking('cpu'))",
		    "(1, 'setuptools', True)");
	/* No PATH to search, and no $CXX naming a compiler outside it. */
	expect_eval(NULL, "__import__('os').environ.__setitem__('PATH', '/nonexistent')", "None");
	expect_eval(NULL, "__import__('os').environ.pop('CXX', None) and None", "None");
	expect_eval(NULL, "sorted(c['name'] for c in stark_env.lacking('cpu'))",
		    "['c++ compiler', 'ninja', 'setuptools']");
	expect_eval(NULL, "'stark doctor' in stark_env.describe(stark_env.lacking('cpu'))", "True");
}
END_TEST

START_TEST(traceback_filter)
{
	/* An exception raised inside the harness: its frames are dropped. */
	static const char run[] =
		"(lambda g: (exec('try:\\n    stark_wire.checked_spec(1, \\'x\\')\\n"
		"except Exception as e:\\n    r = stark_wire.format_exc(e)', g), g['r'])[1])"
		"(dict(stark_wire=stark_wire))";
	char expr[1024];

	snprintf(expr, sizeof(expr), "'<stark-eval>' in %s", run);
	expect_eval(NULL, expr, "False");
	snprintf(expr, sizeof(expr), "%s.strip().splitlines()[-1]", run);
	expect_eval(NULL, expr, "stark_wire.WireError: x: expected an object");
}
END_TEST

/* The master seed once; then a second, drawn apart from it (for an
   evaluation judged again alone), once; then none. */
START_TEST(secret_once)
{
	evpy_set_secret(42);
	expect_eval(NULL, "__import__('_stark').secret_seed()", "42");
	expect_eval(NULL, "(lambda s: type(s) is int and s != 42 and 0 <= s < 2**64)"
		    "(__import__('_stark').secret_seed())", "True");
	{
		struct dbuf out;

		dbuf_init(&out, 1 << 16);
		ck_assert_int_ne(evpy_eval(NULL, "__import__('_stark').secret_seed()", &out), 0);
		ck_assert(strstr(dbuf_str(&out), "already taken"));
		dbuf_release(&out);
	}
}
END_TEST

/* ---- whole evaluations ---- */

static const char problem_src[] =
	"import torch\nimport torch.nn as nn\n"
	"class Model(nn.Module):\n"
	"    def __init__(self, n):\n"
	"        super().__init__()\n"
	"        self.w = nn.Parameter(torch.randn(n))\n"
	"    def forward(self, x):\n"
	"        return torch.relu(x) * self.w\n"
	"n = 64\n"
	"def get_inputs():\n"
	"    return [torch.randn(8, n)]\n"
	"def get_init_inputs():\n"
	"    return [n]\n";

static const char header[] =
	"import torch\nimport torch.nn as nn\n"
	"class ModelNew(nn.Module):\n"
	"    def __init__(self, n):\n"
	"        super().__init__()\n"
	"        self.w = nn.Parameter(torch.randn(n))\n"
	"    def forward(self, x):\n";

static void evaluate(const char *problem, const char *body, struct proto_result *rs)
{
	struct proto_request rq;
	char sol[4096];

	snprintf(sol, sizeof(sol), "%s%s", header, body);
	fill_request(&rq, problem, sol);
	evpy_set_secret(rq.seed);
	proto_result_init(rs);
	ck_assert_int_eq(evaluate_all(&rq, rs), 0);
	ck_assert_str_eq(rs->id, "t1");
	proto_request_release(&rq);
}

START_TEST(eval_correct)
{
	struct proto_result rs;

	/* none of the reference's operators (relu, mul): no flag */
	evaluate(problem_src,
		 "        return torch.addcmul(torch.zeros_like(x), torch.clamp(x, min=0), self.w)\n",
		 &rs);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s: %s", proto_status_name(rs.status),
		      rs.message);
	ck_assert_uint_eq(rs.trials_run, 2);
	ck_assert_uint_eq(rs.trials_passed, 2);
	ck_assert(rs.max_abs_err == 0.0);
	ck_assert(isnan(rs.runtime_us)); /* timing was off */
	ck_assert_msg(rs.nflags == 0, "%s", rs.nflags ? rs.flags[0] : "");
	/* both verdicts, stark's deciding */
	ck_assert_str_eq(rs.verdict, "stark");
	ck_assert_str_eq(rs.stark_status, "correct");
	ck_assert_str_eq(rs.kb_status, "correct");
	ck_assert_uint_eq(rs.kb_trials_run, 5);
	ck_assert_uint_eq(rs.kb_trials_passed, 5);
	ck_assert(rs.kb_max_diff == 0.0);
	ck_assert_msg(strstr(rs.kb_reason, "5 of 5 trials within torch.allclose(atol=rtol=0.0001)"),
		      "%s", rs.kb_reason);
	/* no Python profiles unless asked for */
	for (uint32_t i = 0; i < rs.nenv; i++)
		ck_assert_msg(strncmp(rs.env[i].key, "py_profile", 10), "%s", rs.env[i].key);
	proto_result_release(&rs);
}
END_TEST

/* STARK_PY_PROFILE=1: each process's Python profile in env, whole lines
   naming where its time went -- the referee's flow, each worker's command
   loop -- and the verdict as without it. */
START_TEST(eval_py_profile)
{
	struct proto_result rs;
	const char *want[][2] = {{"py_profile_referee", "(evaluate)"},
				 {"py_profile_ref", "(serve)"},
				 {"py_profile_cand", "(serve)"}};

	/* (the embedded interpreter's os.environ, made before this test) */
	expect_eval(NULL, "__import__('os').environ.__setitem__('STARK_PY_PROFILE', '1')", "None");
	evaluate(problem_src,
		 "        return torch.addcmul(torch.zeros_like(x), torch.clamp(x, min=0), self.w)\n",
		 &rs);
	expect_eval(NULL, "__import__('os').environ.pop('STARK_PY_PROFILE')", "1");
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s: %s", proto_status_name(rs.status),
		      rs.message);
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		const char *val = NULL;

		for (uint32_t i = 0; i < rs.nenv; i++)
			if (!strcmp(rs.env[i].key, want[k][0]))
				val = rs.env[i].val;
		ck_assert_msg(val != NULL, "no env %s", want[k][0]);
		ck_assert_msg(strstr(val, want[k][1]) != NULL, "%s: %s", want[k][0], val);
		/* whole lines: the last ends with a function's name */
		ck_assert_msg(strlen(val) <= 1000 && val[strlen(val) - 1] == ')', "%s", val);
	}
	proto_result_release(&rs);
}
END_TEST

/* Outputs all under atol: zeros pass elementwise and KernelBench's
   allclose, and fail stark's scale rule; --verdict kernelbench makes
   KernelBench's verdict decide, both verdicts still in the result. */
static const char problem_tiny[] =
	"import torch\nimport torch.nn as nn\n"
	"class Model(nn.Module):\n"
	"    def __init__(self, n):\n"
	"        super().__init__()\n"
	"        self.w = nn.Parameter(torch.randn(n))\n"
	"    def forward(self, x):\n"
	"        return torch.relu(x) * self.w * 1e-6\n"
	"n = 64\n"
	"def get_inputs():\n"
	"    return [torch.randn(8, n)]\n"
	"def get_init_inputs():\n"
	"    return [n]\n";

START_TEST(eval_scale_rule)
{
	struct proto_request rq;
	struct proto_result rs;
	char sol[4096];

	evaluate(problem_tiny, "        return torch.zeros_like(x)\n", &rs);
	ck_assert_int_eq(rs.status, PROTO_ST_INCORRECT);
	ck_assert_msg(strstr(rs.message, "% of its RMS") && strstr(rs.message, "under atol=0.0001"),
		      "%s", rs.message);
	ck_assert_str_eq(rs.stark_status, "incorrect");
	ck_assert_str_eq(rs.kb_status, "correct");
	ck_assert_msg(strstr(rs.message, "kernelbench verdict: correct"), "%s", rs.message);
	proto_result_release(&rs);

	snprintf(sol, sizeof(sol), "%s%s", header, "        return torch.zeros_like(x)\n");
	fill_request(&rq, problem_tiny, sol);
	rq.verdict = str_dup("kernelbench");
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
	ck_assert_str_eq(rs.verdict, "kernelbench");
	ck_assert_str_eq(rs.stark_status, "incorrect");
	ck_assert_msg(strstr(rs.message, "stark verdict: incorrect"), "%s", rs.message);
	proto_result_release(&rs);
	proto_request_release(&rq);

	/* an honest candidate at that scale passes, unflagged */
	evaluate(problem_tiny,
		 "        return torch.addcmul(torch.zeros_like(x), torch.clamp(x, min=0),"
		 " self.w.div(1e6))\n",
		 &rs);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT && rs.nflags == 0, "%s", rs.message);
	proto_result_release(&rs);
}
END_TEST

/* A fallback to the reference's own operator in except: flagged
   calls_reference_op, the operator named with its share. */
START_TEST(eval_reference_op)
{
	struct proto_result rs;

	evaluate(problem_src,
		 "        try:\n"
		 "            import stark_no_such_ext\n"
		 "        except ImportError:\n"
		 "            return torch.relu(x) * self.w\n",
		 &rs);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
	ck_assert_uint_eq(rs.nflags, 1);
	ck_assert_str_eq(rs.flags[0], "calls_reference_op");
	ck_assert_msg(strstr(rs.message, "aten::relu") && strstr(rs.message, "aten::mul") &&
			      strstr(rs.message, "of its profiled call"),
		      "%s", rs.message);
	proto_result_release(&rs);
}
END_TEST

/* Operands rounded to TF32 on a positive matmul pass the tolerance and are
   flagged reduced_precision by the centred probe; the same kernel in
   float32 is not. */
static const char problem_posmm[] =
	"import torch\nimport torch.nn as nn\n"
	"class Model(nn.Module):\n"
	"    def __init__(self):\n"
	"        super().__init__()\n"
	"    def forward(self, a, b):\n"
	"        return torch.matmul(a, b)\n"
	"def get_inputs():\n"
	"    return [torch.rand(32, 512), torch.rand(512, 32)]\n"
	"def get_init_inputs():\n"
	"    return []\n";

static const char posmm_head[] =
	"import torch\nimport torch.nn as nn\n"
	"def tf32(x):\n"
	"    i = x.contiguous().view(torch.int32)\n"
	"    return ((i + 0x0FFF + ((i >> 13) & 1)) & ~0x1FFF).view(torch.float32)\n"
	"class ModelNew(nn.Module):\n"
	"    def __init__(self):\n"
	"        super().__init__()\n"
	"    def forward(self, a, b):\n";

START_TEST(eval_precision)
{
	static const char *const bodies[2] = {
		"        a, b = tf32(a), tf32(b)\n"
		"        return (a[:, :, None] * b[None]).sum(1)\n",
		"        return (a[:, :, None] * b[None]).sum(1)\n",
	};
	struct proto_request rq;
	struct proto_result rs;
	char sol[4096];

	for (int i = 0; i < 2; i++) {
		snprintf(sol, sizeof(sol), "%s%s", posmm_head, bodies[i]);
		fill_request(&rq, problem_posmm, sol);
		evpy_set_secret(rq.seed);
		proto_result_init(&rs);
		ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
		ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
		if (i == 0) {
			ck_assert_msg(rs.nflags == 1 && !strcmp(rs.flags[0], "reduced_precision"),
				      "%s", rs.message);
			ck_assert_msg(strstr(rs.message, "centred") &&
					      strstr(rs.message, "further from the float64 result"),
				      "%s", rs.message);
		} else {
			ck_assert_msg(rs.nflags == 0, "%s", rs.message);
		}
		proto_result_release(&rs);
		proto_request_release(&rq);
	}
}
END_TEST

/* KernelBench's inputs are cast to float32 whatever the problem's dtypes;
   a kernel that reads integers may crash on them.  Its trials run last, so
   the crash is KernelBench's verdict and stark's stands. */
START_TEST(eval_kb_crash)
{
	static const char problem[] =
		"import torch\nimport torch.nn as nn\n"
		"class Model(nn.Module):\n"
		"    def __init__(self):\n"
		"        super().__init__()\n"
		"    def forward(self, table, idx):\n"
		"        return table.long()[idx.long()]\n"
		"def get_inputs():\n"
		"    return [torch.randint(0, 100, (100,), dtype=torch.int32),"
		" torch.randint(0, 100, (16,), dtype=torch.int32)]\n"
		"def get_init_inputs():\n"
		"    return []\n";
	static const char sol[] =
		"import os, signal\nimport numpy as np\nimport torch\nimport torch.nn as nn\n"
		"class ModelNew(nn.Module):\n"
		"    def __init__(self):\n"
		"        super().__init__()\n"
		"    def forward(self, table, idx):\n"
		"        if table.dtype != torch.int32:\n"
		"            os.kill(os.getpid(), signal.SIGSEGV)\n"
		"        t = table.numpy().astype(np.int64)\n"
		"        return torch.from_numpy(t[idx.numpy()])\n";
	struct proto_request rq;
	struct proto_result rs;

	fill_request(&rq, problem, sol);
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
	ck_assert_str_eq(rs.kb_status, "crashed");
	ck_assert_uint_eq(rs.kb_trials_run, 1);
	ck_assert(isnan(rs.kb_max_diff));
	ck_assert_msg(strstr(rs.message, "kernelbench verdict: crashed") &&
			      strstr(rs.message, "SIGSEGV"),
		      "%s", rs.message);
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

static const char *env_of(const struct proto_result *rs, const char *key)
{
	for (uint32_t i = 0; i < rs->nenv; i++)
		if (!strcmp(rs->env[i].key, key))
			return rs->env[i].val;
	return NULL;
}

static int has_flag(const struct proto_result *rs, const char *flag)
{
	for (uint32_t i = 0; i < rs->nflags; i++)
		if (!strcmp(rs->flags[i], flag))
			return 1;
	return 0;
}

/* A call at another shape can leave a worker unusable: on a GPU a
   device-side assert poisons its CUDA context (KernelBench's
   95_CrossEntropyLoss, whose class indices outgrew its logits).  Here the
   reference's worker dies outright at any other size.  The shape probe
   comes after KernelBench's trials, so their verdict is the problem's own,
   and stark's stands. */
START_TEST(eval_shape_probe_last)
{
	static const char problem[] =
		"import os\nimport torch\nimport torch.nn as nn\n"
		"ROWS = 64\n"
		"class Model(nn.Module):\n"
		"    def __init__(self):\n"
		"        super().__init__()\n"
		"    def forward(self, x):\n"
		"        if x.shape[0] != 64:\n"
		"            os._exit(3)\n"
		"        return x * 2.0\n"
		"def get_inputs():\n"
		"    return [torch.randn(ROWS, 32)]\n"
		"def get_init_inputs():\n"
		"    return []\n";
	static const char sol[] =
		"import torch\nimport torch.nn as nn\n"
		"class ModelNew(nn.Module):\n"
		"    def __init__(self):\n"
		"        super().__init__()\n"
		"    def forward(self, x):\n"
		"        return x + x\n";
	struct proto_request rq;
	struct proto_result rs;

	fill_request(&rq, problem, sol);
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT && rs.nflags == 0, "%s", rs.message);
	ck_assert_msg(!strcmp(rs.kb_status, "correct"), "%s: %s", rs.kb_status, rs.message);
	ck_assert_uint_eq(rs.kb_trials_passed, 5);
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

/* A size that a module-level tuple was made from stays as it is in the
   shape probe (growing it alone would give class indices beyond the
   logits' width, which the reference cannot take), and the other size is
   grown: a candidate that hard-codes the batch is still caught. */
START_TEST(eval_shape_probe_derived)
{
	static const char problem[] =
		"import torch\nimport torch.nn as nn\n"
		"batch_size = 48\nnum_classes = 40\ninput_shape = (num_classes,)\n"
		"class Model(nn.Module):\n"
		"    def __init__(self):\n"
		"        super().__init__()\n"
		"    def forward(self, p, t):\n"
		"        return torch.nn.functional.cross_entropy(p, t, reduction='none')\n"
		"def get_inputs():\n"
		"    return [torch.rand(batch_size, *input_shape),"
		" torch.randint(0, num_classes, (batch_size,))]\n"
		"def get_init_inputs():\n"
		"    return []\n";
	static const char sol[] =
		"import torch\nimport torch.nn as nn\n"
		"class ModelNew(nn.Module):\n"
		"    def __init__(self):\n"
		"        super().__init__()\n"
		"    def forward(self, p, t):\n"
		"        p, t = p[:48], t[:48]\n"
		"        return torch.nn.functional.cross_entropy(p, t, reduction='none')\n";
	struct proto_request rq;
	struct proto_result rs;
	const char *why;

	fill_request(&rq, problem, sol);
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
	ck_assert_msg(has_flag(&rs, "shape_specialized"), "%s", rs.message);
	/* KernelBench's harness casts the class indices to float32, which
	   cross_entropy refuses: its verdict is the problem's error, and the
	   probe still runs after it. */
	ck_assert_str_eq(rs.kb_status, "error");
	why = env_of(&rs, "shape_probe");
	ck_assert_msg(why && strstr(why, "batch_size=60") && !strstr(why, "num_classes"),
		      "%s", why ? why : "(no shape_probe)");
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

/* The two verdicts differ the other way: a two-pass variance is closer to
   the exact result than the cancelling reference, which stark's float64
   second opinion sees and KernelBench's allclose does not. */
START_TEST(eval_verdicts_differ)
{
	static const char problem[] =
		"import torch\nimport torch.nn as nn\n"
		"class Model(nn.Module):\n"
		"    def __init__(self):\n"
		"        super().__init__()\n"
		"    def forward(self, x):\n"
		"        return (x * x).mean(dim=1) - x.mean(dim=1) ** 2\n"
		"def get_inputs():\n"
		"    return [torch.randn(64, 2048) + 100.0]\n"
		"def get_init_inputs():\n"
		"    return []\n";
	static const char sol[] =
		"import numpy as np\nimport torch\nimport torch.nn as nn\n"
		"class ModelNew(nn.Module):\n"
		"    def __init__(self):\n"
		"        super().__init__()\n"
		"    def forward(self, x):\n"
		"        a = x.numpy().astype(np.float64)\n"
		"        return torch.from_numpy(a.var(axis=1).astype(np.float32))\n";
	struct proto_request rq;
	struct proto_result rs;

	fill_request(&rq, problem, sol);
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
	ck_assert_str_eq(rs.kb_status, "incorrect");
	ck_assert_uint_eq(rs.kb_trials_passed, 0);
	ck_assert(rs.kb_max_diff > 1e-4);
	ck_assert_msg(strstr(rs.message, "float64 second opinion") &&
			      strstr(rs.message, "kernelbench verdict: incorrect") &&
			      strstr(rs.message, "times the tolerance"),
		      "%s", rs.message);
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

START_TEST(eval_incorrect)
{
	struct proto_result rs;

	evaluate(problem_src, "        y = torch.relu(x) * self.w\n        y[0, 3] += 1.0\n"
			      "        return y\n",
		 &rs);
	ck_assert_int_eq(rs.status, PROTO_ST_INCORRECT);
	ck_assert_str_eq(rs.first_bad, "[0, 3]");
	ck_assert(fabs(rs.max_abs_err - 1.0) < 1e-6);
	ck_assert_uint_eq(rs.trials_passed, 0);
	ck_assert(strstr(rs.message, "first at [0, 3]"));
	proto_result_release(&rs);
}
END_TEST

START_TEST(eval_runtime_error)
{
	struct proto_result rs;

	evaluate(problem_src, "        raise KeyError('no such thing')\n", &rs);
	ck_assert_int_eq(rs.status, PROTO_ST_RUNTIME_ERROR);
	ck_assert(strstr(rs.message, "KeyError"));
	ck_assert(strstr(rs.log, "solution.py"));
	ck_assert(!strstr(rs.log, "<stark-eval>"));
	proto_result_release(&rs);
}
END_TEST

START_TEST(eval_no_modelnew)
{
	struct proto_request rq;
	struct proto_result rs;

	fill_request(&rq, problem_src, "import torch\nclass Model2: pass\n");
	evpy_set_secret(1);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, PROTO_ST_RUNTIME_ERROR);
	ck_assert(strstr(rs.message, "no class ModelNew"));
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

START_TEST(eval_bad_problem)
{
	struct proto_result rs;

	evaluate("import torch\nclass Model: pass\n", "        return x\n", &rs);
	ck_assert_int_eq(rs.status, PROTO_ST_ERROR);
	ck_assert(strstr(rs.message, "get_inputs"));
	proto_result_release(&rs);
	evaluate("def broken(:\n", "        return x\n", &rs);
	ck_assert_int_eq(rs.status, PROTO_ST_ERROR);
	ck_assert(strstr(rs.message, "SyntaxError"));
	proto_result_release(&rs);
}
END_TEST

START_TEST(eval_crash)
{
	struct proto_result rs;

	evaluate(problem_src, "        import os, signal\n        os.kill(os.getpid(), signal.SIGSEGV)\n",
		 &rs);
	ck_assert_int_eq(rs.status, PROTO_ST_CRASHED);
	ck_assert_msg(strstr(rs.message, "signal 11 (SIGSEGV)"), "%s", rs.message);
	/* The worker's fault handler named the frame the signal came in, and
	   its frames are the log. */
	ck_assert_msg(strstr(rs.message, "(SIGSEGV) at ") && strstr(rs.message, " in forward"), "%s",
		      rs.message);
	ck_assert_msg(rs.log && strstr(rs.log, "Segmentation fault") && strstr(rs.log, "in forward"),
		      "%s", rs.log ? rs.log : "(no log)");
	proto_result_release(&rs);
}
END_TEST

START_TEST(eval_alias)
{
	struct proto_result rs;

	evaluate(problem_src, "        return x.relu_().mul_(self.w)\n", &rs);
	ck_assert_int_eq(rs.status, PROTO_ST_REJECTED);
	ck_assert_msg(strstr(rs.message, "input"), "%s", rs.message);
	proto_result_release(&rs);
}
END_TEST

/* Inputs that are not tensors: made in both workers, passed as made. */
START_TEST(eval_scalar_inputs)
{
	static const char prob[] =
		"import torch\nimport torch.nn as nn\n"
		"class Model(nn.Module):\n"
		"    def forward(self, x, k, dims, name):\n"
		"        return x * k + sum(dims) + len(name)\n"
		"n = 16\n"
		"def get_inputs():\n"
		"    return [torch.randn(4, n), 3, (1, 2.5), 'ab']\n"
		"def get_init_inputs():\n"
		"    return []\n";
	static const char sol[] =
		"import torch\nimport torch.nn as nn\n"
		"class ModelNew(nn.Module):\n"
		"    def forward(self, x, k, dims, name):\n"
		"        assert isinstance(dims, tuple) and isinstance(k, int)\n"
		"        return x * float(k) + (dims[0] + dims[1] + len(name))\n";
	struct proto_request rq;
	struct proto_result rs;

	fill_request(&rq, prob, sol);
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s: %s", proto_status_name(rs.status),
		      rs.message);
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

/* The variant distribution catches a kernel tuned to unit-scale data: with
   the test's seed the fourth trial's inputs are scaled by about 4. */
START_TEST(eval_variant_catches)
{
	struct proto_request rq;
	struct proto_result rs;
	char sol[4096];

	expect_eval(NULL, "round(stark_tensors.variant_params(stark_referee_common.derive(0x5eed5eed5eed, "
			  "'trial-3'))[0], 2)",
		    "4.03");
	snprintf(sol, sizeof(sol), "%s%s", header,
		 "        if float(x.std()) > 1.5:\n"
		 "            return torch.zeros_like(x)\n"
		 "        return torch.relu(x) * self.w\n");
	fill_request(&rq, problem_src, sol);
	rq.trials = 4;
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, PROTO_ST_INCORRECT);
	ck_assert_uint_eq(rs.trials_passed, 3);
	ck_assert_msg(strstr(rs.message, "trial 4 of 4, scaled inputs"), "%s", rs.message);
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

/* A candidate that changes the problem's sizes in its own worker makes other
   inputs than the reference's: rejected. */
START_TEST(eval_inputs_meddling)
{
	struct proto_result rs;

	evaluate(problem_src,
		 "        return torch.relu(x) * self.w\n"
		 "import gc, types\n"
		 "for m in gc.get_objects():\n"
		 "    if type(m) is types.ModuleType and m.__name__ == 'stark_problem':\n"
		 "        m.n = 32\n",
		 &rs);
	ck_assert_int_eq(rs.status, PROTO_ST_REJECTED);
	ck_assert_msg(strstr(rs.message, "integrity check 'inputs'"), "%s", rs.message);
	ck_assert_msg(strstr(rs.message, "[8, 32]"), "%s", rs.message);
	proto_result_release(&rs);
}
END_TEST

/* The run stage only loads load_inline builds: a missing one is a
   compile_error that names the compile stage. */
START_TEST(eval_run_stage_missing_build)
{
	static const char sol[] =
		"import torch\nimport torch.nn as nn\n"
		"from torch.utils.cpp_extension import load_inline\n"
		"try:\n"
		"    ext = load_inline(name='stark_unit_missing', cpp_sources='int f() { return 1; }',"
		" functions=['f'])\n"
		"except Exception:\n"
		"    ext = None\n"
		"class ModelNew(nn.Module):\n"
		"    def __init__(self, n):\n"
		"        super().__init__()\n"
		"        self.w = nn.Parameter(torch.randn(n))\n"
		"    def forward(self, x):\n"
		"        return torch.relu(x) * self.w\n";
	char dir[] = "/tmp/stark-unit-cache.XXXXXX";
	struct proto_request rq;
	struct proto_result rs;

	ck_assert(mkdtemp(dir));
	fill_request(&rq, problem_src, sol);
	rq.stage = PROTO_STAGE_RUN;
	free(rq.cache_dir);
	rq.cache_dir = str_dup(dir);
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, PROTO_ST_COMPILE_ERROR);
	ck_assert_msg(strstr(rs.message, "stark_unit_missing") &&
			      strstr(rs.message, "compile stage"),
		      "%s", rs.message);
	proto_result_release(&rs);
	proto_request_release(&rq);
	rmdir(dir);
}
END_TEST

/* A build on a machine without setuptools (torch's extension module
 * imports it): `error`, naming what to install, not the candidate's
 * runtime_error; a solution that builds nothing is judged as usual. */
START_TEST(eval_build_env_missing)
{
	static const char sol[] =
		"import torch\nimport torch.nn as nn\n"
		"from torch.utils.cpp_extension import load_inline\n"
		"ext = load_inline(name='stark_unit_env', cpp_sources='int f() { return 1; }',"
		" functions=['f'])\n"
		"class ModelNew(nn.Module):\n"
		"    def __init__(self, n):\n"
		"        super().__init__()\n"
		"        self.w = nn.Parameter(torch.randn(n))\n"
		"    def forward(self, x):\n"
		"        return torch.relu(x) * self.w\n";
	struct proto_request rq;
	struct proto_result rs;

	expect_eval(NULL, "bool(" HIDE("setuptools") ")", "True");
	fill_request(&rq, problem_src, sol);
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_msg(rs.status == PROTO_ST_ERROR, "%s: %s", proto_status_name(rs.status), rs.message);
	ck_assert_msg(strstr(rs.message, "setuptools") && strstr(rs.message, "not the candidate's fault") &&
			      strstr(rs.message, "stark doctor") &&
			      (strstr(rs.message, "apt-get install python3-setuptools") ||
			       strstr(rs.message, "pip install setuptools")),
		      "%s", rs.message);
	ck_assert_ptr_nonnull(strstr(rs.log, "setuptools"));
	proto_result_release(&rs);
	proto_request_release(&rq);
	evaluate(problem_src, "        return torch.clamp(x, min=0) * self.w\n", &rs);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s: %s", proto_status_name(rs.status), rs.message);
	proto_result_release(&rs);
}
END_TEST

/* Timing on the CPU: the referee's clock, reported as such. */
START_TEST(eval_timing_cpu)
{
	struct proto_request rq;
	struct proto_result rs;
	const char *method = NULL;
	char sol[4096];

	snprintf(sol, sizeof(sol), "%s%s", header, "        return torch.relu(x) * self.w\n");
	fill_request(&rq, problem_src, sol);
	rq.timing = true;
	rq.warmup = 1;
	rq.min_reps = 3;
	rq.max_reps = 20;
	rq.max_time_ms = 2000;
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s: %s", proto_status_name(rs.status),
		      rs.message);
	ck_assert(rs.reps >= 3 && rs.reps <= 20);
	ck_assert(rs.runtime_us >= 0 && rs.ref_runtime_us >= 0);
	for (uint32_t i = 0; i < rs.nenv; i++)
		if (!strcmp(rs.env[i].key, "timing_method"))
			method = rs.env[i].val;
	ck_assert_msg(method && !strcmp(method, "wall_clock"), "%s", method ? method : "none");
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

/* fd 4, when open, is the GPU lock: the timing phase waits for it (here
   held by another process for a while), and the workers never hold it (the
   candidate would answer wrong if it had fd 4). */
/* Takes a record lock of type (F_RDLCK or F_WRLCK) on byte `at` of fd,
 * waiting for it. */
static void lock_byte(int fd, short type, off_t at)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1};

	while (fcntl(fd, F_SETLKW, &fl) < 0)
		ck_assert_int_eq(errno, EINTR);
}

/* A process that holds lock `type` on the GPU byte for hold_us, taking the
 * turnstile first (and keeping it) when `turn`; says "l" on go once held. */
static pid_t holder(int fd, short type, bool turn, useconds_t hold_us, int go)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (turn)
			lock_byte(fd, F_WRLCK, 0);
		lock_byte(fd, type, 1);
		if (write(go, "l", 1) != 1)
			_exit(1);
		usleep(hold_us);
		_exit(0);
	}
	return pid;
}

/* The seconds the referee's take_lock(exclusive) waits on fd 4, with its
 * mode after it ("ex"/"sh"). */
static double referee_wait(bool exclusive, char *mode)
{
	char expr[2048];
	struct dbuf out;
	double s = -1.0;

	snprintf(expr, sizeof(expr),
		 "(lambda ns: (exec(\"import time\\n"
		 "e = stark_referee.Evaluation.__new__(stark_referee.Evaluation)\\n"
		 "e.lock_fd, e.lock_held, e.lock_wait, e.res = 4, None, {}, {'env': {}}\\n"
		 "e.held_ms, e.held_calls = {}, {}\\n"
		 "e.queue_init(time.monotonic() + 30)\\n"
		 "e.pair_max_s, e.ref_call_max_ns = 0.0, 0\\n"
		 "t = time.monotonic()\\n"
		 "assert e.take_lock(%s)\\n"
		 "r = '%%.3f %%s' %% (time.monotonic() - t, e.lock_held)\\n"
		 "e.release_lock()\\n\", ns), ns['r'])[1])(dict(stark_referee=stark_referee))",
		 exclusive ? "True" : "False");
	dbuf_init(&out, 4096);
	ck_assert_msg(evpy_eval(NULL, expr, &out) == 0, "%s", dbuf_str(&out));
	ck_assert_int_eq(sscanf(dbuf_str(&out), "%lf %7s", &s, mode), 2);
	dbuf_release(&out);
	return s;
}

/* The GPU lock's modes: a timing waits for shared holders; a shared step
 * waits for a timing, not for another shared step; and a timing that waits
 * holds the turnstile, so a shared step that comes later waits for it
 * too, not slipping in before it. */
START_TEST(gpu_lock_modes)
{
	char path[] = "/tmp/stark-unit-lock.XXXXXX";
	char mode[8], c;
	int fd, saved, go[2];
	pid_t a, b;
	double w;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(pipe(go), 0);
	saved = dup(4);
	ck_assert_int_eq(dup2(fd, 4), 4);

	a = holder(fd, F_RDLCK, false, 800000, go[1]);
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	usleep(100000);
	w = referee_wait(false, mode);
	ck_assert_msg(w < 0.4 && !strcmp(mode, "sh"), "shared beside shared: %.3f s %s", w, mode);
	w = referee_wait(true, mode);
	ck_assert_msg(w > 0.4 && !strcmp(mode, "ex"), "exclusive beside shared: %.3f s %s", w, mode);
	waitpid(a, NULL, 0);

	a = holder(fd, F_WRLCK, false, 800000, go[1]);
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	usleep(100000);
	w = referee_wait(false, mode);
	ck_assert_msg(w > 0.4 && !strcmp(mode, "sh"), "shared beside exclusive: %.3f s", w);
	waitpid(a, NULL, 0);

	/* a holds shared for 1 s; b, a timing, waits in the turnstile; we
	 * come after b and must wait for a and b both. */
	a = holder(fd, F_RDLCK, false, 1000000, go[1]);
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	b = holder(fd, F_WRLCK, true, 400000, go[1]);
	usleep(200000);
	w = referee_wait(false, mode);
	ck_assert_int_eq(read(go[0], &c, 1), 1); /* b did hold it */
	ck_assert_msg(w > 0.9, "a shared step slipped past a waiting timing: %.3f s", w);
	waitpid(a, NULL, 0);
	waitpid(b, NULL, 0);

	if (saved >= 0) {
		dup2(saved, 4);
		close(saved);
	} else {
		close(4);
	}
	close(fd);
	close(go[0]);
	close(go[1]);
}
END_TEST

START_TEST(eval_gpu_lock)
{
	struct proto_request rq;
	struct proto_result rs;
	char path[] = "/tmp/stark-unit-lock.XXXXXX";
	char sol[4096], c;
	const char *wait_ms = NULL;
	int fd, saved, go[2];
	pid_t pid;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(pipe(go), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (lockf(fd, F_LOCK, 0) == 0 && write(go[1], "l", 1) == 1)
			usleep(2500000);
		_exit(0);
	}
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	snprintf(sol, sizeof(sol), "%s%s", header,
		 "        import os, stat\n"
		 "        try:\n"
		 "            st = os.fstat(4)\n"
		 "        except OSError:\n"
		 "            st = None\n"
		 "        # The lock: an unlinked regular file (a GPU driver may\n"
		 "        # open its device nodes at fd 4 in the worker).\n"
		 "        if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 0:\n"
		 "            return torch.zeros_like(x)\n"
		 "        return torch.relu(x) * self.w\n");
	fill_request(&rq, problem_src, sol);
	rq.timing = true;
	rq.warmup = 1;
	rq.min_reps = 3;
	rq.max_reps = 5;
	saved = dup(4);
	ck_assert_int_eq(dup2(fd, 4), 4);
	evpy_set_secret(rq.seed);
	proto_result_init(&rs);
	ck_assert_int_eq(evaluate_all(&rq, &rs), 0);
	if (saved >= 0) {
		dup2(saved, 4);
		close(saved);
	} else {
		close(4);
	}
	close(fd);
	waitpid(pid, NULL, 0);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s: %s", proto_status_name(rs.status),
		      rs.message);
	for (uint32_t i = 0; i < rs.nenv; i++)
		if (!strcmp(rs.env[i].key, "gpu_lock_wait_ms"))
			wait_ms = rs.env[i].val;
	ck_assert_msg(wait_ms && atof(wait_ms) > 300.0, "waited %s ms", wait_ms ? wait_ms : "no");
	ck_assert(rs.reps >= 3);
	proto_result_release(&rs);
	proto_request_release(&rq);
}
END_TEST

static Suite *evaluator_suite(void)
{
	Suite *s = suite_create("evaluator");
	TCase *conv = tcase_create("conversion");
	TCase *pieces = tcase_create("harness");
	TCase *whole = tcase_create("evaluations");

	tcase_add_unchecked_fixture(conv, start_python, NULL);
	tcase_add_test(conv, result_full);
	tcase_add_test(conv, result_nan_and_defaults);
	tcase_add_loop_test(conv, result_strict, 0, (int)ST_ARRAY_LEN(bad_results));
	tcase_add_test(conv, result_caps_and_text);
	tcase_add_test(conv, request_dict);
	tcase_add_test(conv, compiled_compare);
	suite_add_tcase(s, conv);

	tcase_add_unchecked_fixture(pieces, start_python, NULL);
	tcase_add_test(pieces, median_interval);
	tcase_add_test(pieces, compare_rules);
	tcase_add_test(pieces, claims_bound);
	tcase_add_test(pieces, placement_adjusted);
	tcase_add_test(pieces, compare_exact_rules);
	tcase_add_test(pieces, roofline);
	tcase_add_test(pieces, variant_rules);
	tcase_add_test(pieces, scale_rules);
	tcase_add_test(pieces, precision_rules);
	tcase_add_test(pieces, kb_rules);
	tcase_add_test(pieces, mt_engine);
	tcase_add_test(pieces, kb_rand_exact);
	tcase_add_test(pieces, languages);
	tcase_add_test(pieces, language_files);
	tcase_add_test(pieces, op_rules);
	tcase_add_test(pieces, inputs_and_digests);
	tcase_add_test(pieces, stream_pieces);
	tcase_add_test(pieces, footprint_estimate);
	tcase_add_test(pieces, spin_sizing);
	tcase_add_test(pieces, startup_steps);
	tcase_add_test(pieces, channel_fd);
	tcase_add_test(pieces, fused_guard);
	tcase_add_test(pieces, prewarm_safe);
	tcase_add_test(pieces, cache_key);
	tcase_add_test(pieces, build_key_vector);
	tcase_add_test(pieces, build_failure_rules);
	tcase_add_test(pieces, build_env_lacking);
	tcase_add_test(pieces, traceback_filter);
	tcase_add_test(pieces, secret_once);
	tcase_add_test(pieces, gpu_lock_modes);
	suite_add_tcase(s, pieces);

	tcase_add_unchecked_fixture(whole, start_python, NULL);
	tcase_set_timeout(whole, 120);
	tcase_add_test(whole, eval_correct);
	tcase_add_test(whole, eval_py_profile);
	tcase_add_test(whole, eval_scale_rule);
	tcase_add_test(whole, eval_reference_op);
	tcase_add_test(whole, eval_precision);
	tcase_add_test(whole, eval_verdicts_differ);
	tcase_add_test(whole, eval_kb_crash);
	tcase_add_test(whole, eval_shape_probe_last);
	tcase_add_test(whole, eval_shape_probe_derived);
	tcase_add_test(whole, eval_incorrect);
	tcase_add_test(whole, eval_runtime_error);
	tcase_add_test(whole, eval_build_env_missing);
	tcase_add_test(whole, eval_no_modelnew);
	tcase_add_test(whole, eval_bad_problem);
	tcase_add_test(whole, eval_crash);
	tcase_add_test(whole, eval_alias);
	tcase_add_test(whole, eval_scalar_inputs);
	tcase_add_test(whole, eval_variant_catches);
	tcase_add_test(whole, eval_inputs_meddling);
	tcase_add_test(whole, eval_run_stage_missing_build);
	tcase_add_test(whole, eval_timing_cpu);
	tcase_add_test(whole, eval_gpu_lock);
	suite_add_tcase(s, whole);
	return s;
}

/*
 * Sanitizer builds: the embedded interpreter leaks by design, and a leak
 * check over its heap at the end of every forked test takes minutes.  A
 * leak check done now, before Python exists, finds nothing and switches the
 * end-of-process check off (for the forked tests too).
 */
extern void __lsan_do_leak_check(void) __attribute__((weak));

int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	(void)argc;
	if (__lsan_do_leak_check)
		__lsan_do_leak_check();
	stark_set_progname(argv[0]);
	sr = srunner_create(evaluator_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
