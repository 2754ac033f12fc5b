/*
 * hello.c — the smallest program a user of the installed libwharf writes: it includes
 * <wharf/wharf.h> and calls wharf_version(). Never built in the tree (the Makefile leaves
 * testbed/extern/ out): t_install.sh copies it outside, compiles it with
 * `pkg-config --cflags --libs wharf` (shared) and `--static` against a temporary prefix, and
 * runs it. It prints the library's version and fails when the library that answered is not
 * the one the header it was compiled with describes.
 */
#include <stdio.h>
#include <string.h>

#include <wharf/wharf.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define HEADER_VERSION STR(WHARF_VERSION_MAJOR) "." STR(WHARF_VERSION_MINOR) "." STR(WHARF_VERSION_PATCH)

int main(void)
{
	const char *v = wharf_version();

	printf("wharf %s\n", v);
	if (strcmp(v, HEADER_VERSION) != 0) {
		fprintf(stderr, "hello: libwharf says %s, its header %s\n", v, HEADER_VERSION);
		return 1;
	}
	return 0;
}
