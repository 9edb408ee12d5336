/* Placeholder until param lands: each returns ncclInvalidUsage, "not supported by Weft yet". */
#include "core/api.h"
#include "nccl_device/host.h"

WEFT_API(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key) {
  (void)out;
  (void)key;
  return weft_unsupported("ncclParamBind");
}

WEFT_API(ncclResult_t, ncclParamGetI8, ncclParamHandle_t h, int8_t* out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetI8");
}

WEFT_API(ncclResult_t, ncclParamGetI16, ncclParamHandle_t h, int16_t* out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetI16");
}

WEFT_API(ncclResult_t, ncclParamGetI32, ncclParamHandle_t h, int32_t* out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetI32");
}

WEFT_API(ncclResult_t, ncclParamGetI64, ncclParamHandle_t h, int64_t* out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetI64");
}

WEFT_API(ncclResult_t, ncclParamGetU8, ncclParamHandle_t h, uint8_t* out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetU8");
}

WEFT_API(ncclResult_t, ncclParamGetU16, ncclParamHandle_t h, uint16_t* out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetU16");
}

WEFT_API(ncclResult_t, ncclParamGetU32, ncclParamHandle_t h, uint32_t* out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetU32");
}

WEFT_API(ncclResult_t, ncclParamGetU64, ncclParamHandle_t h, uint64_t* out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetU64");
}

WEFT_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out) {
  (void)h;
  (void)out;
  return weft_unsupported("ncclParamGetStr");
}

WEFT_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len) {
  (void)h;
  (void)out;
  (void)maxLen;
  (void)len;
  return weft_unsupported("ncclParamGet");
}

WEFT_API(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen) {
  (void)key;
  (void)value;
  (void)valueLen;
  return weft_unsupported("ncclParamGetParameter");
}

WEFT_API(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen) {
  (void)table;
  (void)tableLen;
  return weft_unsupported("ncclParamGetAllParameterKeys");
}

WEFT_API(void, ncclParamDumpAll, void) {
  weft_unsupported("ncclParamDumpAll");
}
