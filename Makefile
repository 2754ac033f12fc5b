# wharf — one Makefile for the whole tree.
#
# Layers are discovered by folder: every <layer>/*.c goes into build/lib/lib<layer>.a,
# every <layer>/tests/test_*.c becomes one cmocka binary in build/tests/<layer>/ (other
# .c files in a tests/ folder are shared helpers linked into each of that folder's tests),
# every apps/<name>/ and testbed/<name>/ folder with C sources becomes build/wharf-<name>.
# So adding a file never means editing this Makefile.

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
# (include/wharf/wharf.h); apps/common is the code the executables share (configuration
# sources, datasets, models); it is a library too.
LAYERS  := api apps/common ps_core fuse transport dpdk_net
libname  = $(BUILD)/lib/lib$(subst /,_,$(1)).a
LIBS    := $(foreach l,$(LAYERS),$(call libname,$(l)))

layer_srcs = $(wildcard $(1)/*.c)
layer_objs = $(patsubst %.c,$(BUILD)/obj/%.o,$(call layer_srcs,$(1)))

APP_DIRS := $(sort $(dir $(wildcard apps/*/*.c testbed/*/*.c)))
APP_DIRS := $(filter-out testbed/tests/ testbed/extern/ apps/common/,$(APP_DIRS))
APPS     := $(foreach d,$(APP_DIRS),$(BUILD)/wharf-$(notdir $(patsubst %/,%,$(d))))

TEST_SRCS := $(wildcard $(addsuffix /tests/test_*.c,$(LAYERS)))
TESTS     := $(patsubst %.c,$(BUILD)/tests/%,$(subst /tests/,/,$(TEST_SRCS)))

# Test helper objects are prerequisites of pattern rules: keep them between runs.
.SECONDARY:

.PHONY: all deps test unit unit-san build-tests integ fuzz soak e2e-full demo bench clean $(addprefix test-,$(notdir $(LAYERS))) hugepages
all: $(LIBS) $(APPS) $(TESTS)

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

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
