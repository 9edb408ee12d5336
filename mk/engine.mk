# Host reduction loops: let the compiler vectorize them (with run-time alias checks, since
# reductions may run in place).
ifneq ($(DEBUG),1)
$(BUILD)/obj/src/collectives/host/reduce.o: CFLAGS += -O3
endif
