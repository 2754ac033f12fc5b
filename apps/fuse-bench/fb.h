/*
 * fb.h — wharf-fuse-bench's two halves: the in-process codec bench (main.c) and the
 * network mode over the transport (net.c), which main() hands over to when it sees
 * EAL arguments ("--") or --server/--peer.
 */
#ifndef WHARF_FB_H
#define WHARF_FB_H

#include <stdbool.h>

/* True when argv asks for the network mode. */
bool fb_net_wanted(int argc, char **argv);

/* The network mode's main: exit status 0 done, 1 run-time failure, 2 bad arguments. */
int fb_net_main(int argc, char **argv);

#endif /* WHARF_FB_H */
