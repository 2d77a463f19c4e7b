/*
 * buildcache.c -- the build cache: its keys, each evaluation's scratch
 * folder, and the trusted publisher that copies a finished build into it.
 *
 * Layout under the cache root ($STARK_CACHE, evalrun_default_cache):
 *
 *	store/builds/KEY/	a published build: a copy of one compile
 *				stage's build folder, then .stark-entry;
 *				never changed once renamed into place
 *	store/failed/KEY	a remembered compile error (JSON: message, log)
 *	store/plans/KEY		a problem's footprint estimate (JSON), kept
 *				for its later evaluations (stark_plan_cache.py)
 *	jit/KEY/		a published JIT cache (Triton's): a copy of
 *				one run stage's cache folder, then
 *				.stark-entry; copied into the later
 *				evaluations of the same problem and solution
 *				(evalpair.c); beside the store, so that no
 *				jail sees another solution's
 *	scratch/PID-XXXXXX/	one evaluation's build folder while it runs
 *
 * Every jail sees store/ read-only; the compile jail also sees its own
 * scratch folder, writable, and nothing else of the cache.  Only this file
 * writes store/, from the orchestrator, after the compile stage's process
 * tree is gone (its pid namespace's init reaped), so nothing jailed can
 * race it.  What it takes from the scratch folder is untrusted: it walks
 * it with openat(O_NOFOLLOW) from a descriptor of the folder it made,
 * copies regular files only (links, fifos and sockets are skipped, never
 * followed), with caps on sizes, counts and depth, into a temporary folder
 * of its own, and renames that into place under the key it computed: a
 * name chosen inside a jail never becomes a path here.
 *
 * The key (evalrun_build_key) is SHA-256 over the toolchain's fingerprint,
 * which the referee computes in the compile jail before any candidate code
 * runs (evaluator/stark_env.py), the device kind, and the SHA-256 of the
 * problem's and the solution's bytes, hashed here from our own copies.
 * This is the one file that uses nettle.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "pool/pool.h"

#define COPY_CHUNK (1u << 20)
#define REMOVE_DEPTH 32		/* deeper folders are moved up, then removed */
#define ENTRY_MARK ".stark-entry"

static const char key_version[] = "stark-build-2";
/* evaluator/stark_plan_cache.py's KEY_VERSION. */
static const char plan_version[] = "stark-plan-1";

static void hex(const uint8_t *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

static void sha256_hex(const void *p, size_t n, char out[EVALRUN_KEY_LEN + 1])
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_init(&c);
	sha256_update(&c, n, p);
	sha256_digest(&c, sizeof(d), d);
	hex(d, sizeof(d), out);
}

bool evalrun_key_valid(const char *key)
{
	size_t n = 0;

	if (!key)
		return false;
	for (; key[n]; n++)
		if (!((key[n] >= '0' && key[n] <= '9') || (key[n] >= 'a' && key[n] <= 'f')))
			return false;
	return n == EVALRUN_KEY_LEN;
}

int evalrun_build_key(const char *toolchain, const char *device, const char *problem, size_t plen,
		      const char *solution, size_t slen, char out[EVALRUN_KEY_LEN + 1])
{
	char ph[EVALRUN_KEY_LEN + 1], sh[EVALRUN_KEY_LEN + 1], text[512];
	int n;

	if (!evalrun_key_valid(toolchain) || !device)
		return ST_EINVAL;
	sha256_hex(problem ? problem : "", problem ? plen : 0, ph);
	sha256_hex(solution ? solution : "", solution ? slen : 0, sh);
	n = snprintf(text, sizeof(text), "%s\ntoolchain %s\ndevice %s\nproblem %s\nsolution %s\n",
		     key_version, toolchain, str_starts(device, "cuda") ? "cuda" : "cpu", ph, sh);
	if (n < 0 || (size_t)n >= sizeof(text))
		return ST_EINVAL;
	sha256_hex(text, (size_t)n, out);
	return 0;
}

static int mkdir_in(int dfd, const char *name)
{
	if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* Opens ROOT/a[/b] as a folder (made if missing, never through a link). */
static int open_dir(const char *root, const char *a, const char *b)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), sub;

	for (int i = 0; fd >= 0 && i < 2; i++) {
		const char *name = i ? b : a;

		if (!name)
			break;
		if (mkdir_in(fd, name) < 0) {
			close(fd);
			return -1;
		}
		sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = sub;
	}
	return fd;
}

/* Gives us back access to a folder the candidate closed (we own it);
 * where that fails, the open that follows says so. */
static void own_dir(int dfd, const char *name)
{
	if (fchmodat(dfd, name, 0700, 0) < 0)
		return;
}

/* Removes what dfd/name holds, following no link; folders deeper than
 * REMOVE_DEPTH below top are moved into top first (then removed by the
 * caller's next pass).  Returns how many things it moved up. */
static unsigned remove_at(int dfd, const char *name, int top, unsigned depth)
{
	struct stat st;
	unsigned moved = 0;
	DIR *d;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (!S_ISDIR(st.st_mode)) {
		unlinkat(dfd, name, 0);
		return 0;
	}
	if (depth >= REMOVE_DEPTH) {
		char up[64];

		snprintf(up, sizeof(up), ".deep-%d-%u-%llu", (int)getpid(), depth,
			 (unsigned long long)clock_mono_ns());
		return renameat(dfd, name, top, up) == 0;
	}
	own_dir(dfd, name);
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			moved += remove_at(fd, e->d_name, top, depth + 1);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
	return moved;
}

void evalrun_tree_remove(const char *path)
{
	char *copy = str_dup(path), *slash;
	int parent, top;

	if (!copy)
		return;
	slash = strrchr(copy, '/');
	if (!slash || !slash[1]) {
		free(copy);
		return;
	}
	*slash = '\0';
	parent = open(copy[0] ? copy : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	top = parent < 0 ? -1 : openat(parent, slash + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Passes until nothing was moved up: each removes REMOVE_DEPTH levels. */
	for (int pass = 0; top >= 0 && pass < 1000; pass++) {
		struct stat st;
		unsigned moved = 0;
		DIR *d;
		int fd = dup(top);

		if (fd < 0 || !(d = fdopendir(fd))) {
			if (fd >= 0)
				close(fd);
			break;
		}
		rewinddir(d); /* a dup shares the last pass's offset */
		for (struct dirent *e; (e = readdir(d));)
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				moved += remove_at(top, e->d_name, top, 1);
		closedir(d);
		if (!moved || fstat(top, &st) < 0)
			break;
	}
	if (top >= 0)
		close(top);
	if (parent >= 0) {
		if (unlinkat(parent, slash + 1, AT_REMOVEDIR) < 0 && errno != ENOENT)
			stark_warn("build cache: cannot remove %s: %s", path, strerror(errno));
		close(parent);
	} else {
		stark_warn("build cache: cannot remove %s: %s", path, strerror(errno));
	}
	free(copy);
}

/* Names "PID-..." or ".tmp-PID-..." of a process that is gone. */
static bool stale(const char *name)
{
	char *end;
	long pid;

	if (str_starts(name, ".tmp-"))
		name += 5;
	pid = strtol(name, &end, 10);
	if (end == name || *end != '-' || pid <= 0 || pid > INT_MAX || pid == getpid())
		return false;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static void sweep(const char *root, const char *a, const char *b)
{
	char path[PATH_MAX];
	int fd = open_dir(root, a, b);
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (!stale(e->d_name))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s%s%s/%s", root, a, b ? "/" : "", b ? b : "",
			     e->d_name) < (int)sizeof(path))
			evalrun_tree_remove(path);
	}
	closedir(d);
}

int evalrun_cache_prepare(const char *root, char *err, size_t errlen)
{
	static const char *const dirs[][2] = {
	    {"store", "builds"}, {"store", "failed"}, {"store", "plans"}, {"jit", NULL},
	    {"scratch", NULL}};
	static bool swept;

	for (size_t i = 0; i < ST_ARRAY_LEN(dirs); i++) {
		int fd = open_dir(root, dirs[i][0], dirs[i][1]);

		if (fd < 0) {
			snprintf(err, errlen, "cannot create %s/%s%s%s in the build cache: %s", root,
				 dirs[i][0], dirs[i][1] ? "/" : "", dirs[i][1] ? dirs[i][1] : "",
				 strerror(errno));
			return ST_EIO;
		}
		close(fd);
	}
	/* What processes that died (kill -9, a crash) left behind. */
	if (!swept) {
		swept = true;
		sweep(root, "scratch", NULL);
		sweep(root, "store", "builds");
		sweep(root, "store", "failed");
		sweep(root, "store", "plans");
		sweep(root, "jit", NULL);
	}
	return 0;
}

int evalrun_scratch_make(const char *root, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/scratch/%d-XXXXXX", root, (int)getpid());

	if (n < 0 || (size_t)n >= len || n >= PROTO_PATH_MAX)
		return stark_error(ST_ETOOBIG, "build cache: the path of a scratch folder under %s is too long", root);
	if (!mkdtemp(out))
		return stark_error(ST_EIO, "build cache: cannot create a scratch folder in %s/scratch: %s", root,
				   strerror(errno));
	return 0;
}

struct copy_ctx {
	struct evalrun_publish *st;
	uint64_t file_max, total_max, files_max; /* the caps of its kind */
	char *buf;
	char why[256];
};

static int too_big(struct copy_ctx *c, const char *what)
{
	snprintf(c->why, sizeof(c->why), "%s", what);
	return ST_ETOOBIG;
}

static int io_fail(struct copy_ctx *c, const char *what, const char *name)
{
	snprintf(c->why, sizeof(c->why), "%s %.100s: %s", what, name, strerror(errno));
	return ST_EIO;
}

/* Copies one regular file, as fstat saw it when opened. */
static int copy_file(struct copy_ctx *c, int sfd, int dfd, const char *name, const struct stat *seen)
{
	struct stat st;
	uint64_t left;
	int in, out, rc = 0;

	if ((uint64_t)seen->st_size > c->file_max)
		return too_big(c, "a file is larger than the cap on one file of an entry");
	if (c->st->files + 1 > c->files_max)
		return too_big(c, "the folder holds more files than the cap on an entry");
	if (c->st->bytes + (uint64_t)seen->st_size > c->total_max)
		return too_big(c, "the folder is larger than the cap on an entry");
	in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0) {
		c->st->skipped++; /* unreadable: the candidate's own loss */
		return 0;
	}
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != seen->st_ino ||
	    st.st_dev != seen->st_dev) {
		close(in);
		c->st->skipped++;
		return 0;
	}
	out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		     (st.st_mode & 0111) ? 0700 : 0600);
	if (out < 0) {
		close(in);
		return io_fail(c, "cannot create", name);
	}
	for (left = (uint64_t)st.st_size; left > 0 && !rc;) {
		ssize_t r = read(in, c->buf, left < COPY_CHUNK ? (size_t)left : COPY_CHUNK);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break; /* shorter than it was: copy what is there */
		if (io_write_full(out, c->buf, (size_t)r))
			rc = io_fail(c, "cannot write", name);
		left -= (uint64_t)r;
		c->st->bytes += (uint64_t)r;
	}
	if (!rc && fsync(out) < 0)
		rc = io_fail(c, "cannot sync", name);
	close(in);
	if (close(out) < 0 && !rc)
		rc = io_fail(c, "cannot close", name);
	c->st->files++;
	return rc;
}

static int copy_dir(struct copy_ctx *c, int sfd, int dfd, unsigned depth)
{
	DIR *d;
	int fd = dup(sfd), rc = 0;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return io_fail(c, "cannot read", "the build folder");
	}
	rewinddir(d);
	for (struct dirent *e; !rc && (e = readdir(d));) {
		struct stat st;
		int s2, d2;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    (depth == 0 && !strcmp(e->d_name, ENTRY_MARK)))
			continue;
		if (fstatat(sfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			rc = copy_file(c, sfd, dfd, e->d_name, &st);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			c->st->skipped++; /* links, fifos, sockets: never followed */
			continue;
		}
		if (depth + 1 > EVALRUN_PUBLISH_DEPTH_MAX) {
			rc = too_big(c, "the folder's folders are nested deeper than the cap");
			break;
		}
		if (c->st->files + 1 > c->files_max) {
			rc = too_big(c, "the folder holds more files than the cap on an entry");
			break;
		}
		own_dir(sfd, e->d_name);
		s2 = openat(sfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (s2 < 0) {
			c->st->skipped++;
			continue;
		}
		if (mkdirat(dfd, e->d_name, 0700) < 0 ||
		    (d2 = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			close(s2);
			rc = io_fail(c, "cannot create", e->d_name);
			break;
		}
		c->st->files++;
		rc = copy_dir(c, s2, d2, depth + 1);
		if (!rc && fsync(d2) < 0)
			rc = io_fail(c, "cannot sync", e->d_name);
		close(s2);
		close(d2);
	}
	closedir(d);
	return rc;
}

/* The entry's mark, written last: its key and what was copied. */
static int write_mark(struct copy_ctx *c, int dfd, const char *key)
{
	char text[256];
	int fd, n;

	n = snprintf(text, sizeof(text), "{\"key\": \"%s\", \"files\": %llu, \"bytes\": %llu, \"skipped\": %llu}\n",
		     key, (unsigned long long)c->st->files, (unsigned long long)c->st->bytes,
		     (unsigned long long)c->st->skipped);
	fd = openat(dfd, ENTRY_MARK, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return io_fail(c, "cannot create", ENTRY_MARK);
	if (io_write_full(fd, text, (size_t)n) || fsync(fd) < 0) {
		close(fd);
		return io_fail(c, "cannot write", ENTRY_MARK);
	}
	close(fd);
	return fsync(dfd) < 0 ? io_fail(c, "cannot sync", "the entry") : 0;
}

int evalrun_publish(const char *root, const char *dir, const char *key, const char *scratch,
		    struct evalrun_publish *st, char *why, size_t whylen)
{
	bool jit = dir && !strcmp(dir, "jit");
	struct copy_ctx c = {.st = st,
			     .file_max = jit ? EVALRUN_JIT_TOTAL_MAX : EVALRUN_PUBLISH_FILE_MAX,
			     .total_max = jit ? EVALRUN_JIT_TOTAL_MAX : EVALRUN_PUBLISH_TOTAL_MAX,
			     .files_max = jit ? EVALRUN_JIT_FILES_MAX : EVALRUN_PUBLISH_FILES_MAX};
	char tmp[64] = "", target[EVALRUN_KEY_LEN + 1];
	int builds = -1, src = -1, dst = -1, rc;

	memset(st, 0, sizeof(*st));
	why[0] = '\0';
	if (!evalrun_key_valid(key) || !dir || (strcmp(dir, "builds") && !jit))
		return stark_error(ST_EINVAL, "build cache: bad key or folder");
	snprintf(target, sizeof(target), "%s", key);
	c.buf = malloc(COPY_CHUNK);
	builds = jit ? open_dir(root, "jit", NULL) : open_dir(root, "store", "builds");
	src = open(scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (!c.buf || builds < 0 || src < 0) {
		rc = c.buf ? io_fail(&c, "cannot open", builds < 0 ? dir : "the scratch folder")
			   : ST_ENOMEM;
		goto out;
	}
	for (int i = 0; i < 100; i++) {
		snprintf(tmp, sizeof(tmp), ".tmp-%d-%llu-%d", (int)getpid(),
			 (unsigned long long)clock_mono_ns(), i);
		if (mkdirat(builds, tmp, 0700) == 0)
			break;
		tmp[0] = '\0';
		if (errno != EEXIST)
			break;
	}
	if (!tmp[0] || (dst = openat(builds, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = io_fail(&c, "cannot create", "a folder in the store");
		goto out;
	}
	rc = copy_dir(&c, src, dst, 0);
	if (!rc)
		rc = write_mark(&c, dst, key);
	if (!rc && renameat(builds, tmp, builds, target) < 0) {
		/* Another evaluation published the same key first: keep it. */
		rc = errno == EEXIST || errno == ENOTEMPTY ? 1 : io_fail(&c, "cannot rename into", key);
	}
	if (!rc)
		fsync(builds);
out:
	if (dst >= 0)
		close(dst);
	if (rc && tmp[0] && builds >= 0) {
		char path[PATH_MAX];

		if (snprintf(path, sizeof(path), "%s/%s/%s", root, jit ? "jit" : "store/builds", tmp) <
		    (int)sizeof(path))
			evalrun_tree_remove(path);
	}
	if (src >= 0)
		close(src);
	if (builds >= 0)
		close(builds);
	free(c.buf);
	snprintf(why, whylen, "%s", c.why);
	return rc;
}

int evalrun_jit_restore(const char *root, const char *key, const char *dir,
			struct evalrun_publish *st, char *why, size_t whylen)
{
	struct copy_ctx c = {.st = st, .file_max = EVALRUN_JIT_TOTAL_MAX,
			     .total_max = EVALRUN_JIT_TOTAL_MAX, .files_max = EVALRUN_JIT_FILES_MAX};
	struct stat sb;
	int jit = -1, entry = -1, dst = -1, cache = -1, fd, rc = 0;

	memset(st, 0, sizeof(*st));
	why[0] = '\0';
	if (!evalrun_key_valid(key))
		return stark_error(ST_EINVAL, "build cache: bad key");
	jit = open_dir(root, "jit", NULL);
	entry = jit < 0 ? -1 : openat(jit, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (entry < 0 || fstatat(entry, ENTRY_MARK, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(sb.st_mode))
		goto out; /* none published (or not whole): 0 */
	c.buf = malloc(COPY_CHUNK);
	dst = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (!c.buf || dst < 0) {
		rc = c.buf ? io_fail(&c, "cannot open", "the JIT cache's folder") : ST_ENOMEM;
		goto out;
	}
	if (mkdirat(dst, "cache", 0700) < 0 ||
	    (cache = openat(dst, "cache", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = io_fail(&c, "cannot create", "cache");
		goto out;
	}
	rc = copy_dir(&c, entry, cache, 0);
	if (rc)
		goto out;
	fd = openat(dst, "restored", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || io_write_full(fd, key, EVALRUN_KEY_LEN)) {
		rc = io_fail(&c, "cannot write", "restored");
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	rc = 1;
out:
	if (cache >= 0)
		close(cache);
	if (dst >= 0)
		close(dst);
	if (entry >= 0)
		close(entry);
	if (jit >= 0)
		close(jit);
	free(c.buf);
	snprintf(why, whylen, "%s", c.why);
	return rc;
}

/* Writes text to root/store/DIR/KEY: a temporary file renamed into
 * place.  0 or ST_EIO (printed, naming what). */
static int store_doc(const char *root, const char *dir, const char *key, const char *text,
		     const char *what)
{
	char tmp[64];
	int dfd, fd, rc = 0;

	dfd = open_dir(root, "store", dir);
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%llu", (int)getpid(), (unsigned long long)clock_mono_ns());
	fd = dfd < 0 ? -1 : openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || io_write_full(fd, text, strlen(text)) || fsync(fd) < 0 ||
	    renameat(dfd, tmp, dfd, key) < 0) {
		rc = stark_error(ST_EIO, "build cache: cannot %s in %s/store/%s: %s", what, root, dir,
				 strerror(errno));
		if (dfd >= 0)
			unlinkat(dfd, tmp, 0);
	}
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return rc;
}

int evalrun_remember_failure(const char *root, const char *key, const char *message,
			     const char *log)
{
	json_t *doc;
	char *text;
	int rc;

	if (!evalrun_key_valid(key))
		return ST_EINVAL;
	doc = json_pack("{s:s, s:s}", "message", message ? message : "", "log", log ? log : "");
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text)
		return ST_ENOMEM;
	rc = store_doc(root, "failed", key, text, "remember a failed build");
	free(text);
	return rc;
}

int evalrun_plan_key(const char *device, const char *problem, size_t plen,
		     char out[EVALRUN_KEY_LEN + 1])
{
	char ph[EVALRUN_KEY_LEN + 1], text[256];
	int n;

	if (!device)
		return ST_EINVAL;
	sha256_hex(problem ? problem : "", problem ? plen : 0, ph);
	n = snprintf(text, sizeof(text), "%s\ndevice %s\nproblem %s\n", plan_version,
		     str_starts(device, "cuda") ? "cuda" : "cpu", ph);
	if (n < 0 || (size_t)n >= sizeof(text))
		return ST_EINVAL;
	sha256_hex(text, (size_t)n, out);
	return 0;
}

/* Whether doc is an estimate as the referee makes it: an object of
 * exactly these fields, each a number >= 0 (the first five integers), and
 * the fingerprint it was made under. */
static bool plan_doc_valid(json_t *doc)
{
	static const char *const fields[] = {"in", "out", "weights", "fwd", "kernels",
					     "gpu_us_least", "fwd_s"};
	json_t *fp = json_object_get(doc, "fp");

	if (!json_is_object(doc) || json_object_size(doc) != ST_ARRAY_LEN(fields) + 1 ||
	    !json_is_string(fp) || !evalrun_key_valid(json_string_value(fp)))
		return false;
	for (size_t i = 0; i < ST_ARRAY_LEN(fields); i++) {
		json_t *v = json_object_get(doc, fields[i]);

		if (i < 5 ? !json_is_integer(v) || json_integer_value(v) < 0
			  : !json_is_number(v) || !(json_number_value(v) >= 0))
			return false;
	}
	return true;
}

int evalrun_plan_store(const char *root, const char *key, const char *text)
{
	json_t *doc;
	char *out;
	int rc;

	if (!evalrun_key_valid(key) || !text || strlen(text) > PROTO_PLAN_MAX)
		return ST_EINVAL;
	doc = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (!plan_doc_valid(doc)) {
		json_decref(doc);
		return ST_EINVAL;
	}
	/* Written as we print it, never the referee's bytes as they came. */
	out = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(doc);
	if (!out)
		return ST_ENOMEM;
	rc = strlen(out) > PROTO_PLAN_MAX ? ST_EINVAL
					  : store_doc(root, "plans", key, out, "keep an estimate");
	free(out);
	return rc;
}

bool evalrun_plan_load(const char *root, const char *key, char buf[PROTO_PLAN_MAX + 1])
{
	char path[PATH_MAX];
	ssize_t n = -1;
	int fd;

	buf[0] = '\0';
	if (!evalrun_key_valid(key) ||
	    snprintf(path, sizeof(path), "%s/store/plans/%s", root, key) >= (int)sizeof(path))
		return false;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		size_t got = 0;
		ssize_t r;

		while (got < PROTO_PLAN_MAX + 1 &&
		       ((r = read(fd, buf + got, PROTO_PLAN_MAX + 1 - got)) > 0 ||
			(r < 0 && errno == EINTR)))
			got += r > 0 ? (size_t)r : 0;
		n = (ssize_t)got;
		close(fd);
	}
	if (n <= 0 || n > PROTO_PLAN_MAX || memchr(buf, '\0', (size_t)n)) {
		buf[0] = '\0';
		return false;
	}
	buf[n] = '\0';
	return true;
}
