# STARK -- build, test, fuzz and demo.
#
#   make            build build/stark and build/stark-eval
#   make test       install what is missing, build with -Werror, run every unit
#                   and end-to-end test, then again under ASan+UBSan
#   make demo       the main job on the shipped example
#   make fuzz       run every libFuzzer target for FUZZ_SECONDS each
#   make install    install into $(DESTDIR)$(PREFIX) (FHS layout, below);
#   make uninstall  remove what install put there
#   make man        the man pages (scdoc), also built by make where scdoc is
#   make check-deb  build the Debian package on a fresh bookworm root, install
#                   it there and run stark from it (minutes; not in make test)
#
# Variables: BUILD (output folder), SANITIZE (e.g. address,undefined),
# PYTHON (an interpreter that can import torch; found automatically),
# PREFIX (/usr/local), DESTDIR, COMMIT (the git commit; found by git).
#
# Installed layout: $(BINDIR)/stark; $(LIBEXECDIR)/stark/stark-eval (the
# evaluator, which users do not call); $(DATADIR)/stark/{prompts,examples};
# $(MANDIR)/man1/stark*.1; bash completion in $(BASHCOMPDIR)/stark.  The
# programs look for these beside themselves first (a build tree, or an
# installed tree moved as a whole), then where they were built to be.

SANITIZE ?=
ifeq ($(SANITIZE),)
BUILD ?= build
else
BUILD ?= build-san
endif

CC ?= cc
VERSION := $(shell cat VERSION)
COMMIT ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && \
	{ git diff --quiet HEAD -- 2>/dev/null || c=$$c-dirty; echo $$c; } || echo unknown)
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
SCDOC ?= $(shell command -v scdoc 2>/dev/null)
PYTHON ?= $(shell scripts/find-python 2>/dev/null)
FUZZ_SECONDS ?= 60

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wvla -Wwrite-strings -Wno-format-nonliteral -fno-common -Werror
HARDEN := -fstack-protector-strong -fPIE
CPPFLAGS ?=
CPPFLAGS += -D_GNU_SOURCE -I. $(STARK_EXTRA_CPPFLAGS)
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 $(WARN) $(HARDEN)
LDFLAGS ?=
LDFLAGS += -pie -Wl,-z,relro -Wl,-z,now $(STARK_EXTRA_LDFLAGS)
ifeq ($(SANITIZE),)
CPPFLAGS += -D_FORTIFY_SOURCE=3
else
CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
endif

# pkg-config where present; the plain library names otherwise (a GPU machine
# with the Debian packages unpacked into a prefix has no pkg-config files in
# its search path: see scripts/gpu-env).
PKG = $(or $(shell pkg-config --libs $(1) 2>/dev/null),$(2))
MSGPACK_LIBS := $(call PKG,msgpack,-lmsgpackc)
LMDB_LIBS := $(call PKG,lmdb,-llmdb)
CURL_LIBS := $(call PKG,libcurl,-lcurl)
JSON_LIBS := $(call PKG,jansson,-ljansson)
NETTLE_LIBS := $(call PKG,nettle,-lnettle)
SECCOMP_LIBS := $(call PKG,libseccomp,-lseccomp)
CHECK_LIBS := $(call PKG,check,-lcheck_pic -lsubunit -lrt -lm)
PY_CFLAGS := $(if $(PYTHON),$(shell $(PYTHON) scripts/pyflags.py --cflags))
PY_LDFLAGS := $(if $(PYTHON),$(shell $(PYTHON) scripts/pyflags.py --ldflags))
PY_EXE := $(if $(PYTHON),$(shell $(PYTHON) scripts/pyflags.py --executable))

# Modules: each folder builds one static library from its .c files; main.c
# files are programs, not library members.
MODULES := common proto sandbox store llm search pool engine report cli evaluator
src_of = $(filter-out $(1)/main.c,$(wildcard $(1)/*.c))
obj_of = $(patsubst %.c,$(BUILD)/%.o,$(call src_of,$(1)))
lib_of = $(BUILD)/lib$(1).a

LIB_common := $(call lib_of,common)
LIB_proto := $(call lib_of,proto)
LIB_sandbox := $(call lib_of,sandbox)
LIB_store := $(call lib_of,store)
LIB_llm := $(call lib_of,llm)
LIB_search := $(call lib_of,search)
LIB_pool := $(call lib_of,pool)
LIB_engine := $(call lib_of,engine)
LIB_report := $(call lib_of,report)
LIB_cli := $(call lib_of,cli)
LIB_evaluator := $(call lib_of,evaluator)

# What each program links, in dependency order, and its foreign libraries.
STARK_LIBS := $(LIB_cli) $(LIB_report) $(LIB_engine) $(LIB_pool) $(LIB_search) $(LIB_store) \
	$(LIB_llm) $(LIB_sandbox) $(LIB_proto) $(LIB_common)
STARK_EXT := $(LMDB_LIBS) $(CURL_LIBS) $(JSON_LIBS) $(NETTLE_LIBS) $(SECCOMP_LIBS) $(MSGPACK_LIBS) -lm
EVAL_LIBS := $(LIB_evaluator) $(LIB_sandbox) $(LIB_proto) $(LIB_common)
EVAL_EXT := $(PY_LDFLAGS) $(SECCOMP_LIBS) $(MSGPACK_LIBS) -lm

PROGRAMS := $(BUILD)/stark $(BUILD)/stark-eval
MAN_SRC := $(wildcard docs/man/*.scd)
MAN_PAGES := $(patsubst docs/man/%.scd,$(BUILD)/man/%,$(MAN_SRC))
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
HELPERS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/%,$(wildcard tests/helpers/*.c))

.PHONY: all programs man test demo fuzz fuzzers clean deps format install uninstall check-deb FORCE
all: $(PROGRAMS) $(UNIT_TESTS) $(HELPERS) $(if $(SCDOC),$(MAN_PAGES))
programs: $(PROGRAMS)

# Which stark this is, and where it looks for its parts, are compiled into
# common/install.c alone; the stamp changes (and that object is rebuilt)
# only when one of them does.
BUILD_INFO := $(VERSION) $(COMMIT) $(LIBEXECDIR)/stark $(DATADIR)/stark
$(BUILD)/build-info: FORCE
	@mkdir -p $(dir $@)
	@echo '$(BUILD_INFO)' | cmp -s - $@ || echo '$(BUILD_INFO)' >$@
$(BUILD)/common/install.o: common/install.c $(BUILD)/build-info
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DSTARK_RELEASE='"$(VERSION)"' -DSTARK_COMMIT='"$(COMMIT)"' \
		-DSTARK_LIBEXECDIR='"$(LIBEXECDIR)/stark"' -DSTARK_DATADIR='"$(DATADIR)/stark"' \
		$(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

# The evaluator's Python and the embedding file need the interpreter's headers.
$(BUILD)/evaluator/%.o: evaluator/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PY_CFLAGS) -DSTARK_PYTHON='"$(PY_EXE)"' $(CFLAGS) -MMD -MP -c -o $@ $<

# Python sources of the evaluator are linked into the binary (.incbin), so a
# jail needs no extra files.
$(BUILD)/evaluator/%.o: evaluator/%.S $(wildcard evaluator/*.py) evaluator/pysrc.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -c -o $@ $<

# The report's page template is linked into stark the same way.
$(BUILD)/report/%.o: report/%.S report/page.html
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -c -o $@ $<

define module_lib
$(call lib_of,$(1)): $(call obj_of,$(1)) $(patsubst %.S,$(BUILD)/%.o,$(wildcard $(1)/*.S))
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call module_lib,$(m))))

$(BUILD)/stark: $(BUILD)/cli/main.o $(STARK_LIBS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(STARK_EXT)

$(BUILD)/stark-eval: $(BUILD)/evaluator/main.o $(EVAL_LIBS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(EVAL_EXT)

# Unit tests: one binary per module, Check, linked against everything the
# module's program links.
$(BUILD)/tests/test_evaluator: tests/unit/test_evaluator.c $(EVAL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PY_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(EVAL_EXT) $(CHECK_LIBS)
# proto's tests link only what proto needs, so they build and run while
# other modules are mid-change.
$(BUILD)/tests/test_proto: tests/unit/test_proto.c $(LIB_proto) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(MSGPACK_LIBS) -lm $(CHECK_LIBS)
# llm's tests and fuzzer link only llm and common (same reason).
$(BUILD)/tests/test_llm: tests/unit/test_llm.c $(LIB_llm) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CURL_LIBS) $(JSON_LIBS) -lm $(CHECK_LIBS)
# store's tests and helpers link only store and common (same reason); they
# also rebuild when the headers they share change.
STORE_TEST_HDRS := store/store.h store/store_int.h tests/helpers/store_helpers.h
$(BUILD)/tests/test_store: tests/unit/test_store.c $(LIB_store) $(LIB_common) $(STORE_TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter-out %.h,$^) $(LMDB_LIBS) -lm $(CHECK_LIBS)
$(BUILD)/tests/store_%: tests/helpers/store_%.c $(LIB_store) $(LIB_common) $(STORE_TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter-out %.h,$^) $(LMDB_LIBS) -lm
# search's tests and fuzzer link only search and common: the method needs
# no store, no network and no evaluator, and the link proves it.
$(BUILD)/tests/test_search: tests/unit/test_search.c $(LIB_search) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ -lm $(CHECK_LIBS)
# pool's tests link only pool and what pool needs (same reason).
$(BUILD)/tests/test_pool: tests/unit/test_pool.c $(LIB_pool) $(LIB_sandbox) $(LIB_proto) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SECCOMP_LIBS) $(MSGPACK_LIBS) $(JSON_LIBS) $(NETTLE_LIBS) -lm $(CHECK_LIBS)
# sandbox's tests and helpers link only sandbox and common (same reason).
$(BUILD)/tests/test_sandbox: tests/unit/test_sandbox.c $(LIB_sandbox) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SECCOMP_LIBS) -lm $(CHECK_LIBS)
$(BUILD)/tests/sbx_%: tests/helpers/sbx_%.c $(LIB_sandbox) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SECCOMP_LIBS) -lm
$(BUILD)/tests/test_%: tests/unit/test_%.c $(STARK_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(STARK_EXT) $(CHECK_LIBS)
$(BUILD)/tests/%: tests/helpers/%.c $(STARK_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(STARK_EXT)

deps:
	@scripts/install-deps

test: deps
	@scripts/run-tests

demo: deps
	@$(MAKE) --no-print-directory all >/dev/null
	@scripts/demo

# libFuzzer targets (clang): one per decoder of untrusted bytes.  They are
# built by a nested make with BUILD=build-fuzz so the libraries carry the
# fuzzer's coverage instrumentation.
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
$(BUILD)/fuzz/fuzz_proto: tests/fuzz/fuzz_proto.c $(LIB_proto) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $^ $(MSGPACK_LIBS) -lm
$(BUILD)/fuzz/fuzz_llm: tests/fuzz/fuzz_llm.c $(LIB_llm) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $^ $(CURL_LIBS) $(JSON_LIBS) -lm
$(BUILD)/fuzz/fuzz_anchor: tests/fuzz/fuzz_anchor.c $(LIB_search) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $^ -lm
$(BUILD)/fuzz/%: tests/fuzz/%.c $(STARK_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $^ $(STARK_EXT)
fuzzers: $(addprefix $(BUILD)/fuzz/,$(FUZZ_NAMES))
# A target that fails to build does not stop the others from running; the
# build failure still fails `make fuzz`.
fuzz: deps
	@rc=0; $(MAKE) --no-print-directory -k BUILD=build-fuzz CC=clang \
		SANITIZE=fuzzer-no-link,address,undefined fuzzers || rc=$$?; \
	scripts/run-fuzz $(FUZZ_SECONDS) $(addprefix build-fuzz/fuzz/,$(FUZZ_NAMES)) || rc=1; \
	exit $$rc

# Man pages: scdoc sources in docs/man/.
man: $(MAN_PAGES)
$(BUILD)/man/%: docs/man/%.scd
	@mkdir -p $(dir $@)
	@[ -n "$(SCDOC)" ] || { echo "make: scdoc is missing (apt-get install scdoc)" >&2; exit 1; }
	$(SCDOC) <$< >$@

EXAMPLE_FILES := $(shell find examples -type f 2>/dev/null)
install: $(PROGRAMS) $(MAN_PAGES)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)/stark \
		$(DESTDIR)$(DATADIR)/stark/prompts $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR)
	install -m 755 $(BUILD)/stark $(DESTDIR)$(BINDIR)/stark
	install -m 755 $(BUILD)/stark-eval $(DESTDIR)$(LIBEXECDIR)/stark/stark-eval
	install -m 644 scripts/gpulock.py $(DESTDIR)$(DATADIR)/stark/gpulock.py
	install -m 644 prompts/*.txt $(DESTDIR)$(DATADIR)/stark/prompts/
	for f in $(EXAMPLE_FILES); do \
		install -D -m 644 $$f $(DESTDIR)$(DATADIR)/stark/$$f || exit 1; done
	install -m 644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 scripts/completion.bash $(DESTDIR)$(BASHCOMPDIR)/stark

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/stark $(DESTDIR)$(BASHCOMPDIR)/stark \
		$(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN_PAGES)))
	rm -rf $(DESTDIR)$(LIBEXECDIR)/stark $(DESTDIR)$(DATADIR)/stark

# The Debian package, built, installed and run on a fresh bookworm root
# (scripts/check-deb; minutes, and the network for Debian's mirrors).
check-deb:
	@scripts/check-deb

format:
	clang-format -i $(wildcard */*.c */*.h tests/*/*.c)

clean:
	rm -rf build build-san build-fuzz build-*

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
