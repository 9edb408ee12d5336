/* SHA-256 from FIPS 180-4 section 6.2 and HMAC from RFC 2104, checked against the published
 * vectors in tests/security/test_sha256.c. Where the CPU has the SHA extensions (x86-64 SHA-NI)
 * blocks go through them: every bootstrap message's payload is hashed on both sides, and at a
 * thousand ranks that hashing was an eighth of init's CPU time in software. */
#include "util/sha256.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static uint32_t load_be32(const uint8_t* p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void store_be32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static void compress(uint32_t h[8], const uint8_t block[WEFT_SHA256_BLOCK]) {
  uint32_t w[64];
  for (int t = 0; t < 16; t++) w[t] = load_be32(block + 4 * t);
  for (int t = 16; t < 64; t++) {
    uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int t = 0; t < 64; t++) {
    uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

static void compress_portable(uint32_t h[8], const uint8_t* blocks, size_t n) {
  for (size_t i = 0; i < n; i++) compress(h, blocks + i * WEFT_SHA256_BLOCK);
}

#if defined(__x86_64__)
/* Four rounds: the message words plus their constants, two rounds per instruction. The state is
 * kept as the instructions want it, ABEF and CDGH. */
#define ROUNDS4(abef, cdgh, msg, k)                      \
  do {                                                   \
    __m128i wk_ = _mm_add_epi32((msg), (k));             \
    (cdgh) = _mm_sha256rnds2_epu32((cdgh), (abef), wk_); \
    wk_ = _mm_shuffle_epi32(wk_, 0x0E);                  \
    (abef) = _mm_sha256rnds2_epu32((abef), (cdgh), wk_); \
  } while (0)

__attribute__((target("sha,sse4.1"))) static void compress_shani(uint32_t h[8], const uint8_t* blocks,
                                                                 size_t n) {
  const __m128i be = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll); /* big-endian words */
  __m128i dcba = _mm_loadu_si128((const __m128i*)&h[0]);
  __m128i hgfe = _mm_loadu_si128((const __m128i*)&h[4]);
  __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  for (size_t b = 0; b < n; b++, blocks += WEFT_SHA256_BLOCK) {
    __m128i abef0 = abef, cdgh0 = cdgh, w[4];
    for (int i = 0; i < 4; i++)
      w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i*)(blocks + 16 * i)), be);
    for (int g = 0; g < 16; g++) {
      if (g >= 4) {
        /* W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16] for the group's four t, from the
         * four groups before it (w[g%4] holds the oldest). */
        __m128i oldest = w[g % 4], next = w[(g + 1) % 4], third = w[(g + 2) % 4], last = w[(g + 3) % 4];
        __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(oldest, next), _mm_alignr_epi8(last, third, 4));
        w[g % 4] = _mm_sha256msg2_epu32(t, last);
      }
      ROUNDS4(abef, cdgh, w[g % 4], _mm_loadu_si128((const __m128i*)&K[4 * g]));
    }
    abef = _mm_add_epi32(abef, abef0);
    cdgh = _mm_add_epi32(cdgh, cdgh0);
  }
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128((__m128i*)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128((__m128i*)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}

static int cpu_has_sha(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 29))) return 0;  /* SHA */
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) && (c & (1u << 9)); /* SSE4.1, SSSE3 */
}
#else
static int cpu_has_sha(void) { return 0; }
#define compress_shani compress_portable
#endif

typedef void (*compress_fn)(uint32_t h[8], const uint8_t* blocks, size_t n);
static compress_fn chosen; /* resolved on first use; every thread resolves the same */
static int forced_portable;

static compress_fn compressor(void) {
  compress_fn fn = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
  if (fn == NULL) {
    fn = !forced_portable && cpu_has_sha() ? compress_shani : compress_portable;
    __atomic_store_n(&chosen, fn, __ATOMIC_RELAXED);
  }
  return fn;
}

int weft_sha256_hardware(void) {
  return compressor() == compress_shani && compress_shani != compress_portable;
}

void weft_sha256_use_portable(int on) {
  forced_portable = on;
  __atomic_store_n(&chosen, (compress_fn)NULL, __ATOMIC_RELAXED);
}

void weft_sha256_init(struct weft_sha256* s) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, iv, sizeof(iv));
  s->total = 0;
  s->used = 0;
}

void weft_sha256_update(struct weft_sha256* s, const void* data, size_t len) {
  if (len == 0) return; /* data may be NULL then */
  const uint8_t* p = data;
  compress_fn fn = compressor();
  s->total += len;
  if (s->used > 0) { /* fill the pending block first */
    size_t take = WEFT_SHA256_BLOCK - s->used;
    if (take > len) take = len;
    memcpy(s->buf + s->used, p, take);
    s->used += take;
    p += take;
    len -= take;
    if (s->used < WEFT_SHA256_BLOCK) return;
    fn(s->h, s->buf, 1);
    s->used = 0;
  }
  size_t whole = len / WEFT_SHA256_BLOCK; /* straight from the caller's buffer */
  if (whole) fn(s->h, p, whole);
  p += whole * WEFT_SHA256_BLOCK;
  len -= whole * WEFT_SHA256_BLOCK;
  memcpy(s->buf, p, len);
  s->used = len;
}

void weft_sha256_final(struct weft_sha256* s, uint8_t out[WEFT_SHA256_BYTES]) {
  uint64_t bits = s->total * 8;
  /* Padding (5.1.1): a 1 bit, zeros up to 56 mod 64 bytes, then the bit length big-endian. */
  uint8_t pad[WEFT_SHA256_BLOCK + 8] = {0x80};
  size_t npad = (s->used < 56 ? 56 : 120) - s->used;
  for (int i = 0; i < 8; i++) pad[npad + i] = (uint8_t)(bits >> (56 - 8 * i));
  weft_sha256_update(s, pad, npad + 8);
  for (int i = 0; i < 8; i++) store_be32(out + 4 * i, s->h[i]);
  memset(s, 0, sizeof(*s));
}

void weft_sha256(const void* data, size_t len, uint8_t out[WEFT_SHA256_BYTES]) {
  struct weft_sha256 s;
  weft_sha256_init(&s);
  weft_sha256_update(&s, data, len);
  weft_sha256_final(&s, out);
}

void weft_hmac_init(struct weft_hmac* h, const void* key, size_t keylen) {
  uint8_t k[WEFT_SHA256_BLOCK] = {0}, ikey[WEFT_SHA256_BLOCK];
  /* Keys longer than a block are hashed first (RFC 2104 section 2). */
  if (keylen > WEFT_SHA256_BLOCK)
    weft_sha256(key, keylen, k);
  else if (keylen > 0)
    memcpy(k, key, keylen);
  for (int i = 0; i < WEFT_SHA256_BLOCK; i++) {
    ikey[i] = k[i] ^ 0x36;
    h->okey[i] = k[i] ^ 0x5c;
  }
  weft_sha256_init(&h->inner);
  weft_sha256_update(&h->inner, ikey, sizeof(ikey));
  memset(k, 0, sizeof(k));
  memset(ikey, 0, sizeof(ikey));
}

void weft_hmac_update(struct weft_hmac* h, const void* data, size_t len) {
  weft_sha256_update(&h->inner, data, len);
}

void weft_hmac_final(struct weft_hmac* h, uint8_t out[WEFT_SHA256_BYTES]) {
  uint8_t ihash[WEFT_SHA256_BYTES];
  weft_sha256_final(&h->inner, ihash);
  struct weft_sha256 outer;
  weft_sha256_init(&outer);
  weft_sha256_update(&outer, h->okey, sizeof(h->okey));
  weft_sha256_update(&outer, ihash, sizeof(ihash));
  weft_sha256_final(&outer, out);
  memset(h, 0, sizeof(*h));
}

void weft_hmac_sha256(const void* key, size_t keylen, const void* data, size_t len,
                      uint8_t out[WEFT_SHA256_BYTES]) {
  struct weft_hmac h;
  weft_hmac_init(&h, key, keylen);
  weft_hmac_update(&h, data, len);
  weft_hmac_final(&h, out);
}
