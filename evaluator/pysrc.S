/*
 * pysrc.S -- the evaluator's Python harness, linked into the binary.
 *
 * Each evaluator/stark_*.py is embedded byte for byte (.incbin, paths
 * relative to the repository root where make runs) between a start and an
 * end symbol, followed by a NUL, so stark-eval needs no files of its own
 * inside a jail.  pyembed.c lists the symbols and executes the modules in
 * dependency order.
 */
#define EMBED(sym, path)		\
	.global sym##_start;		\
	.global sym##_end;		\
	.balign 16;			\
sym##_start:				\
	.incbin path;			\
sym##_end:				\
	.byte 0

	.section .rodata
EMBED(stark_py_cuda, "evaluator/stark_cuda.py")
EMBED(stark_py_wire, "evaluator/stark_wire.py")
EMBED(stark_py_rules, "evaluator/stark_rules.py")
EMBED(stark_py_lang, "evaluator/stark_lang.py")
EMBED(stark_py_triton, "evaluator/stark_triton.py")
EMBED(stark_py_nvcc, "evaluator/stark_nvcc.py")
EMBED(stark_py_build, "evaluator/stark_build.py")
EMBED(stark_py_env, "evaluator/stark_env.py")
EMBED(stark_py_worker_gpu, "evaluator/stark_worker_gpu.py")
EMBED(stark_py_worker_outputs, "evaluator/stark_worker_outputs.py")
EMBED(stark_py_worker_memory, "evaluator/stark_worker_memory.py")
EMBED(stark_py_worker, "evaluator/stark_worker.py")
EMBED(stark_py_referee_common, "evaluator/stark_referee_common.py")
EMBED(stark_py_referee_readings, "evaluator/stark_referee_readings.py")
EMBED(stark_py_referee_workers, "evaluator/stark_referee_workers.py")
EMBED(stark_py_referee_lock, "evaluator/stark_referee_lock.py")
EMBED(stark_py_memory, "evaluator/stark_memory.py")
EMBED(stark_py_referee_memory, "evaluator/stark_referee_memory.py")
EMBED(stark_py_referee_compare, "evaluator/stark_referee_compare.py")
EMBED(stark_py_referee_data, "evaluator/stark_referee_data.py")
EMBED(stark_py_referee_timing, "evaluator/stark_referee_timing.py")
EMBED(stark_py_referee_checks, "evaluator/stark_referee_checks.py")
EMBED(stark_py_referee_build, "evaluator/stark_referee_build.py")
EMBED(stark_py_referee_verdicts, "evaluator/stark_referee_verdicts.py")
EMBED(stark_py_referee, "evaluator/stark_referee.py")

	.section .note.GNU-stack,"",@progbits
