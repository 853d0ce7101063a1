# Makefile - builds the market service, its tools and tests (non-recursive).
#
#   make            build bin/market-server, bin/market-seed, bin/market-load
#   make run        install what is missing, start a private redis, seed the demo, serve
#   make run-ha     the same over Redis Sentinel: a master, a replica, three Sentinels (var/ha)
#   make load       a 10 s, 16-buyer market-load run against the service make run serves
#   make test       install what is missing, build, run unit + integration tests
#   make test-stress  make test beside STRESS_CPUS (8) CPU-bound processes (stress-ng): the
#                   suite must hold on a busy machine, as a studio's CI is
#   make asan       the whole test suite under AddressSanitizer + UBSan
#   make valgrind   the integration tests under valgrind
#   make fuzz       the libFuzzer harnesses, FUZZ_SECONDS each (tests/fuzz/)
#   make bench      the strategy comparison (bench/results.md)
#   make lib        lock/ (with rconn/) as a library: build/lib/liblock.a and liblock.so
#   make install    the programs, their man pages (help2man), docs, the systemd unit, and
#                   the library, lock.h, rconn.h and lock.pc, under DESTDIR + PREFIX (/usr/local)
#   make deb        build/gamemarket_<VERSION>_<arch>.deb with dpkg-deb (scripts/deb.sh)
#   make examples   install into a temporary DESTDIR, build examples/ with pkg-config and
#                   run them against a throwaway redis-server (make test runs them too)
#
# User CFLAGS/LDFLAGS are added to ours, never replace them.

CC ?= cc
PKG_CONFIG ?= pkg-config
OPT ?= -O2
DEBUG ?= -g
WERROR ?= 1
SANITIZE ?=
BUILD ?= build
BIN ?= bin

WARN = -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wwrite-strings -Wno-missing-field-initializers
ifeq ($(WERROR),1)
WARN += -Werror
endif
ifneq ($(SANITIZE),)
SANFLAGS = -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

# Lazily expanded on purpose: pkg-config runs when a rule needs the flags,
# which is after scripts/deps.sh has installed the libraries.
PKGS = hiredis libmicrohttpd jansson libcrypto
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS))
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS))
TEST_LIBS = $(shell $(PKG_CONFIG) --libs cmocka libcurl)
# market-server allocates with jemalloc (Redis's allocator): every purchase makes
# and frees hiredis replies, libmicrohttpd answers and its own request state on
# several threads, and glibc's malloc spent twice jemalloc's share of the server's
# CPU on them (docs/OPERATIONS.md, "Threads and connections"). Not under a
# sanitizer, whose runtime must own malloc; MALLOC_LIBS= builds it on glibc's.
ifeq ($(SANITIZE),)
MALLOC_LIBS ?= $(shell $(PKG_CONFIG) --libs jemalloc)
endif

REAL_CPPFLAGS = -I. -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(CPPFLAGS)
REAL_CFLAGS = $(WARN) $(OPT) $(DEBUG) $(SANFLAGS) -pthread -MMD -MP $(PKG_CFLAGS) $(CFLAGS)
REAL_LDFLAGS = $(SANFLAGS) -pthread $(LDFLAGS)

MODULES = cli rconn lock market api server
# Module archives in link order: a module uses only those after it.
LIBS_ALL = $(BUILD)/libserver.a $(BUILD)/libapi.a $(BUILD)/libmarket.a $(BUILD)/liblock.a \
           $(BUILD)/librconn.a $(BUILD)/libcli.a

lib_srcs = $(filter-out server/main.c,$(wildcard $(1)/*.c))
lib_objs = $(patsubst %.c,$(BUILD)/%.o,$(call lib_srcs,$(1)))

# market-load is a folder: tools/load/main.c over libload.a, the rest of its
# files, which its unit tests (tests/unit/test_load_*.c) link too.
LOAD_LIB = $(BUILD)/libload.a
LOAD_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(filter-out tools/load/main.c,$(wildcard tools/load/*.c)))

PROGS = $(BIN)/market-server $(BIN)/market-seed $(BIN)/market-load
UNIT_TESTS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
INTEG_TESTS = $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(wildcard tests/integration/test_*.c))
HELPER_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/helpers/*.c))

.PHONY: all build deps run run-ha load test test-stress check asan valgrind bench fuzz clean format \
	lib install uninstall examples
all: deps
	@$(MAKE) --no-print-directory build

build: $(PROGS) $(UNIT_TESTS) $(INTEG_TESTS)

deps:
	@scripts/deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(REAL_CPPFLAGS) $(REAL_CFLAGS) -c $< -o $@

# An archive is made anew (rm first): `ar rcs` keeps the members of files that
# were renamed or removed since, and a stale member can win the link.
define module_rule
$(BUILD)/lib$(1).a: $(call lib_objs,$(1))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	$$(AR) rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call module_rule,$(m))))

$(BIN)/market-server: $(BUILD)/server/main.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(REAL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(MALLOC_LIBS)

$(BIN)/market-%: $(BUILD)/tools/market_%.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(REAL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(LOAD_LIB): $(LOAD_OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

$(BIN)/market-load: $(BUILD)/tools/load/main.o $(LOAD_LIB) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(REAL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/tests/test_load_%: $(BUILD)/tests/unit/test_load_%.o $(HELPER_OBJS) $(LOAD_LIB) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(REAL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS) -lm

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(HELPER_OBJS) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(REAL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

$(BUILD)/tests/%: $(BUILD)/tests/integration/%.o $(HELPER_OBJS) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(REAL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

# ---- the two commands of the quick start ----

run: deps
	@$(MAKE) --no-print-directory build
	@scripts/run.sh

# The service over a Sentinel group, for watching and causing failovers (scripts/run_ha.sh).
run-ha: deps
	@$(MAKE) --no-print-directory build
	@scripts/run_ha.sh

# Against a running `make run` (another terminal): LOAD_SECONDS, LOAD_BUYERS, LOAD_MIX.
load:
	@$(MAKE) --no-print-directory build
	@scripts/load.sh

test: deps
	@$(MAKE) --no-print-directory build
	@BUILD=$(BUILD) BIN=$(BIN) tests/run.sh

check: test

STRESS_CPUS ?= 8
test-stress: deps
	@scripts/ci_deps.sh stress
	@$(MAKE) --no-print-directory build
	@stress-ng --cpu $(STRESS_CPUS) --timeout 0 --quiet & pid=$$!; \
	BUILD=$(BUILD) BIN=$(BIN) tests/run.sh; rc=$$?; \
	kill $$pid; wait $$pid 2>/dev/null; exit $$rc

# Warnings are `make test`'s gate (-O2, -Werror): gcc's -O1 flow analysis has
# false positives of its own (-Wformat-truncation), so here they only print.
asan: deps
	@$(MAKE) --no-print-directory BUILD=build/asan BIN=build/asan/bin OPT=-O1 WERROR=0 \
		SANITIZE=address,undefined build
	@BUILD=build/asan BIN=build/asan/bin ASAN_OPTIONS=detect_leaks=1 \
		UBSAN_OPTIONS=print_stacktrace=1 tests/run.sh

valgrind: deps
	@scripts/ci_deps.sh valgrind
	@$(MAKE) --no-print-directory build
	@BUILD=$(BUILD) BIN=$(BIN) VALGRIND=1 tests/run.sh

# ---- fuzzing: libFuzzer harnesses in tests/fuzz/ (see tests/fuzz/README.md) ----
# clang builds rconn/, lock/, market/ and api/ from source into each harness with
# ASan + UBSan + libFuzzer, under $(FUZZ_BUILD) (the archives above are gcc's).
# `make fuzz` replays tests/fuzz/regressions/, then fuzzes each harness for
# FUZZ_SECONDS (both at once when there are two cores) from its seed corpus.

FUZZ_CC ?= clang
FUZZ_BUILD ?= build/fuzz
FUZZ_SECONDS ?= 60
FUZZ_SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS = $(WARN) -O1 -g $(FUZZ_SANFLAGS) -pthread -MMD -MP $(PKG_CFLAGS) $(CFLAGS)
FUZZ_OBJS = $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(wildcard rconn/*.c lock/*.c market/*.c api/*.c))
FUZZ_BINS = $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(wildcard tests/fuzz/fuzz_*.c))

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(REAL_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_OBJS)
	$(FUZZ_CC) $(FUZZ_SANFLAGS) -fsanitize=fuzzer -pthread $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

fuzz: deps
	@FUZZ_CC=$(FUZZ_CC) scripts/ci_deps.sh fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BINS)
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_CC=$(FUZZ_CC) \
		FUZZ_CPPFLAGS="$(REAL_CPPFLAGS) $(PKG_CFLAGS)" FUZZ_LIBS="$(PKG_LIBS)" scripts/ci_fuzz.sh

bench: deps
	@$(MAKE) --no-print-directory build
	@scripts/bench.sh

# ---- lock/ as a library on its own (docs/LOCKING.md, "lock/ as a library") ----
# The service links $(BUILD)/liblock.a, a module archive like the others. `make lib` builds
# the library for other programs from the same sources, apart: position-independent objects
# in $(BUILD)/pic, compiled with -fvisibility=hidden so that liblock.so exports only what
# lock.h marks LOCK_API and rconn.h RCONN_API (every lock_* and rconn_* function; never the
# modules' lock__* and rconn__* helpers; the recipe checks with nm), and never with SANITIZE
# (another program links it). liblock carries rconn/ (the Redis module below lock/: lock.h's
# constructors take its rconn_addr). The soname carries the major version of lock.h's
# LOCK_VERSION_*.
# `make install` copies the libraries, lock.h as $(INCLUDEDIR)/gamemarket/lock.h (programs
# include <lock.h>; the folder keeps so generic a name out of /usr/include), rconn.h as
# $(INCLUDEDIR)/gamemarket/rconn/rconn.h (where lock.h's #include "rconn/rconn.h" finds it) and lock.pc into
# $(DESTDIR)$(PKGCONFIGDIR); lock.pc's paths are relative to its own folder, so the tree
# also works from the DESTDIR staging folder. PREFIX, LIBDIR, INCLUDEDIR must be absolute.

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
LIB_BUILD = $(BUILD)/lib
PIC_BUILD = $(BUILD)/pic

lock_version_part = $(shell sed -n 's/^.define LOCK_VERSION_$(1) \([0-9][0-9]*\)$$/\1/p' lock/lock.h)
LOCK_V_MAJOR := $(call lock_version_part,MAJOR)
LOCK_V := $(LOCK_V_MAJOR).$(call lock_version_part,MINOR).$(call lock_version_part,PATCH)
LOCK_SONAME = liblock.so.$(LOCK_V_MAJOR)
LOCK_SO = liblock.so.$(LOCK_V)
LOCK_PIC_OBJS = $(patsubst %.c,$(PIC_BUILD)/%.o,$(wildcard lock/*.c rconn/*.c))
HIREDIS_CFLAGS = $(shell $(PKG_CONFIG) --cflags hiredis)
HIREDIS_LIBS = $(shell $(PKG_CONFIG) --libs hiredis)
LIB_CFLAGS = $(WARN) $(OPT) $(DEBUG) -fPIC -fvisibility=hidden -pthread -MMD -MP \
	$(HIREDIS_CFLAGS) $(CFLAGS)
# the path from lock.pc's folder to $(1), for the relocatable lock.pc
pc_rel = $(shell realpath -m --relative-to='$(PKGCONFIGDIR)' '$(1)')

lib: $(LIB_BUILD)/liblock.a $(LIB_BUILD)/$(LOCK_SO)

$(PIC_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(REAL_CPPFLAGS) $(LIB_CFLAGS) -c $< -o $@

$(LIB_BUILD)/liblock.a: $(LOCK_PIC_OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

$(LIB_BUILD)/$(LOCK_SO): $(LOCK_PIC_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(LOCK_SONAME) -Wl,--no-undefined -pthread $(LDFLAGS) \
		-o $@.tmp $^ $(HIREDIS_LIBS)
	@leaked=$$(nm -D --defined-only $@.tmp | awk '$$3 !~ /^(lock|rconn)_[a-z]/ {print $$3}'); \
	if [ -n "$$leaked" ]; then echo "lib: exported beyond lock_*, rconn_*: $$leaked" >&2; exit 1; fi
	@mv $@.tmp $@
	ln -sf $(LOCK_SO) $(LIB_BUILD)/$(LOCK_SONAME)
	ln -sf $(LOCK_SONAME) $(LIB_BUILD)/liblock.so

install-lib: lib
	install -d '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(INCLUDEDIR)/gamemarket/rconn' \
		'$(DESTDIR)$(PKGCONFIGDIR)'
	install -m 644 lock/lock.h '$(DESTDIR)$(INCLUDEDIR)/gamemarket/lock.h'
	install -m 644 rconn/rconn.h '$(DESTDIR)$(INCLUDEDIR)/gamemarket/rconn/rconn.h'
	install -m 644 $(LIB_BUILD)/liblock.a '$(DESTDIR)$(LIBDIR)/liblock.a'
	install -m 755 $(LIB_BUILD)/$(LOCK_SO) '$(DESTDIR)$(LIBDIR)/$(LOCK_SO)'
	ln -sf $(LOCK_SO) '$(DESTDIR)$(LIBDIR)/$(LOCK_SONAME)'
	ln -sf $(LOCK_SONAME) '$(DESTDIR)$(LIBDIR)/liblock.so'
	sed -e 's|@PREFIX_REL@|$(call pc_rel,$(PREFIX))|' -e 's|@LIBDIR_REL@|$(call pc_rel,$(LIBDIR))|' \
		-e 's|@INCLUDEDIR_REL@|$(call pc_rel,$(INCLUDEDIR))|' -e 's|@VERSION@|$(LOCK_V)|' \
		lock/lock.pc.in >'$(DESTDIR)$(PKGCONFIGDIR)/lock.pc'
	chmod 644 '$(DESTDIR)$(PKGCONFIGDIR)/lock.pc'

# Installs into a temporary DESTDIR, builds examples/ against it with pkg-config and runs them
# against a throwaway redis-server (scripts/examples.sh; tests/run.sh runs it too).
examples: deps
	@BUILD=$(BUILD) MAKE="$(MAKE)" scripts/examples.sh

uninstall-lib:
	rm -f '$(DESTDIR)$(INCLUDEDIR)/gamemarket/lock.h' '$(DESTDIR)$(LIBDIR)/liblock.a' \
		'$(DESTDIR)$(INCLUDEDIR)/gamemarket/rconn/rconn.h' \
		'$(DESTDIR)$(LIBDIR)/$(LOCK_SO)' '$(DESTDIR)$(LIBDIR)/$(LOCK_SONAME)' \
		'$(DESTDIR)$(LIBDIR)/liblock.so' '$(DESTDIR)$(PKGCONFIGDIR)/lock.pc'
	-rmdir '$(DESTDIR)$(INCLUDEDIR)/gamemarket/rconn' '$(DESTDIR)$(INCLUDEDIR)/gamemarket' 2>/dev/null

# ---- the programs installed and packaged (docs/OPERATIONS.md, "Installing") ----
# `make install` = install-lib (above) + install-progs: market-server, market-seed and
# market-load in BINDIR, a man page for each made by help2man from its --help in MANDIR/man1,
# the docs and examples in DOCDIR, the market page's files (web/) in WEBDIR, market-server.service in SYSTEMDUNITDIR (ExecStart made to
# name BINDIR). `make deb` stages install-progs with PREFIX=/usr and packs it with dpkg-deb
# (scripts/deb.sh), adding the conffile /etc/gamemarket/market-server.env and the maintainer
# scripts of deploy/deb/; tests/package/test_package.sh checks both (make test runs it).

VERSION ?= 0.1.0
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/gamemarket
WEBDIR ?= $(PREFIX)/share/gamemarket/web
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
MANPAGES = $(patsubst $(BIN)/%,$(BUILD)/man/%.1,$(PROGS))
INSTALL_DOCS = README.md docs/API.md docs/LOCKING.md docs/OPERATIONS.md
INSTALL_EXAMPLES = deploy/systemd/market-server.env.example deploy/redis/market.acl \
	fixtures/demo.json
man_name_market-server = the game-market trading service: an HTTP API over Redis
man_name_market-seed = write players, listings and flash sales into the market store (Redis)
man_name_market-load = load generator and auditor of the market service

.PHONY: install-lib install-progs uninstall-lib uninstall-progs man deb
install: install-lib install-progs
uninstall: uninstall-lib uninstall-progs
man: $(MANPAGES)

# help2man runs `<prog> --help` (scripts/man.sh: its usage lines become the SYNOPSIS).
$(BUILD)/man/%.1: $(BIN)/% scripts/man.sh
	@mkdir -p $(dir $@)
	scripts/man.sh $< '$(VERSION)' '$(man_name_$*)' $@

install-progs: $(PROGS) $(MANPAGES)
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(MANDIR)/man1' '$(DESTDIR)$(DOCDIR)/examples' \
		'$(DESTDIR)$(SYSTEMDUNITDIR)' '$(DESTDIR)$(WEBDIR)'
	install -m 644 web/index.html web/app.js web/style.css '$(DESTDIR)$(WEBDIR)/'
	install -m 755 $(PROGS) '$(DESTDIR)$(BINDIR)/'
	install -m 644 $(MANPAGES) '$(DESTDIR)$(MANDIR)/man1/'
	install -m 644 $(INSTALL_DOCS) '$(DESTDIR)$(DOCDIR)/'
	install -m 644 $(INSTALL_EXAMPLES) '$(DESTDIR)$(DOCDIR)/examples/'
	sed -e 's|^ExecStart=/usr/bin/|ExecStart=$(BINDIR)/|' \
		-e 's|/usr/share/doc/gamemarket|$(DOCDIR)|g' \
		-e 's|/usr/share/gamemarket/web|$(WEBDIR)|g' deploy/systemd/market-server.service \
		>'$(DESTDIR)$(SYSTEMDUNITDIR)/market-server.service'
	chmod 644 '$(DESTDIR)$(SYSTEMDUNITDIR)/market-server.service'

uninstall-progs:
	rm -f $(patsubst $(BIN)/%,'$(DESTDIR)$(BINDIR)/%',$(PROGS)) \
		$(patsubst $(BIN)/%,'$(DESTDIR)$(MANDIR)/man1/%.1',$(PROGS)) \
		'$(DESTDIR)$(SYSTEMDUNITDIR)/market-server.service'
	rm -rf '$(DESTDIR)$(DOCDIR)' '$(DESTDIR)$(WEBDIR)'

deb: $(PROGS) $(MANPAGES)
	@BUILD=$(BUILD) BIN=$(BIN) VERSION=$(VERSION) MAKE="$(MAKE)" scripts/deb.sh

clean:
	rm -rf build bin

format:
	clang-format -i $(wildcard */*.c */*.h tools/*/*.c tools/*/*.h tests/*/*.c tests/*/*.h)

.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
