# space build. GNU make. Every executable lands in $(B)/bin.
#
#   make            build everything (build/)
#   make up         build, then start a single-machine platform (space up)
#   make test       install missing packages, build, run every test
#   make test-san   the same tests built with ASan + UBSan (build-san/)
#   make fuzz       build the libFuzzer harnesses and run each FUZZ_SECONDS
#   make bench      build and run the benchmarks
#
# Layout: src/libspace is the shared library (static), every other
# directory under src/ is one executable named as the directory.
# tests/unit/test_*.c are one TAP binary each; tests/integration/*.sh are
# TAP scripts; tests/fuzz/fuzz_*.c are libFuzzer harnesses.

B        ?= build
SAN      ?= 0
CC       ?= cc
FUZZ_SECONDS ?= 30

WARN     := -Wall -Wextra -Werror -Wformat=2 -Wshadow -Wpointer-arith \
            -Wstrict-prototypes -Wmissing-prototypes -Wvla -Wno-unused-parameter
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -D_GNU_SOURCE -fPIE -fstack-protector-strong \
            -Isrc/libspace -MMD -MP
LDFLAGS  += -pie -Wl,-z,relro,-z,now -Wl,--as-needed

# What each program links besides libspace.a: only the libraries it calls,
# because every shared library costs each process start its loading and
# relocation (docs/benchmarks.md: `space version` against `true`). A
# program that starts using another library fails to link until its line
# says so. The CLI does not link libcurl: it loads it on its first HTTP
# request (src/space/curl_lazy.c). Unit tests, benchmarks and fuzzers take
# LDLIBS_ALL; --as-needed keeps only what each of them really calls
# (gcc's sanitizer link turns that default off, hence the explicit flag).
LIBS_node-api      := -lsodium -ljansson -lmicrohttpd -lwslay -lnettle
LIBS_sbx-manager   := -lsodium -ljansson -lsqlite3 -lcurl -larchive -lzstd -lseccomp -lcap -lnettle
LIBS_space         := -lsodium -ljansson -luv -lwslay -lnettle
LIBS_space-control := -lsodium -ljansson -lsqlite3 -lmicrohttpd -lpq -lnettle
LIBS_spaced-guest  := -lsodium -ljansson -lcap
LIBS_spaced-host   := -lsodium -ljansson -lcap
LIBS_space-edge    := -lsodium -ljansson -lcurl -lmicrohttpd -lwslay -lnettle -lz -lpthread
LIBS_netgtw        := -lsodium -ljansson -lwslay
# spaced-guest runs inside any template's root, where the host's shared
# libraries are not (docs/templates.md): it is linked statically. The
# sanitizers cannot link statically; their build keeps it dynamic, so it
# runs only on `host` (template tests are "# ci: once").
ifneq ($(SAN),1)
LDFLAGS_spaced-guest := -static-pie
endif
# spaced-host starts on every create's path (and every relaunch): its own
# libraries are linked in (only libc stays shared), so its start maps and
# relocates one library instead of five (docs/benchmarks.md, "Third
# round"). The sanitizer build keeps them shared.
ifneq ($(SAN),1)
LIBS_spaced-host   := -Wl,-Bstatic -lsodium -ljansson -lcap -Wl,-Bdynamic
endif
LDLIBS_ALL := -lsodium -lsqlite3 -ljansson -lmicrohttpd -lcurl -lseccomp -lcap \
              -luv -larchive -lzstd -lwslay -lnettle -lpthread -lm

ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
else
CFLAGS   += -D_FORTIFY_SOURCE=2
endif

PROGS    := $(patsubst src/%/main.c,%,$(wildcard src/*/main.c))
LIB_SRCS := $(wildcard src/libspace/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
LIB      := $(B)/libspace.a
BINS     := $(PROGS:%=$(B)/bin/%)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/unit/%)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(B)/bench/%)
# test doubles (tests/doubles): built for the tests, never installed
DOUBLE_MODES := other-sandbox bad-secret hostile
DOUBLE_BINS := $(DOUBLE_MODES:%=$(B)/tests/doubles/guest-%)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build-fuzz/%)

.PHONY: all deps up test test-san unit fuzz fuzz-build bench clean
all: $(BINS) $(UNIT_BINS) $(DOUBLE_BINS)

deps:
	@sh scripts/deps.sh

# the PostgreSQL backend of space-control: libpq's headers (libpq-dev)
$(B)/obj/src/space-control/store_pg.o: CFLAGS += -I/usr/include/postgresql
$(B)/obj/src/space-control/store_pg_%.o: CFLAGS += -I/usr/include/postgresql

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# A program named like a document of docs/openapi/ serves it at
# GET /openapi.json: scripts/embed.sh turns it into C in $(B)/gen/ (the
# generated source is never committed).
$(B)/gen/%/openapi_doc.c: docs/openapi/%.json scripts/embed.sh
	@mkdir -p $(dir $@)
	sh scripts/embed.sh $< $(subst -,_,$*)_openapi >$@.tmp && mv $@.tmp $@
.PRECIOUS: $(B)/gen/%/openapi_doc.c

$(B)/gen/%.o: $(B)/gen/%.c
	$(CC) $(CFLAGS) -c -o $@ $<

# The web console (docs/console.md): web/console/ and xterm.js at the
# version web/console/package-lock.json pins, fetched by npm into
# $(B)/web/ when missing, become one generated source of space-edge.
CONSOLE_VENDOR := $(B)/web/node_modules/@xterm/xterm/lib/xterm.js
CONSOLE_FILES  := /=web/console/index.html /app.js=web/console/app.js \
                  /style.css=web/console/style.css /xterm.js=$(CONSOLE_VENDOR) \
                  /xterm.css=$(B)/web/node_modules/@xterm/xterm/css/xterm.css \
                  /addon-fit.js=$(B)/web/node_modules/@xterm/addon-fit/lib/addon-fit.js
$(CONSOLE_VENDOR): web/console/package.json web/console/package-lock.json
	@command -v npm >/dev/null || { echo "make: npm is needed to fetch the web console's" \
	    "xterm.js (docs/console.md): install Debian's npm package" >&2; exit 1; }
	@mkdir -p $(B)/web
	cp web/console/package.json web/console/package-lock.json $(B)/web/
	cd $(B)/web && npm ci --no-audit --no-fund --loglevel=error
	touch $@
$(B)/gen/space-edge/console_files.c: web/console/index.html web/console/app.js \
    web/console/style.css $(CONSOLE_VENDOR) scripts/embed_web.sh
	@mkdir -p $(dir $@)
	sh scripts/embed_web.sh console_files $(CONSOLE_FILES) >$@.tmp && mv $@.tmp $@
$(B)/gen/space-edge/console_files.o: CFLAGS += -Isrc/space-edge
GEN_OBJS_space-edge := $(B)/gen/space-edge/console_files.o

# Seccomp filters compiled to BPF at build time by a tool of the build, so
# a process loads a program instead of building it with libseccomp at
# every start: spaced-guest's (src/spaced-guest/filter.c, loaded by
# filter_load.c) and spaced-host's serving process's (serve_filter.c,
# loaded by serve.c with its own pid put in). The filter's source is the
# tool's, not the program's: the program links neither it nor libseccomp.
#   $(call filter_tool,PROGRAM,TOOL,FILTER_SOURCE)
define filter_tool
BUILD_ONLY_$(1) := $(3)
$(B)/tools/$(2): $(B)/obj/src/$(1)/gen/filter_gen.o $(3:%.c=$(B)/obj/%.o) $(LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$^ -lseccomp
$(B)/gen/$(1)/filter_bpf.c: $(B)/tools/$(2)
	@mkdir -p $$(dir $$@)
	$$< $$@
$(B)/gen/$(1)/filter_bpf.o: CFLAGS += -Isrc/$(1)
GEN_OBJS_$(1) := $(B)/gen/$(1)/filter_bpf.o
endef
$(eval $(call filter_tool,spaced-guest,filter_gen,src/spaced-guest/filter.c))
$(eval $(call filter_tool,spaced-host,host_filter_gen,src/spaced-host/serve_filter.c))

define prog_rule
$(1)_OBJS := $$(patsubst %.c,$(B)/obj/%.o,$$(filter-out $$(BUILD_ONLY_$(1)),$$(wildcard src/$(1)/*.c))) \
             $$(if $$(wildcard docs/openapi/$(1).json),$(B)/gen/$(1)/openapi_doc.o) \
             $$(GEN_OBJS_$(1))
$(B)/bin/$(1): $$($(1)_OBJS) $(LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) $$(LDFLAGS_$(1)) -o $$@ $$($(1)_OBJS) $(LIB) $$(or $$(LIBS_$(1)),$$(LDLIBS_ALL))
endef
$(foreach p,$(PROGS),$(eval $(call prog_rule,$(p))))

# kept: make would delete them as intermediates, then build them again on
# the next run (their .d files name them)
.SECONDARY: $(UNIT_SRCS:%.c=$(B)/obj/%.o) $(BENCH_SRCS:%.c=$(B)/obj/%.o)
$(B)/tests/unit/%: $(B)/obj/tests/unit/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS_ALL)

# one source, one misbehaviour per binary (FAKE_MODE)
$(DOUBLE_BINS): $(B)/tests/doubles/guest-%: tests/doubles/fake_guest.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFAKE_MODE='"$*"' $(LDFLAGS) -o $@ $< $(LIB) -lsodium -ljansson

$(B)/bench/%: $(B)/obj/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS_ALL)

# The builds that test, test-san and fuzz start use every core unless the
# command line chose (-j): CI runs the three from a fresh clone, one after
# another, and a serial build leaves a core idle for minutes.
JOBS     ?= $(shell nproc 2>/dev/null || echo 1)
SUB_JOBS  = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))

up: deps all
	$(B)/bin/space up $(UP_ARGS)

test: deps
	$(MAKE) $(SUB_JOBS) all
	sh tests/run.sh $(B)

unit: all
	sh tests/run.sh $(B) unit

test-san: deps
	$(MAKE) $(SUB_JOBS) B=build-san SAN=1 all
	SPACE_SAN=1 sh tests/run.sh build-san

# libFuzzer harnesses, built by clang: the library is compiled once into
# build-fuzz/libspace.a (instrumented, no fuzzer main), and each harness
# takes from it only the objects it calls.
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -Isrc/libspace \
               -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
               -MMD -MP
FUZZ_LIB_OBJS := $(LIB_SRCS:src/libspace/%.c=build-fuzz/obj/%.o)
build-fuzz/obj/%.o: src/libspace/%.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -c -o $@ $<
build-fuzz/libspace.a: $(FUZZ_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^
build-fuzz/%: tests/fuzz/%.c build-fuzz/libspace.a
	@mkdir -p build-fuzz
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -MF build-fuzz/obj/$*.d -MT $@ \
	    -Wl,--as-needed -o $@ $< build-fuzz/libspace.a $(LDLIBS_ALL)

fuzz-build: deps $(FUZZ_BINS)

fuzz: deps
	$(MAKE) $(SUB_JOBS) fuzz-build
	sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

bench: deps
	$(MAKE) all $(BENCH_BINS)
	sh bench/run.sh $(B)

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(B)/obj $(B)/gen $(B)/tests/doubles build-fuzz/obj -name '*.d' 2>/dev/null)
