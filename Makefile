# wharf — one Makefile for the whole tree.
#
# Layers are discovered by folder: every <layer>/*.c goes into build/lib/libwharf_<layer>.a,
# every <layer>/tests/test_*.c becomes one cmocka binary in build/tests/<layer>/ (other
# .c files in a tests/ folder are shared helpers linked into each of that folder's tests),
# every apps/<name>/ and testbed/<name>/ folder with C sources becomes build/wharf-<name>.
# So adding a file never means editing this Makefile. The installable library is every
# layer at once: build/lib/libwharf.a and build/lib/libwharf.so (make install, below).

CC      ?= gcc
PKGS    := libdpdk numa cmocka jansson
BUILD   := build

DPDK_CFLAGS := $(shell pkg-config --cflags libdpdk 2>/dev/null)
# libdpdk.pc leaves the drivers out (EAL loads them as plugins); dn_port asks net_vhost
# for a port's vhost device (rte_eth_vhost_get_vid_from_port_id), so that one is linked.
DPDK_LIBS   := $(shell pkg-config --libs libdpdk 2>/dev/null) -lrte_net_vhost

WARN    := -Wall -Wextra -Werror
OPT     ?= -O2 -g
CFLAGS  := $(OPT) $(EXTRA_CFLAGS) -std=c11 -D_GNU_SOURCE -DALLOW_EXPERIMENTAL_API $(WARN) -MMD -MP -I. -Iinclude $(DPDK_CFLAGS)
LDLIBS  := $(DPDK_LIBS) -lnuma -ljansson -lz -lm -lpthread
TEST_LDLIBS := -lcmocka

# Order matters for static linking: upper layers first. api is libwharf's public API
# (include/wharf/wharf.h), over ps_core; apps/common is the code the executables share (the
# demo trainer's datasets and models, the tools' flag helpers); it is a library too.
LAYERS  := api apps/common ps_core fuse transport dpdk_net
# The internal archives carry the wharf_ prefix: a bare -lfuse or -ltransport names a
# system library.
libname  = $(BUILD)/lib/libwharf_$(subst /,_,$(1)).a
LIBS    := $(foreach l,$(LAYERS),$(call libname,$(l)))

layer_srcs = $(wildcard $(1)/*.c)
layer_objs = $(patsubst %.c,$(BUILD)/obj/%.o,$(call layer_srcs,$(1)))

APP_DIRS := $(sort $(dir $(wildcard apps/*/*.c testbed/*/*.c)))
# testbed/extern/ holds programs built only outside the tree, against an installed libwharf.
APP_DIRS := $(filter-out testbed/tests/ testbed/extern/ apps/common/,$(APP_DIRS))
APPS     := $(foreach d,$(APP_DIRS),$(BUILD)/wharf-$(notdir $(patsubst %/,%,$(d))))

TEST_SRCS := $(wildcard $(addsuffix /tests/test_*.c,$(LAYERS)))
TESTS     := $(patsubst %.c,$(BUILD)/tests/%,$(subst /tests/,/,$(TEST_SRCS)))

# The installable library: libwharf.a, every layer's objects in one archive, and
# libwharf.so.MAJOR.MINOR.PATCH (soname libwharf.so.MAJOR), the same sources compiled again
# with -fPIC into build/pic/, linked against DPDK and the rest as DT_NEEDED, exporting only
# the public API (pkg/libwharf.map: wharf_*). The version is written once, in the public
# header's WHARF_VERSION_* macros.
WHARF_H    := include/wharf/wharf.h
wharf_ver   = $(shell sed -nE 's/^\#define WHARF_VERSION_$(1) +([0-9]+).*/\1/p' $(WHARF_H) 2>/dev/null)
VERSION    := $(call wharf_ver,MAJOR).$(call wharf_ver,MINOR).$(call wharf_ver,PATCH)
VERSION_OK := $(shell echo '$(VERSION)' | grep -xE '[0-9]+\.[0-9]+\.[0-9]+')
SONAME     := libwharf.so.$(call wharf_ver,MAJOR)
LIB_OBJS   := $(foreach l,$(LAYERS),$(call layer_objs,$(l)))
PIC_OBJS   := $(patsubst $(BUILD)/obj/%,$(BUILD)/pic/%,$(LIB_OBJS))
WHARF_SO   := $(BUILD)/lib/libwharf.so.$(VERSION)
WHARF_LIBS := $(BUILD)/lib/libwharf.a $(BUILD)/lib/libwharf.so
MANS       := $(patsubst $(BUILD)/wharf-%,$(BUILD)/man/wharf-%.1,$(APPS))

# Test helper objects are prerequisites of pattern rules: keep them between runs.
.SECONDARY:

.PHONY: all deps test unit unit-san build-tests integ fuzz soak e2e-full demo bench clean $(addprefix test-,$(notdir $(LAYERS))) hugepages python install-python
.PHONY: install uninstall man
all: $(LIBS) $(WHARF_LIBS) $(APPS) $(TESTS) python

# ---- libraries -------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

define LAYER_RULE
$(call libname,$(1)): $(call layer_objs,$(1))
	@mkdir -p $$(dir $$@)
	rm -f $$@
	$$(if $$^,ar rcs $$@ $$^,ar rcs $$@)
endef
$(foreach l,$(LAYERS),$(eval $(call LAYER_RULE,$(l))))

# ---- the installable library -------------------------------------------------
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c $< -o $@

$(BUILD)/lib/libwharf.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# -z defs: a symbol no layer or listed library defines fails here, not in a user's link.
$(WHARF_SO): $(PIC_OBJS) pkg/libwharf.map $(WHARF_H)
	$(if $(VERSION_OK),,$(error $(WHARF_H) defines no WHARF_VERSION_MAJOR, _MINOR and _PATCH))
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=pkg/libwharf.map -Wl,-z,defs \
		-o $@ $(PIC_OBJS) $(LDLIBS)

$(BUILD)/lib/libwharf.so: $(WHARF_SO)
	ln -sf $(notdir $<) $(BUILD)/lib/$(SONAME)
	ln -sf $(SONAME) $@

# ---- executables -----------------------------------------------------------
define APP_RULE
$(BUILD)/wharf-$(notdir $(patsubst %/,%,$(1))): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(1)*.c)) $(LIBS)
	$$(CC) $$(CFLAGS) -o $$@ $$(filter %.o,$$^) $(LIBS) $$(LDLIBS)
endef
$(foreach d,$(APP_DIRS),$(eval $(call APP_RULE,$(d))))

# ---- unit tests ------------------------------------------------------------
define TEST_RULE
$(BUILD)/tests/$(1)/%: $(1)/tests/%.c $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out $(1)/tests/test_%.c,$(wildcard $(1)/tests/*.c))) $(LIBS)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -I$(1) -o $$@ $$< $$(filter %.o,$$^) $(LIBS) $$(LDLIBS) $$(TEST_LDLIBS)
test-$(notdir $(1)): $(filter $(BUILD)/tests/$(1)/%,$(TESTS))
	@testbed/run_tests.sh unit $$^
endef
$(foreach l,$(LAYERS),$(eval $(call TEST_RULE,$(l))))
# test_dn_mq makes its multi-queue port from rings of its own: rte_eth_from_rings, net_ring's.
$(BUILD)/tests/dpdk_net/test_dn_mq: TEST_LDLIBS += -lrte_net_ring

# ---- Python: the package wharf (python/wharf) and its C extensions -------------
# wharf._wharf (python/src/pw_*.c but pw_data.c) over libwharf's public API; wharf._data
# (pw_data.c) over apps/common's datasets. Built for Debian's /usr/bin/python3 into
# build/python/wharf/ with the package's .py files, so PYTHONPATH=build/python imports it.
# Skipped, with a line saying so, when that Python has no development headers (make deps).
PYTHON    ?= /usr/bin/python3
PY_INC    := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_EXT    := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_VER    := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_python_version())' 2>/dev/null)
# Debian's python3 looks in /usr/local/lib/python3.X/dist-packages (and /usr/lib/...).
PY_SITE   ?= $(PREFIX)/lib/python$(PY_VER)/dist-packages
PY_OUT    := $(BUILD)/python/wharf
PY_SRCS   := $(filter-out python/src/pw_data.c,$(wildcard python/src/pw_*.c))
PY_FILES  := $(patsubst python/wharf/%,$(PY_OUT)/%,$(wildcard python/wharf/*.py))
PY_CFLAGS := $(OPT) -std=c11 -D_GNU_SOURCE $(WARN) -fPIC -fvisibility=hidden -MMD -MP -I. -Iinclude -I$(PY_INC)
# The extension links the installable libwharf.so; its run path $ORIGIN/../../lib finds the
# in-tree one from build/python/wharf/ (installed, the system's library path finds it).
PY_WHARF_SO ?= $(BUILD)/lib/libwharf.so

ifneq ($(wildcard $(PY_INC)/Python.h),)
python: $(PY_OUT)/_wharf$(PY_EXT) $(PY_OUT)/_data$(PY_EXT) $(PY_FILES)
else
python:
	@echo "python: no Python.h for $(PYTHON) (make deps installs python3-dev): wharf's Python package not built"
endif

$(BUILD)/pyobj/%.o: python/src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(PY_CFLAGS) -c $< -o $@

$(PY_OUT)/_wharf$(PY_EXT): $(patsubst python/src/%.c,$(BUILD)/pyobj/%.o,$(PY_SRCS)) $(PY_WHARF_SO)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(filter %.o,$^) -L$(dir $(PY_WHARF_SO)) -lwharf \
		-Wl,-rpath,'$$ORIGIN/../../lib' -lpthread

# wharf._data links the few apps/common objects it uses, the position-independent ones of
# libwharf.so (not exported by it).
PY_DATA_OBJS := $(patsubst %,$(BUILD)/pic/apps/common/%.o,wc_idx wc_ctr wc_rng wc_auc wc_err)

$(PY_OUT)/_data$(PY_EXT): $(BUILD)/pyobj/pw_data.o $(PY_DATA_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ -lz -lm

$(PY_OUT)/%.py: python/wharf/%.py
	@mkdir -p $(dir $@)
	cp $< $@

# Into the dist-packages of $(PYTHON) under PREFIX (/usr/local/lib/python3.X/dist-packages).
install-python: python
	install -d $(DESTDIR)$(PY_SITE)/wharf
	install -m 644 $(PY_FILES) $(DESTDIR)$(PY_SITE)/wharf/
	install -m 755 $(PY_OUT)/_wharf$(PY_EXT) $(PY_OUT)/_data$(PY_EXT) $(DESTDIR)$(PY_SITE)/wharf/

# ---- the two commands and friends ------------------------------------------
deps:
	@testbed/deps.sh

hugepages:
	@testbed/hugepages.sh

unit: all
	@testbed/run_tests.sh unit $(TESTS)

# The unit tests again, built with AddressSanitizer and UndefinedBehaviorSanitizer.
SAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
unit-san:
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build/san OPT="$(SAN_CFLAGS)" build-tests
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=$(CURDIR)/testbed/lsan.supp \
		UBSAN_OPTIONS=print_stacktrace=1 testbed/run_tests.sh unit $(patsubst $(BUILD)/%,build/san/%,$(TESTS))

build-tests: $(TESTS)

integ: all
	@testbed/run_tests.sh integ $(sort $(wildcard testbed/tests/t_*.sh))

# The two commands (and bench) install first, then build in a fresh make: its pkg-config
# flags are read after deps put libdpdk-dev there, and it compiles on every core.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# WHARF_TEST_DEPS=1: deps has run, so a test that finds something deps installs missing
# fails instead of skipping.
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@WHARF_TEST_DEPS=1 testbed/test_all.sh "$(TESTS)" $(sort $(wildcard testbed/tests/t_*.sh))

demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@testbed/demo.sh

bench: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@testbed/bench.sh

# Every model (softmax, MLP, CTR LR and FM) in sync, async and GEO to its accuracy mark.
e2e-full: all
	@testbed/e2e_full.sh

# The long fault soak (minutes): PS and worker kills over an impaired switch.
soak: all
	@testbed/soak.sh

# libFuzzer harnesses (clang): FUZZ_SECONDS per harness; make test runs a short smoke.
FUZZ_SECONDS ?= 60
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

# ---- install ---------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=]: the library (shared, static, the public
# headers, pkg-config files), the executables, their man pages (help2man: make deps installs
# it) and the LICENSE. make uninstall removes exactly these. ldconfig runs for a system
# PREFIX installed in place.
PREFIX  ?= /usr/local
DESTDIR ?=
DEST    := $(DESTDIR)$(PREFIX)
HEADERS := $(wildcard include/wharf/*.h)

man: $(MANS)

$(BUILD)/man/%.1: $(BUILD)/% pkg/man.sh $(WHARF_H)
	pkg/man.sh $< $(VERSION) $@

install: $(WHARF_LIBS) $(APPS) $(MANS) python
	install -d $(DEST)/bin $(DEST)/lib/pkgconfig $(DEST)/include/wharf $(DEST)/share/man/man1 \
		$(DEST)/share/doc/wharf
	install -m 0755 $(APPS) $(DEST)/bin/
	install -m 0644 $(BUILD)/lib/libwharf.a $(DEST)/lib/
	install -m 0755 $(WHARF_SO) $(DEST)/lib/
	ln -sf $(notdir $(WHARF_SO)) $(DEST)/lib/$(SONAME)
	ln -sf $(SONAME) $(DEST)/lib/libwharf.so
	install -m 0644 $(HEADERS) $(DEST)/include/wharf/
	for pc in wharf wharf-libs; do \
		sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' pkg/$$pc.pc.in \
			>$(DEST)/lib/pkgconfig/$$pc.pc || exit 1; \
	done
	install -m 0644 $(MANS) $(DEST)/share/man/man1/
	install -m 0644 LICENSE $(DEST)/share/doc/wharf/
	$(if $(DESTDIR),,$(if $(filter /usr /usr/local,$(PREFIX)),ldconfig))
	$(if $(wildcard $(PY_OUT)/_wharf$(PY_EXT)),@$(MAKE) --no-print-directory install-python)

uninstall:
	rm -f $(addprefix $(DEST)/bin/,$(notdir $(APPS))) $(DEST)/lib/libwharf.a \
		$(DEST)/lib/libwharf.so $(DEST)/lib/$(SONAME) $(DEST)/lib/$(notdir $(WHARF_SO)) \
		$(addprefix $(DEST)/include/wharf/,$(notdir $(HEADERS))) \
		$(DEST)/lib/pkgconfig/wharf.pc $(DEST)/lib/pkgconfig/wharf-libs.pc \
		$(addprefix $(DEST)/share/man/man1/,$(notdir $(MANS))) $(DEST)/share/doc/wharf/LICENSE
	rmdir $(DEST)/include/wharf $(DEST)/share/doc/wharf 2>/dev/null || true
	rm -rf $(DESTDIR)$(PY_SITE)/wharf

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/pic $(BUILD)/pyobj -name '*.d' 2>/dev/null)
