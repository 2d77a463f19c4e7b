/*
 * pysrc.h -- the evaluator's Python harness modules, in dependency order:
 * each is executed before those that import it, since a jail holds no
 * source tree to import from.  The one list that pysrc.S embeds
 * (evaluator/stark_NAME.py) and pyembed.c executes (module stark_NAME);
 * plain preprocessor text, included by both.  stark_cuda is the fast
 * format's runtime, which solutions import.
 */
#ifndef STARK_PYSRC_H
#define STARK_PYSRC_H

#define STARK_HARNESS(X)		\
	X(cuda)				\
	X(memory)			\
	X(wire)				\
	X(tensors)			\
	X(rand)				\
	X(rules)			\
	X(fused)			\
	X(lang)				\
	X(triton)			\
	X(nvcc)				\
	X(build)			\
	X(env)				\
	X(plan_cache)			\
	X(worker_gpu)			\
	X(worker_outputs)		\
	X(worker_memory)		\
	X(worker_inputs)		\
	X(worker_delivery)		\
	X(worker_ipc)			\
	X(compiled)			\
	X(worker)			\
	X(referee_common)		\
	X(referee_readings)		\
	X(referee_workers)		\
	X(referee_lock)			\
	X(referee_cpus)			\
	X(referee_modes)		\
	X(referee_memory)		\
	X(referee_compare)		\
	X(referee_data)			\
	X(referee_timing)		\
	X(referee_delivery)		\
	X(referee_ipc)			\
	X(referee_checks)		\
	X(referee_build)		\
	X(referee_verdicts)		\
	X(referee_baseline)		\
	X(referee)

/* A module's file, as one string: "evaluator/stark_NAME.py". */
#define STARK_PYSRC_STR_(path) #path
#define STARK_PYSRC_PATH(name) STARK_PYSRC_STR_(evaluator/stark_##name.py)

#endif
