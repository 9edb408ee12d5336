# Perf binaries on GPUs (perf/device.c): with CUDA on they are built with WEFT_PERF_CUDA and the
# shared CUDA runtime, as nccl-tests is. They still run without a GPU or driver: perf/device.c
# probes at run time and falls back to host buffers (WEFT_BACKEND=host forces that).
# The link of one perf binary ($< its main), shared by the plain and the MPI rules.
PERF_LINK = $(CC) -Iinclude -Iperf -std=gnu11 $(OPT) -Wall -Wextra -pthread $(SANFLAGS) $(PERF_CUDA_FLAGS) -o $@ $< \
  $(PERF_COMMON) -L$(BUILD)/lib -lnccl -Wl,-rpath,'$$ORIGIN/../lib' -lm $(PERF_CUDA_LIBS)
ifeq ($(CUDA),1)
PERF_CUDA_FLAGS := -DWEFT_PERF_CUDA -isystem $(CUDA_HOME)/include
PERF_CUDA_LIBS = $(CUDART_SHARED)
endif

# make MPI=1 builds the perf binaries as nccl-tests' MPI build does: with mpicc ($(MPI_HOME)/bin/mpicc
# when MPI_HOME is given, else MPICC, default mpicc), rank and size from MPI_COMM_WORLD and the unique
# id from rank 0 by MPI_Bcast (perf/launch.c). NAME_SUFFIX (empty by default, as in nccl-tests) names
# them <coll>_perf$(NAME_SUFFIX), so that MPI=1 NAME_SUFFIX=_mpi keeps the plain ones beside them.
PERF_MPICC = $(if $(MPI_HOME),$(MPI_HOME)/bin/mpicc,$(or $(MPICC),mpicc))
PERF_STAMP_DIR := $(BUILD)/obj/perf
PERF_PLAIN_SIG := plain
ifeq ($(MPI),1)
ifeq ($(shell command -v $(PERF_MPICC) 2>/dev/null),)
$(error MPI=1: $(PERF_MPICC) not found (install Open MPI or MPICH: bash scripts/deps.sh; or set MPI_HOME))
endif
PERF_MPI_SIG := mpi $(PERF_MPICC)
PERF_MPI_BINS := $(PERF_BINS:%=%$(NAME_SUFFIX))
perf: $(PERF_MPI_BINS)
$(PERF_MPI_BINS): private CC = $(PERF_MPICC)
$(PERF_MPI_BINS): private PERF_CUDA_FLAGS += -DWEFT_PERF_MPI
ifeq ($(NAME_SUFFIX),)
PERF_PLAIN_SIG := $(PERF_MPI_SIG)
else
$(PERF_MPI_BINS): $(PERF_STAMP_DIR)/flags$(NAME_SUFFIX)
$(BUILD)/bin/%_perf$(NAME_SUFFIX): perf/%_perf.c $(PERF_COMMON) $(wildcard perf/*.h) $(SHLIB)
	@mkdir -p $(dir $@)
	$(PERF_LINK)
endif
endif

# A stamp per binary name says how those binaries were built (plain or MPI); it is rewritten only
# when that changes, so switching MPI relinks them and nothing else does.
perf_stamp = $(shell mkdir -p $(PERF_STAMP_DIR) && f=$(PERF_STAMP_DIR)/$(1) && \
  { [ "$$(cat $$f 2>/dev/null)" = "$(2)" ] || echo "$(2)" >$$f; })
$(call perf_stamp,flags,$(PERF_PLAIN_SIG))
$(PERF_BINS): $(PERF_STAMP_DIR)/flags
ifneq ($(NAME_SUFFIX),)
ifeq ($(MPI),1)
$(call perf_stamp,flags$(NAME_SUFFIX),$(PERF_MPI_SIG))
endif
endif

# `make tests` also builds the MPI variant as <coll>_perf_mpi when mpicc is installed, for
# tests/launcher/test_mpirun.sh (not for the emulated GPU's build).
ifeq ($(filter 1,$(MPI) $(EMU)),)
ifneq ($(shell command -v mpicc 2>/dev/null),)
.PHONY: perf-mpi
tests: perf-mpi
perf-mpi: perf
	@$(MAKE) --no-print-directory MPI=1 NAME_SUFFIX=_mpi perf
endif
endif
