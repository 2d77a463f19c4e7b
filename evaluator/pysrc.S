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
EMBED(stark_py_nvcc, "evaluator/stark_nvcc.py")
EMBED(stark_py_build, "evaluator/stark_build.py")
EMBED(stark_py_worker, "evaluator/stark_worker.py")
EMBED(stark_py_referee, "evaluator/stark_referee.py")

	.section .note.GNU-stack,"",@progbits
