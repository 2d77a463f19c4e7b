/*
 * cuda_emu.h -- runs CUDA C kernels on the CPU, for checking the kernels of
 * tests/gpu/problems on a machine without a GPU (tests/gpu/validate_cpu.py).
 *
 * Every CUDA thread of a block is a coroutine (ucontext) on one OS thread;
 * a scheduler runs them one after the other until each finishes or waits at
 * a barrier.  __syncthreads() is a block barrier, the warp shuffles are warp
 * barriers (each lane publishes its value, all lanes of the warp meet, each
 * reads its partner's, all meet again).  Four schedules (emu_set_order):
 * every thread in turn, forward (0) or reverse (1), or one warp at a time,
 * each running ahead to its next block barrier, last warp first (2) or first
 * warp first (3) -- so that a missing barrier, a read of shared memory
 * before another warp wrote it or a write before others read it, shows up
 * in at least one of them.  Diverged barriers (some threads of a
 * block exited or waiting elsewhere) are reported as errors, as are block and
 * shared-memory sizes beyond what an sm_90 launch allows.  Shared memory is
 * poisoned (all bits set: NaN for floats) at the start of every block, so a
 * read of shared memory nothing wrote shows up as NaN in the output.
 *
 * Only what the kernels of this corpus use is emulated: float2/float4/uint4,
 * the warp shuffles, __syncthreads, __syncwarp, atomicAdd on float, __ldg and
 * the float math functions of the host's libm (which differ from the device's
 * by a few ulp).  validate_cpu.py rewrites __shared__ declarations into
 * references to the emulated shared-memory arena before compiling.
 */
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

namespace emu {

enum { RUN = 0, AT_BLOCK = 1, AT_WARP = 2, DONE = 3 };

struct Thread {
	ucontext_t ctx;
	uint3 tid;
	int state;
};

static const size_t STACK = 64 << 10;
static const size_t SMEM_ARENA = 64 << 10;
static const size_t SMEM_LIMIT = 48 << 10;

static ucontext_t sched;
static Thread *threads;
static Thread *cur;
static int nthreads;
static uint3 cur_bid;
static dim3 cur_bdim, cur_gdim;
static void (*body)();
static int order_policy;		/* 0 forward, 1 reverse, 2/3 warps ahead (last/first) */
static char *error;			/* first error, or NULL */
static char errbuf[512];

alignas(16) static unsigned char arena[SMEM_ARENA];
static size_t dyn_bytes;		/* dynamic shared memory of the launch */
static size_t static_off[256];		/* offset of each static __shared__ id */
static size_t static_used;		/* static bytes laid out so far */
static int static_seen[256];

/* Lane values exchanged by the shuffles: [warp][lane], 8 bytes each. */
static uint64_t *lane_slot;

static void fail(const char *msg)
{
	if (!error) {
		snprintf(errbuf, sizeof(errbuf), "%s (block %u,%u,%u)", msg, cur_bid.x, cur_bid.y, cur_bid.z);
		error = errbuf;
	}
}

static inline int linear_tid(const Thread *t)
{
	return (int)(t->tid.x + cur_bdim.x * (t->tid.y + cur_bdim.y * t->tid.z));
}

static void yield(int state)
{
	cur->state = state;
	swapcontext(&cur->ctx, &sched);
}

static void entry()
{
	body();
	cur->state = DONE;
	/* uc_link returns to the scheduler */
}

static void *dyn_smem() { return arena; }

/* Dynamic shared memory is at the start of the arena, static __shared__
 * arrays follow it, laid out in the order their declarations first run in a
 * block (every block runs the same declarations in the same order). */
static void *static_smem(int id, size_t bytes)
{
	if (id < 0 || id >= 256) {
		fail("too many __shared__ declarations");
		return arena;
	}
	if (!static_seen[id]) {
		static_seen[id] = 1;
		static_off[id] = ((dyn_bytes + 15) & ~(size_t)15) + static_used;
		static_used += (bytes + 15) & ~(size_t)15;
		if (static_off[id] + bytes > SMEM_LIMIT) {
			fail("shared memory above 48 KB per block");
			return arena;
		}
	}
	return arena + static_off[id];
}

}  // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::cur_bid)
#define blockDim (emu::cur_bdim)
#define gridDim (emu::cur_gdim)
#define warpSize 32

static inline void __syncthreads() { emu::yield(emu::AT_BLOCK); }
static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
	if (mask != 0xffffffffu)
		emu::fail("__syncwarp with a partial mask is not emulated");
	emu::yield(emu::AT_WARP);
}

namespace emu {
template <class T> static T shuffle(unsigned mask, T v, int src_of_lane_mode, int arg, int width)
{
	static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
	if (mask != 0xffffffffu)
		fail("shuffle with a partial mask is not emulated");
	if (width <= 0 || width > 32 || (width & (width - 1)))
		fail("shuffle width must be a power of 2 up to 32");
	int lt = linear_tid(cur), lane = lt & 31, warp = lt >> 5;
	uint64_t *slots = lane_slot + (size_t)warp * 32;
	memcpy(&slots[lane], &v, sizeof(T));
	yield(AT_WARP);
	int seg = lane & ~(width - 1), src = lane;
	switch (src_of_lane_mode) {
	case 0: src = seg + (arg & (width - 1)); break;			/* __shfl_sync */
	case 1: src = (lane - seg) >= arg ? lane - arg : lane; break;	/* up */
	case 2: src = (lane - seg) + arg < width ? lane + arg : lane; break; /* down */
	case 3: src = seg + (((lane - seg) ^ arg) & (width - 1)); break;	/* xor */
	}
	if (warp * 32 + src >= nthreads)
		fail("shuffle reads a lane beyond the block");
	T r;
	memcpy(&r, &slots[src], sizeof(T));
	yield(AT_WARP);
	return r;
}
}  // namespace emu

template <class T> static inline T __shfl_sync(unsigned m, T v, int src, int w = 32) { return emu::shuffle(m, v, 0, src, w); }
template <class T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) { return emu::shuffle(m, v, 1, (int)d, w); }
template <class T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) { return emu::shuffle(m, v, 2, (int)d, w); }
template <class T> static inline T __shfl_xor_sync(unsigned m, T v, int l, int w = 32) { return emu::shuffle(m, v, 3, l, w); }

template <class T> static inline T __ldg(const T *p) { return *p; }
static inline float atomicAdd(float *p, float v) { float o = *p; *p = o + v; return o; }
static inline int atomicAdd(int *p, int v) { int o = *p; *p = o + v; return o; }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }

/* fp16 <-> fp32 by bits (IEEE binary16, round to nearest even), standing in
 * for the PTX cvt instructions a kernel may use. */
static inline float emu_h2f(unsigned short h)
{
	unsigned s = (unsigned)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
	if (e == 0) {
		if (m == 0) {
			bits = s;
		} else {
			float f = ldexpf((float)m, -24);
			return s ? -f : f;
		}
	} else if (e == 31) {
		bits = s | 0x7f800000u | (m << 13);
	} else {
		bits = s | ((e + 112) << 23) | (m << 13);
	}
	return __uint_as_float(bits);
}

static inline unsigned short emu_f2h(float f)
{
	unsigned x = __float_as_uint(f), s = (x >> 16) & 0x8000u;
	unsigned ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u)
		return (unsigned short)(s | 0x7e00u);
	if (ax >= 0x477ff000u)	/* rounds to >= 65520: infinity */
		return (unsigned short)(s | 0x7c00u);
	if (ax < 0x38800000u) {	/* below the smallest normal half: subnormal */
		float a = __uint_as_float(ax);
		float q = a * 16777216.0f;	/* in units of 2^-24, exact */
		float r = nearbyintf(q);	/* ties to even (default mode) */
		return (unsigned short)(s | (unsigned)r);
	}
	unsigned e = ((ax >> 23) - 112) << 10, m = (ax >> 13) & 1023;
	unsigned h = e | m, rest = ax & 0x1fffu;
	if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
		h++;
	return (unsigned short)(s | h);
}

namespace emu {

/* Runs the threads of a warp until each has finished or waits at a block
 * barrier (warp barriers are released as soon as the whole warp arrives):
 * one warp races ahead of the others. */
static bool run_warp_ahead(int w)
{
	int lo = w * 32, hi = lo + 32 < nthreads ? lo + 32 : nthreads;
	bool ran = false;
	for (;;) {
		bool r = false;
		for (int i = lo; i < hi; i++) {
			if (threads[i].state != RUN)
				continue;
			cur = &threads[i];
			swapcontext(&sched, &threads[i].ctx);
			r = ran = true;
			if (error)
				return ran;
		}
		if (r)
			continue;
		int n_at = 0;
		for (int i = lo; i < hi; i++)
			n_at += threads[i].state == AT_WARP;
		if (n_at != hi - lo)
			return ran;
		for (int i = lo; i < hi; i++)
			threads[i].state = RUN;
	}
}

static int run_block()
{
	int nwarps = (nthreads + 31) / 32;
	for (;;) {
		bool ran = false;
		if (order_policy >= 2) {
			for (int k = 0; k < nwarps && !error; k++)
				ran |= run_warp_ahead(order_policy == 2 ? nwarps - 1 - k : k);
		} else {
			for (int k = 0; k < nthreads; k++) {
				int i = order_policy ? nthreads - 1 - k : k;
				if (threads[i].state != RUN)
					continue;
				cur = &threads[i];
				swapcontext(&sched, &threads[i].ctx);
				ran = true;
				if (error)
					return -1;
			}
		}
		if (error)
			return -1;
		int done = 0, at_block = 0;
		for (int i = 0; i < nthreads; i++) {
			done += threads[i].state == DONE;
			at_block += threads[i].state == AT_BLOCK;
		}
		if (done == nthreads)
			return 0;
		bool released = false;
		for (int w = 0; w < nwarps; w++) {
			int lo = w * 32, hi = lo + 32 < nthreads ? lo + 32 : nthreads, n_at = 0, n_done = 0;
			for (int i = lo; i < hi; i++) {
				n_at += threads[i].state == AT_WARP;
				n_done += threads[i].state == DONE;
			}
			if (n_at == 0)
				continue;
			if (n_at + n_done == hi - lo && n_done) {
				fail("warp shuffle/sync while lanes of the warp have exited");
				return -1;
			}
			if (n_at == hi - lo) {
				for (int i = lo; i < hi; i++)
					threads[i].state = RUN;
				released = true;
			}
		}
		if (released)
			continue;
		if (at_block + done == nthreads) {
			if (done) {
				fail("__syncthreads while some threads of the block have exited");
				return -1;
			}
			for (int i = 0; i < nthreads; i++)
				threads[i].state = RUN;
			continue;
		}
		if (!ran) {
			fail("deadlock: threads wait at different barriers (diverged __syncthreads or shuffle)");
			return -1;
		}
	}
}

}  // namespace emu

/* Launches body() on a grid; returns 0, or -1 with emu_error() set. */
extern "C" int emu_launch(void (*fn)(), unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			  unsigned by, unsigned bz, size_t smem)
{
	using namespace emu;
	error = NULL;
	unsigned long nt = (unsigned long)bx * by * bz;
	if (nt == 0 || nt > 1024 || bx > 1024 || by > 1024 || bz > 64) {
		snprintf(errbuf, sizeof(errbuf), "invalid block (%u,%u,%u)", bx, by, bz);
		error = errbuf;
		return -1;
	}
	if (gx == 0 || gy == 0 || gz == 0 || gx > 2147483647u || gy > 65535 || gz > 65535) {
		snprintf(errbuf, sizeof(errbuf), "invalid grid (%u,%u,%u)", gx, gy, gz);
		error = errbuf;
		return -1;
	}
	if (smem > SMEM_LIMIT) {
		snprintf(errbuf, sizeof(errbuf), "dynamic shared memory %zu above 48 KB", smem);
		error = errbuf;
		return -1;
	}
	nthreads = (int)nt;
	body = fn;
	dyn_bytes = smem;
	threads = (Thread *)calloc(nt, sizeof(Thread));
	char *stacks = (char *)malloc(nt * STACK);
	lane_slot = (uint64_t *)calloc(((nt + 31) / 32) * 32, sizeof(uint64_t));
	cur_bdim = {bx, by, bz};
	cur_gdim = {gx, gy, gz};
	int rc = 0;
	for (unsigned z = 0; z < gz && !rc; z++)
		for (unsigned y = 0; y < gy && !rc; y++)
			for (unsigned x = 0; x < gx && !rc; x++) {
				cur_bid = {x, y, z};
				/* The static layout is re-made identically in every
				 * block (declarations run in the same order). */
				static_used = 0;
				memset(static_seen, 0, sizeof(static_seen));
				memset(arena, 0xff, sizeof(arena));
				for (int i = 0; i < nthreads; i++) {
					Thread *t = &threads[i];
					t->tid = {(unsigned)(i % bx), (unsigned)((i / bx) % by), (unsigned)(i / (bx * by))};
					t->state = RUN;
					getcontext(&t->ctx);
					t->ctx.uc_stack.ss_sp = stacks + (size_t)i * STACK;
					t->ctx.uc_stack.ss_size = STACK;
					t->ctx.uc_link = &sched;
					makecontext(&t->ctx, (void (*)())entry, 0);
				}
				rc = run_block();
			}
	free(threads);
	free(stacks);
	free(lane_slot);
	threads = NULL;
	return rc;
}

extern "C" const char *emu_error() { return emu::error; }
extern "C" void emu_set_order(int policy) { emu::order_policy = policy; }
