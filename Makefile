# gpuclust: PGXS build.
#
#   make                      build gpuclust.so and, when nvcc is found, gpuclust_cuda.so
#   make USE_CUDA=0           build without the GPU back end
#   make CUDA_ARCH="sm_90"    build the GPU back end for chosen architectures
#   make install / installcheck / unittest / test

EXTENSION   = gpuclust
MODULE_big  = gpuclust
EXTVERSION  = $(shell sed -n "s/^default_version = '\\(.*\\)'/\\1/p" gpuclust.control)
# The install script of every release and the update scripts between them.
DATA        = $(sort $(wildcard sql/gpuclust--*.sql))

SRCS        = $(sort $(wildcard src/*.c src/core/*.c))
OBJS        = $(SRCS:.c=.o)

# pg_regress tests: every sql/*.sql but the install and update scripts, in name
# order; the expected output is expected/<name>.out (PGXS's default --inputdir=.).
REGRESS     = $(sort $(basename $(notdir $(filter-out sql/$(EXTENSION)--%,$(wildcard sql/*.sql)))))
REGRESS_OPTS = --load-extension=gpuclust

PG_CONFIG  ?= pg_config

# The flags the answers depend on, and the warnings, are defined once in common/flags.mk.
include common/flags.mk
PG_CPPFLAGS = -Isrc -Isrc/core $(GC_INCLUDES)
PG_CFLAGS   = $(GC_WARN_CFLAGS) $(GC_EXACT_CFLAGS) -O2
SHLIB_LINK  = -ldl -lm -pthread

# ------------------------------------------------------------------ CUDA
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
ifeq ($(NVCC),)
USE_CUDA   ?= 0
else
USE_CUDA   ?= 1
endif
# sm_70 .. sm_90, less what this nvcc no longer supports (CUDA 13 starts at sm_75).
CUDA_ARCH_WANTED ?= sm_70 sm_75 sm_80 sm_86 sm_89 sm_90
ifeq ($(origin CUDA_ARCH),undefined)
CUDA_ARCH  := $(filter $(CUDA_ARCH_WANTED),$(shell $(NVCC) --list-gpu-code 2>/dev/null))
endif
CUDA_PTX   ?= $(lastword $(CUDA_ARCH))
CUDA_SRCS   = $(sort $(wildcard cuda/*.cu))
CUDA_OBJS   = $(CUDA_SRCS:.cu=.o)
CUDA_LIBDIR ?= $(CUDA_HOME)/lib64
NVCC_GENCODE = $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(subst sm_,,$(a)),code=$(a)) \
               -gencode arch=compute_$(subst sm_,,$(CUDA_PTX)),code=compute_$(subst sm_,,$(CUDA_PTX))
# cuBLAS is opened with dlopen at the first k-means product (cuda/kmeans_product.cu):
# the toolkit's library by its path, else its soname through the loader.
CUBLAS_SONAME ?= $(or $(shell objdump -p $(CUDA_LIBDIR)/libcublas.so 2>/dev/null | awk '/SONAME/ {print $$2}'),libcublas.so)
NVCC_FLAGS ?= -O3 -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra,-Wno-unused-parameter,-fvisibility=hidden \
              $(GC_EXACT_NVFLAGS) --expt-relaxed-constexpr -Icuda $(GC_INCLUDES) -lineinfo
CUBLAS_DEFS = -DGC_CUBLAS_PATH='"$(CUDA_LIBDIR)/$(CUBLAS_SONAME)"' -DGC_CUBLAS_SONAME='"$(CUBLAS_SONAME)"'

ifeq ($(USE_CUDA),1)
CUDA_SHLIB  = gpuclust_cuda.so
EXTRA_CLEAN = $(CUDA_OBJS) gpuclust_cuda.so
PG_CPPFLAGS += -DGC_HAVE_CUDA=1
all: $(CUDA_SHLIB)
install: install-cuda
endif

EXTRA_CLEAN += $(patsubst %.c,%,$(wildcard test/unit/test_*.c)) test/unit/obj results regression.diffs regression.out

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(OBJS): $(wildcard src/*.h src/core/*.h common/*.h)

cuda/%.o: cuda/%.cu $(wildcard cuda/*.cuh common/*.h)
	$(NVCC) $(NVCC_FLAGS) $(CUBLAS_DEFS) $(NVCC_GENCODE) -c $< -o $@

# cudart is linked statically and cuBLAS opened when k-means first needs it,
# so only the driver (libcuda.so.1) must be present to load the back end;
# without it the back end still loads and answers GC_ERR_NO_DRIVER.
# A direct call into cuBLAS would leave an undefined symbol that only fails
# when the back end is loaded on a GPU machine: the link refuses it here.
gpuclust_cuda.so: $(CUDA_OBJS)
	$(NVCC) -shared $(NVCC_GENCODE) -o $@ $^ -L$(CUDA_LIBDIR) -lcudart_static \
	    -Xlinker -rpath,$(CUDA_LIBDIR) -ldl -lrt -lpthread
	@if nm -D --undefined-only $@ | grep -E ' cublas'; then \
	    echo "$@: the symbols above call cuBLAS directly; call them through the cublas table of cuda/kmeans.cuh"; \
	    rm -f $@; exit 1; fi

.PHONY: install-cuda unittest test dist
install-cuda: $(CUDA_SHLIB)
	$(INSTALL_SHLIB) $(CUDA_SHLIB) '$(DESTDIR)$(pkglibdir)/'

# Unit tests of the algorithm core, without PostgreSQL: each test/unit/test_*.c
# is a program linked with the core that exits non-zero on a failed check.
# The core is compiled once for all of them (test/unit/obj), with their flags.
CORE_SRCS  = $(sort $(wildcard src/core/*.c))
UNIT_TESTS = $(patsubst %.c,%,$(sort $(wildcard test/unit/test_*.c)))
UNIT_CORE_OBJS = $(patsubst src/core/%.c,test/unit/obj/%.o,$(CORE_SRCS))
UNIT_CFLAGS = -std=gnu11 -O2 -g $(GC_WARN_CFLAGS) $(GC_EXACT_CFLAGS) -Isrc/core $(GC_INCLUDES) -Itest/unit
test/unit/obj/%.o: src/core/%.c $(wildcard src/core/*.h common/*.h)
	@mkdir -p test/unit/obj
	$(CC) $(UNIT_CFLAGS) -c -o $@ $<
test/unit/test_%: test/unit/test_%.c test/unit/unit.h test/unit/dbscan_ref.h $(UNIT_CORE_OBJS) $(wildcard src/core/*.h common/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_CORE_OBJS) -ldl -lm -pthread

unittest: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; ./$$t; done

test:
	./test/run-all

# A source tarball of the committed tree, gpuclust-<version>.tar.gz, that builds
# with PGXS on a fresh machine (the tests are in it; .git is not).
dist:
	git archive --format=tar.gz --prefix=$(EXTENSION)-$(EXTVERSION)/ \
	    -o $(EXTENSION)-$(EXTVERSION).tar.gz HEAD
	@echo "wrote $(EXTENSION)-$(EXTVERSION).tar.gz"
