/*
 * wharf-ctl — talks to a running node's control plane (kernel TCP): readiness, the status
 * table (per-lcore, per-connection, per-table counters), a checkpoint, shutdown.
 *
 *   wharf-ctl [--timeout-ms MS] [--ctl-token-file FILE] HOST:PORT health|status|save [PATH]|shutdown
 *
 * health needs no token; the other commands send the node's control token, found as
 * ps_ctl_token_find says: --ctl-token-file, WHARF_CTL_TOKEN, WHARF_CTL_TOKEN_FILE, or the
 * file a node at HOST:PORT made in the run directory.
 *
 * Call chain: main -> ps_parse_endpoint, ps_endpoint_resolve -> ps_ctl_token_find ->
 * ps_ctl_request -> print the answer. Exit status: 0 the node said "ok", 1 it answered an
 * error or did not answer (or HOST does not resolve), 2 bad usage (a token source given but
 * unreadable included).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_net.h"

extern char **environ;

static void usage(FILE *f)
{
	fprintf(f, "usage: wharf-ctl [--timeout-ms MS] [--ctl-token-file FILE] HOST:PORT COMMAND\n"
		   "  HOST:PORT   a node's control endpoint (an IPv4 address or host name, and port)\n"
		   "  COMMAND     health | status | save [PATH] | shutdown\n"
		   "              save without PATH writes the server's --ckpt file; with PATH, a\n"
		   "              file under the checkpoint's directory (relative to it, or inside it)\n"
		   "  --ctl-token-file FILE  the node's control token (status, save and shutdown\n"
		   "              need it; health does not). Else WHARF_CTL_TOKEN, WHARF_CTL_TOKEN_FILE,\n"
		   "              or the file the node made: $WHARF_RUNTIME_DIR (or $XDG_RUNTIME_DIR/wharf,\n"
		   "              or /tmp/wharf-UID)/ctl-IP-PORT.token\n"
		   "Exit status: 0 ok, 1 the node refused or did not answer (or HOST does not\n"
		   "resolve), 2 bad usage.\n");
}

int main(int argc, char **argv)
{
	struct ps_endpoint ep;
	char cmd[PS_PATH_LEN + 16], err[PS_PATH_LEN + 256], src[PS_PATH_LEN + 96];
	char tok[PS_CTL_TOKEN_MAX + 1];
	const char *file = NULL;
	char *out;
	unsigned timeout = 5000;
	int i = 1, rc;

	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	while (i + 1 < argc && strncmp(argv[i], "--", 2) == 0) {
		if (strcmp(argv[i], "--timeout-ms") == 0) {
			if (ps_parse_uint(argv[i + 1], 1, 600000, &timeout, "--timeout-ms", err,
					  sizeof(err)) != 0) {
				fprintf(stderr, "wharf-ctl: %s\n", err);
				return 2;
			}
		} else if (strcmp(argv[i], "--ctl-token-file") == 0) {
			file = argv[i + 1];
		} else {
			fprintf(stderr, "wharf-ctl: unknown option %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
		i += 2;
	}
	if (argc - i < 2 || argc - i > 3) {
		usage(stderr);
		return 2;
	}
	if (ps_parse_endpoint(argv[i], strlen(argv[i]), false, &ep, "HOST:PORT", err,
			      sizeof(err)) != 0) {
		fprintf(stderr, "wharf-ctl: %s\n", err);
		return 2;
	}
	if (ps_endpoint_resolve(&ep, NULL, "HOST:PORT", err, sizeof(err)) != 0) {
		fprintf(stderr, "wharf-ctl: %s\n", err);
		return 1;
	}
	if (strcmp(argv[i + 1], "save") != 0 && argc - i == 3) {
		fprintf(stderr, "wharf-ctl: only save takes an argument\n");
		return 2;
	}
	if (strlen(argv[i + 1]) + (argc - i == 3 ? strlen(argv[i + 2]) + 1 : 0) >= sizeof(cmd)) {
		fprintf(stderr, "wharf-ctl: command longer than %zu bytes\n", sizeof(cmd) - 1);
		return 2;
	}
	snprintf(cmd, sizeof(cmd), "%s%s%s", argv[i + 1], argc - i == 3 ? " " : "",
		 argc - i == 3 ? argv[i + 2] : "");
	if (ps_ctl_token_find(file, environ, &ep, tok, sizeof(tok), src, sizeof(src), err,
			      sizeof(err)) != 0) {
		fprintf(stderr, "wharf-ctl: %s\n", err);
		return 2;
	}
	out = malloc(PS_CTL_MAX);
	if (out == NULL)
		return 1;
	rc = ps_ctl_request(&ep, tok, cmd, (int)timeout, out, PS_CTL_MAX, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "wharf-ctl: %s\n", err);
		free(out);
		return 1;
	}
	printf("%s\n", out);
	rc = strncmp(out, "ok", 2) == 0 ? 0 : 1;
	if (rc != 0 && strstr(out, "control token") != NULL)
		fprintf(stderr, "wharf-ctl: the token sent came from %s\n", src);
	free(out);
	return rc;
}
