# flags.mk: the compile flags that gpuclust's answers depend on, defined once
# and included by every Makefile (the extension's, test/gpu's, bench's).
#
# Both back ends must compute the same distances bit for bit: in double, in
# dimension order, and with no multiply-add contracted into an FMA.

# gcc / clang, for src/, src/core/, test/ and bench/ C code
GC_EXACT_CFLAGS  = -ffp-contract=off
# nvcc, device code
GC_EXACT_NVFLAGS = -fmad=false
# the warnings every C file is built with (CI adds -Werror through GC_WERROR=1)
GC_WARN_CFLAGS   = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare
ifeq ($(GC_WERROR),1)
GC_WARN_CFLAGS  += -Werror
endif
# include path of the headers both back ends share
GC_COMMON_DIR   := $(dir $(lastword $(MAKEFILE_LIST)))
GC_INCLUDES      = -I$(GC_COMMON_DIR)
