/*
 * wharf-ctl — talks to a running node's control plane (kernel TCP): readiness, the status
 * table (per-lcore, per-connection, per-table counters), a checkpoint, shutdown.
 *
 *   wharf-ctl [--timeout-ms MS] HOST:PORT health|status|save [PATH]|shutdown
 *
 * Call chain: main -> wc_parse_endpoint, wc_endpoint_resolve -> wc_ctl_request -> print the
 * answer.
 * Exit status: 0 the node said "ok", 1 it answered an error or did not answer (or HOST does
 * not resolve), 2 bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/common/wc_psnet.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: wharf-ctl [--timeout-ms MS] HOST:PORT COMMAND\n"
		   "  HOST:PORT   a node's control endpoint (an IPv4 address or host name, and port)\n"
		   "  COMMAND     health | status | save [PATH] | shutdown\n"
		   "              save without PATH writes the server's --ckpt file\n"
		   "Exit status: 0 ok, 1 the node refused or did not answer (or HOST does not\n"
		   "resolve), 2 bad usage.\n");
}

int main(int argc, char **argv)
{
	struct wc_endpoint ep;
	char cmd[WC_PATH_LEN + 16], err[512];
	char *out;
	unsigned timeout = 5000;
	int i = 1, rc;

	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "--timeout-ms") == 0) {
		if (wc_parse_uint(argv[2], 1, 600000, &timeout, "--timeout-ms", err, sizeof(err)) != 0) {
			fprintf(stderr, "wharf-ctl: %s\n", err);
			return 2;
		}
		i = 3;
	}
	if (argc - i < 2 || argc - i > 3) {
		usage(stderr);
		return 2;
	}
	if (wc_parse_endpoint(argv[i], strlen(argv[i]), false, &ep, "HOST:PORT", err,
			      sizeof(err)) != 0) {
		fprintf(stderr, "wharf-ctl: %s\n", err);
		return 2;
	}
	if (wc_endpoint_resolve(&ep, NULL, "HOST:PORT", err, sizeof(err)) != 0) {
		fprintf(stderr, "wharf-ctl: %s\n", err);
		return 1;
	}
	if (strcmp(argv[i + 1], "save") != 0 && argc - i == 3) {
		fprintf(stderr, "wharf-ctl: only save takes an argument\n");
		return 2;
	}
	snprintf(cmd, sizeof(cmd), "%s%s%s", argv[i + 1], argc - i == 3 ? " " : "",
		 argc - i == 3 ? argv[i + 2] : "");
	out = malloc(WC_CTL_MAX);
	if (out == NULL)
		return 1;
	rc = wc_ctl_request(&ep, cmd, (int)timeout, out, WC_CTL_MAX, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "wharf-ctl: %s\n", err);
		free(out);
		return 1;
	}
	printf("%s\n", out);
	rc = strncmp(out, "ok", 2) == 0 ? 0 : 1;
	free(out);
	return rc;
}
