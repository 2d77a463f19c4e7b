/*
 * common.h -- the few things every STARK module shares: error codes, capped
 * growable buffers, careful I/O on descriptors, diagnostics, and which
 * stark this is and where its installed parts lie (install.c).
 *
 * Error convention: action functions return 0 on success or a negative
 * ST_E* code; stark_strerror() names it.  Functions that can fail are marked
 * ST_WUR so a dropped error is a compile error under -Werror.
 */
#ifndef STARK_COMMON_H
#define STARK_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ST_WUR __attribute__((warn_unused_result))
#define ST_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define ST_NORETURN __attribute__((noreturn))
#define ST_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

enum st_err {
	ST_OK = 0,
	ST_ENOMEM = -1,	   /* allocation failed */
	ST_EINVAL = -2,	   /* invalid argument or malformed input */
	ST_EIO = -3,	   /* read/write failed (errno kept by caller) */
	ST_ETOOBIG = -4,   /* a size cap was hit */
	ST_EPROTO = -5,	   /* peer broke the protocol */
	ST_ETIMEDOUT = -6, /* a deadline passed */
	ST_ENOENT = -7,	   /* no such object */
	ST_EBUSY = -8,	   /* held by someone else */
	ST_ESYS = -9,	   /* a system call failed (see errno) */
	ST_EEOF = -10,	   /* peer closed before a complete message */
	ST_EVERSION = -11, /* unsupported protocol or store version */
	ST_EDENIED = -12,  /* refused by policy (sandbox, caps, budget) */
	ST_EEXIST = -13,   /* object already exists */
	ST_EHTTP = -14,	   /* HTTP status or transport failure */
	ST_ECANCELED = -15 /* interrupted by the user or a signal */
};

/* A static, lowercase description of an ST_E* code. */
const char *stark_strerror(int rc);

/*
 * struct dbuf -- a growable byte buffer with a hard cap fixed at init.
 * The bytes are always followed by a NUL (not counted in len), so text can
 * be used as a C string.  Appending past max fails with ST_ETOOBIG and
 * leaves the buffer unchanged.
 */
struct dbuf {
	char *p;    /* owned; NULL until the first append */
	size_t len; /* bytes in use */
	size_t cap; /* bytes allocated */
	size_t max; /* hard cap on len */
};

void dbuf_init(struct dbuf *b, size_t max);
ST_WUR int dbuf_append(struct dbuf *b, const void *data, size_t n);
ST_WUR int dbuf_puts(struct dbuf *b, const char *s);
ST_WUR int dbuf_printf(struct dbuf *b, const char *fmt, ...) ST_PRINTF(2, 3);
ST_WUR int dbuf_vprintf(struct dbuf *b, const char *fmt, va_list ap);
/* Append as much of data as fits under the cap; returns bytes taken. */
size_t dbuf_append_trunc(struct dbuf *b, const void *data, size_t n);
void dbuf_reset(struct dbuf *b);
/* Hands the bytes (NUL-terminated, possibly NULL if empty) to the caller. */
char *dbuf_detach(struct dbuf *b, size_t *len);
void dbuf_release(struct dbuf *b);
/* Returns the string, "" when empty; borrowed until the next change. */
const char *dbuf_str(const struct dbuf *b);

/* Descriptor I/O that retries on EINTR and short transfers. */
ST_WUR int io_read_full(int fd, void *buf, size_t n);	    /* ST_EEOF on early EOF */
ST_WUR int io_write_full(int fd, const void *buf, size_t n);
/* Reads a whole file, failing with ST_ETOOBIG past max bytes. */
ST_WUR int io_read_file(const char *path, size_t max, struct dbuf *out);
/* Writes a file atomically (tmp + fsync + rename). */
ST_WUR int io_write_file_atomic(const char *path, const void *data, size_t n);
/* Creates path and its missing parents, mode 0700 for what it creates
 * (mkdir -p); ST_ESYS or ST_ETOOBIG with errno set. */
ST_WUR int io_mkdir_p(const char *path);
/* Closes every descriptor >= lowfd (close_range, with a fallback). */
void io_close_from(int lowfd);
/* Monotonic clock in nanoseconds. */
uint64_t clock_mono_ns(void);

/* Diagnostics to stderr, prefixed with the program name. */
void stark_set_progname(const char *name);
void stark_warn(const char *fmt, ...) ST_PRINTF(1, 2);
/* Prints and returns rc, for `return stark_error(rc, ...)`. */
int stark_error(int rc, const char *fmt, ...) ST_PRINTF(2, 3);
/* Writes the message into err (nothing when err is NULL or errlen is 0,
 * cut to errlen) and returns rc, for `return stark_errbuf(err, errlen, rc,
 * ...)` in calls that hand their message to the caller. */
int stark_errbuf(char *err, size_t errlen, int rc, const char *fmt, ...) ST_PRINTF(4, 5);
/* Only in main() or in a child before exec. */
ST_NORETURN void stark_die(const char *fmt, ...) ST_PRINTF(1, 2);

/* Case-sensitive prefix test. */
bool str_starts(const char *s, const char *prefix);
/* strdup that returns NULL for NULL. */
char *str_dup(const char *s);
/* Parses a decimal unsigned integer in [min, max]; ST_EINVAL otherwise. */
ST_WUR int str_to_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
ST_WUR int str_to_double(const char *s, double *out);
/* Whether s[0..n) is well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF) without NUL bytes. */
bool str_utf8_valid(const char *s, size_t n);
/* Replaces NUL bytes and invalid UTF-8 in s[0..n) with '?', in place. */
void str_utf8_sanitize(char *s, size_t n);

/* ---- which stark this is, and where its parts are (install.c) ---- */

/* The release (the VERSION file, e.g. "0.2.0") and the git commit the
 * program was built from ("unknown" outside git): static strings. */
const char *stark_release(void);
const char *stark_commit(void);

enum stark_part {
	STARK_PART_LIBEXEC, /* the programs users do not call: stark-eval */
	STARK_PART_DATA	    /* prompts/ and examples/ */
};
/*
 * The folder that holds a part of stark: beside the program in a build
 * tree, relative to the program in an installed tree (ROOT/bin/stark:
 * ROOT/libexec/stark, ROOT/share/stark), else the folder the program was
 * built for.  Written into buf.  ST_ENOENT when none holds the part's files;
 * tried (may be NULL; reset first, its cap applies) then lists the paths
 * looked at, for a message.  Environment overrides are the caller's.
 */
ST_WUR int stark_part_dir(enum stark_part part, char *buf, size_t len, struct dbuf *tried);
/* The folder the program was built to find a part in (static). */
const char *stark_part_built_for(enum stark_part part);

#endif
