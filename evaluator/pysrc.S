/*
 * pysrc.S -- the evaluator's Python harness, linked into the binary.
 *
 * Each evaluator/stark_*.py is embedded byte for byte (.incbin, paths
 * relative to the repository root where make runs) between a start and an
 * end symbol, followed by a NUL, so stark-eval needs no files of its own
 * inside a jail.  The modules are those of pysrc.h, which pyembed.c
 * executes in that order.
 */
#include "evaluator/pysrc.h"

#define EMBED(sym, path)		\
	.global sym##_start;		\
	.global sym##_end;		\
	.balign 16;			\
sym##_start:				\
	.incbin path;			\
sym##_end:				\
	.byte 0

#define EMBED_MODULE(name) EMBED(stark_py_##name, STARK_PYSRC_PATH(name));

	.section .rodata
STARK_HARNESS(EMBED_MODULE)

	.section .note.GNU-stack,"",@progbits
