/* space up: the bridges left behind. sbx-manager launches one spaced-host
 * per execution and lets it outlive itself (a restarted manager adopts its
 * bridges), so stopping the supervised daemons leaves the executions
 * running. `space up` stops everything: once its children are gone it
 * stops the bridges of its own data directory, then releases the network
 * namespaces sbx-manager holds for their executions (a bind of nsfs on
 * RUNDIR/netns): with no bridge left they hold only an uplink, and a mount
 * left under the data directory would keep it from being removed. The next
 * start relaunches each execution in a namespace made again. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "up.h"

#define CMDLINE_MAX 8192

/* Is pid a spaced-host of our binary directory serving an execution under
 * our data directory? The executable is checked through /proc/PID/exe, so
 * a process that only claims our paths in its argv is not touched. */
static int
ours(const struct up *up, const char *pid)
{
	char path[64], exe[UP_PATH_MAX], want[UP_PATH_MAX + 32], cmd[CMDLINE_MAX];
	char prefix[UP_PATH_MAX + 8];
	ssize_t n;
	size_t off;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/exe", pid);
	if ((n = readlink(path, exe, sizeof(exe) - 1)) < 0)
		return 0;
	exe[n] = '\0';
	snprintf(want, sizeof(want), "%s/spaced-host", up->bindir);
	/* a rebuild replaces the file under a running bridge: the kernel
	 * then shows the old path with " (deleted)" */
	if (strncmp(exe, want, strlen(want)) != 0 ||
	    (exe[strlen(want)] != '\0' && strcmp(exe + strlen(want), " (deleted)") != 0))
		return 0;
	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	cmd[n] = '\0';
	snprintf(prefix, sizeof(prefix), "%s/w", up->dir);
	/* argv is NUL-separated: find "--run-dir" and look at the next one */
	for (off = 0; off < (size_t)n; off += strlen(cmd + off) + 1)
		if (strcmp(cmd + off, "--run-dir") == 0) {
			off += strlen(cmd + off) + 1;
			return off < (size_t)n && strncmp(cmd + off, prefix, strlen(prefix)) == 0;
		}
	return 0;
}

static void stop_bridges(struct up *up);

/* signal every bridge of ours; the number found */
static int
signal_bridges(const struct up *up, int sig)
{
	DIR *d;
	struct dirent *e;
	int n = 0;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || !ours(up, e->d_name))
			continue;
		if (kill((pid_t)atoi(e->d_name), sig) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* a mount point of /proc/self/mountinfo, its octal escapes (\040 for a
 * space, ...) decoded in place */
static void
unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else
			*w++ = *s;
	}
	*w = '\0';
}

/* unmount and remove every execution's namespace bind under our workers'
 * directories; the number released */
static int
release_netns(const struct up *up)
{
	char line[2 * UP_PATH_MAX], prefix[UP_PATH_MAX + 8], *mp, *sep, *fstype;
	size_t pl, ml;
	FILE *f;
	int n = 0;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
		return 0;
	snprintf(prefix, sizeof(prefix), "%s/w", up->dir);
	pl = strlen(prefix);
	while (fgets(line, sizeof(line), f) != NULL) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - FSTYPE SOURCE OPTIONS */
		if ((sep = strstr(line, " - ")) == NULL)
			continue;
		*sep = '\0';
		fstype = sep + 3;
		if (strncmp(fstype, "nsfs ", 5) != 0)
			continue;
		mp = line;
		for (int i = 0; i < 4 && mp; i++)
			if ((mp = strchr(mp, ' ')) != NULL)
				mp++;
		if (mp == NULL)
			continue;
		mp[strcspn(mp, " ")] = '\0';
		unescape(mp);
		ml = strlen(mp);
		if (strncmp(mp, prefix, pl) != 0 || ml < 6 || strcmp(mp + ml - 6, "/netns") != 0)
			continue;
		if (umount2(mp, MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
			(void)unlink(mp);
			n++;
		}
	}
	fclose(f);
	return n;
}

void
up_bridges_stop(struct up *up)
{
	int n;

	stop_bridges(up);
	if ((n = release_netns(up)) > 0)
		up_say("released %d sandbox network namespace%s", n, n == 1 ? "" : "s");
}

static void
stop_bridges(struct up *up)
{
	int n, waited = 0;

	if ((n = signal_bridges(up, SIGTERM)) == 0)
		return;
	up_say("stopping %d sandbox bridge%s ...", n, n == 1 ? "" : "s");
	while (waited < UP_KILL_AFTER_MS && signal_bridges(up, 0) > 0) {
		usleep(100 * 1000);
		waited += 100;
	}
	if ((n = signal_bridges(up, SIGKILL)) > 0) {
		up_say("%d bridge%s did not stop within %d s: SIGKILL", n, n == 1 ? "" : "s",
		    UP_KILL_AFTER_MS / 1000);
		for (waited = 0; waited < 2000 && signal_bridges(up, 0) > 0; waited += 100)
			usleep(100 * 1000);
	}
}
