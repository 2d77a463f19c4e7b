/*
 * util.c -- error names, diagnostics, descriptor I/O and string helpers
 * shared by every module.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char *progname = "stark";

const char *stark_strerror(int rc)
{
	switch (rc) {
	case ST_OK: return "success";
	case ST_ENOMEM: return "out of memory";
	case ST_EINVAL: return "invalid argument or malformed input";
	case ST_EIO: return "input/output error";
	case ST_ETOOBIG: return "size limit exceeded";
	case ST_EPROTO: return "protocol violation";
	case ST_ETIMEDOUT: return "deadline exceeded";
	case ST_ENOENT: return "not found";
	case ST_EBUSY: return "in use by another process";
	case ST_ESYS: return "system call failed";
	case ST_EEOF: return "unexpected end of input";
	case ST_EVERSION: return "unsupported version";
	case ST_EDENIED: return "denied by policy";
	case ST_EEXIST: return "already exists";
	case ST_EHTTP: return "http request failed";
	case ST_ECANCELED: return "canceled";
	}
	return "unknown error";
}

void stark_set_progname(const char *name)
{
	const char *slash = strrchr(name, '/');

	progname = slash ? slash + 1 : name;
}

static void vwarn(const char *fmt, va_list ap)
{
	char line[4096];
	int n = snprintf(line, sizeof(line), "%s: ", progname);

	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	fprintf(stderr, "%s\n", line);
}

void stark_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
}

int stark_error(int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
	return rc;
}

int stark_errbuf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

void stark_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
	exit(2);
}

int io_read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return ST_EIO;
		if (r == 0)
			return ST_EEOF;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int io_write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return ST_EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int io_read_file(const char *path, size_t max, struct dbuf *out)
{
	char chunk[65536];
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? ST_ENOENT : ST_EIO;
	dbuf_init(out, max);
	for (;;) {
		ssize_t r = read(fd, chunk, sizeof(chunk));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = ST_EIO;
			goto out_close;
		}
		if (r == 0)
			break;
		rc = dbuf_append(out, chunk, (size_t)r);
		if (rc)
			goto out_close;
	}
	if (!out->p)
		rc = dbuf_append(out, "", 0);
out_close:
	close(fd);
	if (rc)
		dbuf_release(out);
	return rc;
}

int io_write_file_atomic(const char *path, const void *data, size_t n)
{
	char tmp[PATH_MAX];
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
	    (int)sizeof(tmp))
		return ST_ETOOBIG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return ST_EIO;
	rc = io_write_full(fd, data, n);
	if (!rc && fsync(fd) < 0)
		rc = ST_EIO;
	if (close(fd) < 0 && !rc)
		rc = ST_EIO;
	if (!rc && rename(tmp, path) < 0)
		rc = ST_EIO;
	if (rc)
		unlink(tmp);
	return rc;
}

int io_mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return ST_ETOOBIG;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return ST_ESYS;
		*p = '/';
	}
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return ST_ESYS;
	return ST_OK;
}

void io_close_from(int lowfd)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0) == 0)
		return;
#endif
	for (long fd = lowfd, max = sysconf(_SC_OPEN_MAX); fd < max; fd++)
		close((int)fd);
}

uint64_t clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool str_starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

char *str_dup(const char *s)
{
	return s ? strdup(s) : NULL;
}

int str_to_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return ST_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return ST_EINVAL;
	*out = v;
	return 0;
}

int str_to_double(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return ST_EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v))
		return ST_EINVAL;
	*out = v;
	return 0;
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0; NUL counts as bad. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;

	if (c < 0x80)
		return c ? 1 : 0;
	if (c < 0xc2 || c > 0xf4)
		return 0;
	len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
	    (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
		return 0;
	return len;
}

bool str_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t k;

	while (n) {
		k = utf8_seq(p, n);
		if (!k)
			return false;
		p += k;
		n -= k;
	}
	return true;
}

void str_utf8_sanitize(char *s, size_t n)
{
	unsigned char *p = (unsigned char *)s;
	size_t k;

	while (n) {
		k = utf8_seq(p, n);
		if (!k) {
			*p = '?';
			k = 1;
		}
		p += k;
		n -= k;
	}
}
