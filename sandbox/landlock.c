/*
 * landlock.c -- which files a process may execute, for the run jail of a
 * candidate whose language compiles at its first call.
 *
 * Triton's JIT execs its bundled ptxas, and the C compiler for its
 * launchers, when a kernel is first called: in the run stage, with the
 * candidate's code already loaded.  seccomp can allow or deny execve but
 * cannot see which file it names (the path is in the caller's memory), so
 * the RUN+EXEC filter (policy.c) allows execve and this Landlock ruleset,
 * installed by the evaluator's trusted start-up before any candidate code
 * runs, names the files: everything else fails with EACCES.  A Landlock
 * domain is inherited by every child and across exec and can only be made
 * stricter, so nothing the candidate does undoes it.
 *
 * Only LANDLOCK_ACCESS_FS_EXECUTE is handled: reads and writes stay as the
 * jail's mounts make them.  The kernel checks EXECUTE on the program and on
 * its ELF interpreter (both are opened for exec), not on libraries mapped
 * by the loader.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox_int.h"

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

int sandbox_landlock_abi(void)
{
	long v = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v > 0 ? (int)v : 0;
}

int sandbox_restrict_exec(const char *const *paths, size_t *skipped, char *err, size_t errlen)
{
	struct landlock_ruleset_attr attr = {.handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE};
	struct landlock_path_beneath_attr rule = {.allowed_access = LANDLOCK_ACCESS_FS_EXECUTE};
	bool refer = sandbox_landlock_abi() >= 2;
	size_t skip = 0;
	int rs, rc = ST_ESYS;

	if (skipped)
		*skipped = 0;
	/* From ABI 2 every ruleset denies moving or linking a file to another
	 * folder (EXDEV) unless it handles REFER and allows it: Triton
	 * publishes each cache entry by renaming it out of a temporary
	 * folder.  REFER is allowed everywhere (what the jail's mounts allow
	 * still decides), and Landlock refuses a move that would gain a right
	 * the file lacks where it is: a file cannot be moved into a folder
	 * whose files may be executed. */
	if (refer)
		attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
	rs = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0) {
		int e = errno;

		snprintf(err, errlen, "landlock: create ruleset: %s", strerror(e));
		return e == ENOSYS || e == EOPNOTSUPP ? ST_EDENIED : ST_ESYS;
	}
	if (refer) {
		struct landlock_path_beneath_attr all = {.allowed_access = LANDLOCK_ACCESS_FS_REFER};

		all.parent_fd = open("/", O_PATH | O_CLOEXEC | O_DIRECTORY);
		if (all.parent_fd < 0 ||
		    syscall(__NR_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &all, 0) < 0) {
			snprintf(err, errlen, "landlock: allow moves under /: %s", strerror(errno));
			if (all.parent_fd >= 0)
				close(all.parent_fd);
			goto out;
		}
		close(all.parent_fd);
	}
	for (size_t i = 0; paths && paths[i]; i++) {
		int fd = open(paths[i], O_PATH | O_CLOEXEC);

		if (fd < 0) {
			skip++;
			continue;
		}
		rule.parent_fd = fd;
		if (syscall(__NR_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0) {
			snprintf(err, errlen, "landlock: allow %s: %s", paths[i], strerror(errno));
			close(fd);
			goto out;
		}
		close(fd);
	}
	/* no_new_privs: required by restrict_self for an unprivileged caller;
	 * already set in every jail. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "landlock: set no_new_privs: %s", strerror(errno));
		goto out;
	}
	if (syscall(__NR_landlock_restrict_self, rs, 0) < 0) {
		snprintf(err, errlen, "landlock: restrict self: %s", strerror(errno));
		goto out;
	}
	if (skipped)
		*skipped = skip;
	rc = 0;
out:
	close(rs);
	return rc;
}
