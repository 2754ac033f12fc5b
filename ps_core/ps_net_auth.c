/*
 * ps_net_auth.c — the control plane's token and the paths a control command may name.
 *
 * A node answers "health" to anyone (what readiness and liveness probes ask), and status,
 * save and shutdown only with its control token, compared in constant time. The token comes
 * from a file (--ctl-token-file, WHARF_CTL_TOKEN_FILE, the JSON key ctl_token_file) or the
 * variable WHARF_CTL_TOKEN, as Jupyter and Ray take theirs; with neither, the node makes one
 * (32 random bytes, hex) and writes it to <run dir>/ctl-<ip>-<port>.token, mode 0600 in a
 * directory only its user can enter, and logs the path: wharf-ctl, run by the same user on
 * the same host, finds it there by the endpoint it talks to, so scripts need no change.
 * "save PATH" writes only under the directory of the node's checkpoint (never into its log
 * directory, never through ".."), so a control peer cannot make the PS overwrite other files.
 *
 * Call chain: ps_config_load -> ps_cluster_finalize -> ps_ctl_token_config (the token of the
 *   configuration, if any; the run directory); ps_net_create (lane 0) -> ps_ctl_token_make
 *   when there is none; ps_net_ctl_handle -> ps_ctl_token_equal, ps_ctl_save_target; wharf-ctl
 *   and ps_fleet_stop_servers -> ps_ctl_token_find.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_core/ps_net.h"
#include "ps_core/ps_config_pvt.h"

int ps_ctl_token_check(const char *tok, const char *what, char *err, size_t errlen)
{
	size_t n = strlen(tok), i;

	if (n < PS_CTL_TOKEN_MIN || n > PS_CTL_TOKEN_MAX)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: a control token of %zu bytes; expected "
			       "%u..%u", what, n, PS_CTL_TOKEN_MIN, PS_CTL_TOKEN_MAX);
	for (i = 0; i < n; i++)
		if (tok[i] < 0x21 || tok[i] > 0x7e)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: the control token has byte 0x%02x at "
				       "%zu; expected printable ASCII without spaces", what,
				       (unsigned char)tok[i], i);
	return 0;
}

int ps_ctl_token_read(const char *path, char *tok, size_t toklen, const char *what, char *err,
		      size_t errlen)
{
	char buf[PS_CTL_TOKEN_MAX + 3];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return ps_errf_rc(err, errlen, -errno, "%s %s: %s", what, path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc < 0)
		return ps_errf_rc(err, errlen, rc, "%s %s: %s", what, path, strerror(-rc));
	/* One line: the newline (and spaces) an editor or echo leaves at its end go. */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
			 buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	if (toklen <= (size_t)n)
		return ps_errf_rc(err, errlen, -EINVAL, "%s %s: longer than %u bytes", what, path,
			       PS_CTL_TOKEN_MAX);
	{
		char w[PS_PATH_LEN + 64];
		snprintf(w, sizeof(w), "%s %s", what, path);
		if ((rc = ps_ctl_token_check(buf, w, err, errlen)) != 0)
			return rc;
	}
	memcpy(tok, buf, (size_t)n + 1);
	return 0;
}

void ps_ctl_run_dir_default(char *const envp[], char *out, size_t len)
{
	const char *v = ps_env_get(envp, "WHARF_RUNTIME_DIR");

	if (v != NULL && v[0] != '\0')
		snprintf(out, len, "%s", v);
	else if ((v = ps_env_get(envp, "XDG_RUNTIME_DIR")) != NULL && v[0] == '/')
		snprintf(out, len, "%s/wharf", v);
	else
		snprintf(out, len, "/tmp/wharf-%u", (unsigned)geteuid());
}

/* The run directory, made when missing; refused unless a directory of ours, private. */
static int run_dir_open(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ps_errf_rc(err, errlen, -errno, "run directory %s: %s (WHARF_RUNTIME_DIR names "
			       "another)", dir, strerror(errno));
	if (lstat(dir, &st) < 0)
		return ps_errf_rc(err, errlen, -errno, "run directory %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
		return ps_errf_rc(err, errlen, -EPERM, "run directory %s is not private (%s, owner %u, "
			       "mode %03o): a control token must not be readable by others; make it "
			       "a directory of uid %u with mode 700, or set WHARF_RUNTIME_DIR",
			       dir, S_ISDIR(st.st_mode) ? "directory" : "not a directory",
			       (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
			       (unsigned)geteuid());
	return 0;
}

void ps_ctl_token_path(const char *run_dir, const struct ps_endpoint *ep, char *out, size_t len)
{
	/* By address when resolved: the node and wharf-ctl may spell its host differently. */
	if (ep->resolved)
		snprintf(out, len, "%s/ctl-%u.%u.%u.%u-%u.token", run_dir, ep->ip >> 24,
			 (ep->ip >> 16) & 255, (ep->ip >> 8) & 255, ep->ip & 255, ep->port);
	else
		snprintf(out, len, "%s/ctl-%s-%u.token", run_dir, ep->host, ep->port);
}

int ps_ctl_token_make(const char *run_dir, const struct ps_endpoint *ep, char *tok, size_t toklen,
		      char *path, size_t pathlen, char *err, size_t errlen)
{
	uint8_t r[32];
	char tmp[PS_PATH_LEN + 96];
	size_t got = 0, i;
	ssize_t n;
	int fd, rc;

	if (toklen < 2 * sizeof(r) + 1)
		return ps_errf_rc(err, errlen, -EINVAL, "control token buffer too small");
	while (got < sizeof(r)) {
		n = getrandom(r + got, sizeof(r) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ps_errf_rc(err, errlen, -errno, "getrandom: %s", strerror(errno));
		got += (size_t)n;
	}
	for (i = 0; i < sizeof(r); i++)
		snprintf(tok + 2 * i, 3, "%02x", r[i]);
	if ((rc = run_dir_open(run_dir, err, errlen)) != 0)
		return rc;
	ps_ctl_token_path(run_dir, ep, path, pathlen);
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ps_errf_rc(err, errlen, -errno, "control token file %s: %s", tmp, strerror(errno));
	n = write(fd, tok, 2 * sizeof(r));
	rc = n == (ssize_t)(2 * sizeof(r)) && write(fd, "\n", 1) == 1 ? 0 : (errno ? -errno : -EIO);
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	/* Renamed into place: a reader never sees half a token. */
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc != 0) {
		unlink(tmp);
		return ps_errf_rc(err, errlen, rc, "control token file %s: %s", path, strerror(-rc));
	}
	return 0;
}

void ps_ctl_token_unmake(const char *path, const char *tok)
{
	char cur[PS_CTL_TOKEN_MAX + 1], err[8];

	/* Only our own: a node started on the endpoint since may have written its file. */
	if (ps_ctl_token_read(path, cur, sizeof(cur), "", err, sizeof(err)) == 0 &&
	    strcmp(cur, tok) == 0)
		unlink(path);
}

int ps_ctl_token_find(const char *file, char *const envp[], const struct ps_endpoint *ep,
		      char *tok, size_t toklen, char *src, size_t srclen, char *err, size_t errlen)
{
	char path[PS_PATH_LEN + 96], dir[PS_PATH_LEN];
	const char *v;
	int rc;

	tok[0] = '\0';
	if (file != NULL && file[0] != '\0') {
		snprintf(src, srclen, "%s", file);
		return ps_ctl_token_read(file, tok, toklen, "--ctl-token-file", err, errlen);
	}
	if ((v = ps_env_get(envp, "WHARF_CTL_TOKEN")) != NULL) {
		snprintf(src, srclen, "WHARF_CTL_TOKEN");
		if ((rc = ps_ctl_token_check(v, "WHARF_CTL_TOKEN", err, errlen)) != 0)
			return rc;
		snprintf(tok, toklen, "%s", v);
		return 0;
	}
	if ((v = ps_env_get(envp, "WHARF_CTL_TOKEN_FILE")) != NULL) {
		snprintf(src, srclen, "%s", v);
		return ps_ctl_token_read(v, tok, toklen, "WHARF_CTL_TOKEN_FILE", err, errlen);
	}
	ps_ctl_run_dir_default(envp, dir, sizeof(dir));
	ps_ctl_token_path(dir, ep, path, sizeof(path));
	snprintf(src, srclen, "%s", path);
	rc = ps_ctl_token_read(path, tok, toklen, "control token file", err, errlen);
	if (rc == -ENOENT) {
		snprintf(src, srclen, "none (no %s)", path);
		return 0; /* health needs none */
	}
	return rc;
}

int ps_ctl_token_of(const struct ps_cluster *cl, const struct ps_endpoint *ep, char *tok,
		    size_t toklen, char *err, size_t errlen)
{
	char path[PS_PATH_LEN + 96];
	int rc;

	if (cl->ctl_token[0] != '\0') {
		snprintf(tok, toklen, "%s", cl->ctl_token);
		return 0;
	}
	ps_ctl_token_path(cl->run_dir, ep, path, sizeof(path));
	rc = ps_ctl_token_read(path, tok, toklen, "control token file", err, errlen);
	if (rc == -ENOENT) {
		tok[0] = '\0';
		return 0;
	}
	return rc;
}

int ps_ctl_token_config(struct ps_cluster *c, char *const envp[], char *err, size_t errlen)
{
	const char *v = ps_env_get(envp, "WHARF_CTL_TOKEN"), *what;
	bool flag_file = c->origin[PS_F_CTL_TOKEN_FILE] == PS_SRC_FLAGS;
	int rc;

	ps_ctl_run_dir_default(envp, c->run_dir, sizeof(c->run_dir));
	c->ctl_token[0] = '\0';
	snprintf(c->ctl_token_src, sizeof(c->ctl_token_src), "made at start");
	/* Precedence as everywhere: a flag's file, then the variable, then the env/JSON file. */
	if (v != NULL && !flag_file) {
		if ((rc = ps_ctl_token_check(v, "WHARF_CTL_TOKEN", err, errlen)) != 0)
			return rc;
		snprintf(c->ctl_token, sizeof(c->ctl_token), "%s", v);
		snprintf(c->ctl_token_src, sizeof(c->ctl_token_src), "WHARF_CTL_TOKEN");
		return 0;
	}
	if (c->ctl_token_file[0] == '\0')
		return 0;
	what = flag_file ? "--ctl-token-file" : c->origin[PS_F_CTL_TOKEN_FILE] == PS_SRC_FILE ?
	       "ctl_token_file" : "WHARF_CTL_TOKEN_FILE";
	if ((rc = ps_ctl_token_read(c->ctl_token_file, c->ctl_token, sizeof(c->ctl_token), what,
				    err, errlen)) != 0)
		return rc;
	snprintf(c->ctl_token_src, sizeof(c->ctl_token_src), "%s %s", what, c->ctl_token_file);
	return 0;
}

bool ps_ctl_token_equal(const char *given, size_t glen, const char *want, size_t wlen)
{
	volatile uint8_t d = glen != wlen;

	/* Every byte of want is looked at whatever differs, so the time tells nothing. */
	for (size_t i = 0; i < wlen; i++)
		d |= (uint8_t)want[i] ^ (uint8_t)(i < glen ? given[i] : 0);
	return d == 0;
}

/* Is dir (a realpath) a or below a? */
static bool under(const char *dir, const char *a)
{
	size_t n = strlen(a);

	return strncmp(dir, a, n) == 0 && (dir[n] == '\0' || dir[n] == '/' || strcmp(a, "/") == 0);
}

int ps_ctl_save_target(const char *ckpt, const char *wal_dir, const char *path, char *out,
		       size_t outlen, char *err, size_t errlen)
{
	char base[PS_PATH_LEN], want[2 * PS_PATH_LEN + 2], tmp[2 * PS_PATH_LEN + 2];
	char real_base[PATH_MAX], real_dir[PATH_MAX], real_wal[PATH_MAX];
	const char *p, *name;
	size_t n;

	if (ckpt == NULL || ckpt[0] == '\0')
		return ps_errf_rc(err, errlen, -EPERM, "save PATH writes under the directory of the "
			       "server's checkpoint, and this server has none (start it with --ckpt)");
	snprintf(tmp, sizeof(tmp), "%s", ckpt);
	snprintf(base, sizeof(base), "%s", dirname(tmp));
	/* No "..": a path names a file under the checkpoint's directory, nothing above it. */
	for (p = path; *p != '\0'; p += n + (p[n] == '/')) {
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return ps_errf_rc(err, errlen, -EPERM, "save %s: \"..\" is not allowed", path);
	}
	n = strlen(path);
	if (n == 0 || path[n - 1] == '/')
		return ps_errf_rc(err, errlen, -EINVAL, "save %s: expected a file name", path);
	if (path[0] == '/')
		snprintf(want, sizeof(want), "%s", path);
	else
		snprintf(want, sizeof(want), "%s/%s", base, path);
	if (realpath(base, real_base) == NULL)
		return ps_errf_rc(err, errlen, -errno, "checkpoint directory %s: %s", base, strerror(errno));
	snprintf(tmp, sizeof(tmp), "%s", want);
	if (realpath(dirname(tmp), real_dir) == NULL)
		return ps_errf_rc(err, errlen, -errno, "save %s: directory: %s", path, strerror(errno));
	/* Resolved, symbolic links and all: the file goes under the checkpoint's directory. */
	if (!under(real_dir, real_base))
		return ps_errf_rc(err, errlen, -EPERM, "save %s: outside the checkpoint directory %s",
			       path, real_base);
	if (wal_dir != NULL && wal_dir[0] != '\0' && realpath(wal_dir, real_wal) != NULL &&
	    under(real_dir, real_wal))
		return ps_errf_rc(err, errlen, -EPERM, "save %s: inside the write-ahead log directory %s",
			       path, real_wal);
	snprintf(tmp, sizeof(tmp), "%s", want);
	name = basename(tmp);
	if (strcmp(name, ".") == 0)
		return ps_errf_rc(err, errlen, -EINVAL, "save %s: expected a file name", path);
	/* The checkpoint itself by another spelling: its own path, so the log is cut as usual. */
	snprintf(want, sizeof(want), "%s", ckpt);
	if (strcmp(real_dir, real_base) == 0 && strcmp(name, basename(want)) == 0) {
		snprintf(out, outlen, "%s", ckpt);
		return 0;
	}
	if ((size_t)snprintf(out, outlen, "%s/%s", real_dir, name) >= outlen)
		return ps_errf_rc(err, errlen, -ENAMETOOLONG, "save %s: path too long", path);
	return 0;
}
