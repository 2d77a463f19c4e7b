/*
 * mtrand.c -- torch.rand()'s CPU floats, bit for bit, several times faster.
 *
 * KernelBench's trials make their inputs as its harness does: the trial's
 * seed, then the problem's get_inputs() on the CPU, whose torch.rand()
 * draws from torch's CPU generator (an MT19937 engine) one number per
 * element through a generic serial loop: 0.8 GB/s on the GPU machine's
 * host, 8 s for one of level 1's 6 GiB tensors, done in both workers for
 * each of five trials -- most of such an evaluation's minute and a half.
 * The same engine written as a tight loop over its 624-word blocks gives
 * the same numbers several times faster (docs/BENCHMARKS.md has the
 * figures).  Nothing here is torch's code: the engine is MT19937 as
 * published (Matsumoto and Nishimura, 1998) with torch's counters, and the
 * conversion is the one torch's uniform distribution makes for float32
 * (the draw's low 24 bits times 2^-24).  The Python side (stark_rand)
 * checks every process's torch against this before using it, and falls
 * back to torch where they differ.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "evaluator/evaluator_int.h"

#define MT_N 624
#define MT_M 397
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu
#define MT_MATRIX_A 0x9908b0dfu

/*
 * Four words at a time in GCC's and clang's vector types (SSE2's width on
 * x86-64): -O2 leaves these loops scalar, which ran at 2.5 GB/s on the
 * development machine, against 7.6 GB/s vectorized.  The order of the
 * engine's words is unchanged: each group of four reads only words no
 * other lane of the group writes.
 */
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));

static inline uint32_t twist(uint32_t u, uint32_t v)
{
	return (((u & MT_UPPER) | (v & MT_LOWER)) >> 1) ^ ((v & 1u) ? MT_MATRIX_A : 0u);
}

static inline v4u load4(const uint32_t *p)
{
	v4u v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline v4u twist4(v4u u, v4u v)
{
	return (((u & MT_UPPER) | (v & MT_LOWER)) >> 1) ^ (-(v & 1u) & MT_MATRIX_A);
}

/* The engine's next block of 624 words, in place (torch's next_state):
   s[i] from s[i + 397] (old) for i < 227, from s[i - 227] (new) after. */
static void next_block(uint32_t *s)
{
	int i;
	v4u w;

	for (i = 0; i + 4 <= MT_N - MT_M; i += 4) {
		w = load4(s + i + MT_M) ^ twist4(load4(s + i), load4(s + i + 1));
		memcpy(s + i, &w, sizeof(w));
	}
	for (; i < MT_N - MT_M; i++)
		s[i] = s[i + MT_M] ^ twist(s[i], s[i + 1]);
	for (; i + 4 <= MT_N - 1; i += 4) {
		w = load4(s + i + MT_M - MT_N) ^ twist4(load4(s + i), load4(s + i + 1));
		memcpy(s + i, &w, sizeof(w));
	}
	for (; i < MT_N - 1; i++)
		s[i] = s[i + MT_M - MT_N] ^ twist(s[i], s[i + 1]);
	s[MT_N - 1] = s[MT_M - 1] ^ twist(s[MT_N - 1], s[0]);
}

static inline uint32_t temper(uint32_t y)
{
	y ^= y >> 11;
	y ^= (y << 7) & 0x9d2c5680u;
	y ^= (y << 15) & 0xefc60000u;
	return y ^ (y >> 18);
}

/* Words s[0..n) tempered and converted into out[0..n): the low 24 bits,
   exact in a float, times 2^-24 (exact too). */
static void convert(const uint32_t *s, float *out, size_t n)
{
	const float scale = 1.0f / 16777216.0f;
	size_t i;
	v4u y;
	v4f f;

	for (i = 0; i + 4 <= n; i += 4) {
		y = load4(s + i);
		y ^= y >> 11;
		y ^= (y << 7) & 0x9d2c5680u;
		y ^= (y << 15) & 0xefc60000u;
		y ^= y >> 18;
		f = __builtin_convertvector((v4i)(y & 0xffffffu), v4f) * scale;
		memcpy(out + i, &f, sizeof(f));
	}
	for (; i < n; i++)
		out[i] = (float)(temper(s[i]) & 0xffffffu) * scale;
}

int eval_mt_rand(uint32_t key[EVAL_MT_WORDS], int32_t *left, uint32_t *next, float *out,
		 size_t n)
{
	size_t avail, take;

	/* torch's engine draws key[next] while --left stays above 0, and
	   makes the next block when it reaches 0: left - 1 words are left in
	   this block, from next on. */
	if (*left < 1 || *left > MT_N || *next > MT_N ||
	    (size_t)*next + (size_t)*left - 1 > MT_N)
		return ST_EINVAL;
	while (n > 0) {
		avail = (size_t)*left - 1;
		if (avail == 0) {
			next_block(key);
			*left = MT_N + 1;
			*next = 0;
			continue;
		}
		take = avail < n ? avail : n;
		convert(key + *next, out, take);
		out += take;
		n -= take;
		*next += (uint32_t)take;
		*left -= (int32_t)take;
	}
	return 0;
}
