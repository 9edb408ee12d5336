/* SHA-256 against the FIPS 180-2 examples, HMAC-SHA256 against RFC 4231 test cases 1-4, and the
 * auth helpers built on them (constant-time compare, connection key with a PSK). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "util/auth.h"
#include "util/sha256.h"

static void from_hex(const char* hex, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    out[i] = (uint8_t)v;
  }
}

static int digest_is(const uint8_t* got, const char* hex) {
  uint8_t want[WEFT_SHA256_BYTES];
  from_hex(hex, want, sizeof(want));
  return memcmp(got, want, sizeof(want)) == 0;
}

static void test_sha256(void) {
  uint8_t d[WEFT_SHA256_BYTES];
  weft_sha256("abc", 3, d);
  EXPECT(digest_is(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  const char* two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  weft_sha256(two, strlen(two), d);
  EXPECT(digest_is(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
  /* One million 'a' fed in uneven pieces: exercises the block buffering. */
  struct weft_sha256 s;
  char chunk[997];
  memset(chunk, 'a', sizeof(chunk));
  weft_sha256_init(&s);
  for (size_t left = 1000000; left > 0;) {
    size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
    weft_sha256_update(&s, chunk, n);
    left -= n;
  }
  weft_sha256_final(&s, d);
  EXPECT(digest_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
  weft_sha256("", 0, d);
  EXPECT(digest_is(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
}

static void test_hmac(void) {
  uint8_t key[25], data[50], d[WEFT_SHA256_BYTES];
  memset(key, 0x0b, 20);
  weft_hmac_sha256(key, 20, "Hi There", 8, d); /* case 1 */
  EXPECT(digest_is(d, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"));
  weft_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d); /* case 2 */
  EXPECT(digest_is(d, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
  memset(key, 0xaa, 20);
  memset(data, 0xdd, 50);
  weft_hmac_sha256(key, 20, data, 50, d); /* case 3 */
  EXPECT(digest_is(d, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"));
  for (int i = 0; i < 25; i++) key[i] = (uint8_t)(i + 1);
  memset(data, 0xcd, 50);
  /* Case 4, MACed in two steps to check the incremental interface. */
  struct weft_hmac h;
  weft_hmac_init(&h, key, 25);
  weft_hmac_update(&h, data, 17);
  weft_hmac_update(&h, data + 17, 33);
  weft_hmac_final(&h, d);
  EXPECT(digest_is(d, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"));
}

static void test_auth(void) {
  struct weft_auth_key job, a, b, pub;
  for (int i = 0; i < WEFT_AUTH_KEY_BYTES; i++) job.bytes[i] = (uint8_t)(3 * i);
  weft_auth_conn_key(&job, NULL, 0, &a);
  EXPECT(memcmp(a.bytes, job.bytes, sizeof(a.bytes)) == 0);
  weft_auth_conn_key(&job, "psk-1", 5, &a);
  weft_auth_conn_key(&job, "psk-2", 5, &b);
  EXPECT(memcmp(a.bytes, job.bytes, sizeof(a.bytes)) != 0);
  EXPECT(memcmp(a.bytes, b.bytes, sizeof(a.bytes)) != 0);
  uint8_t nonce[WEFT_AUTH_NONCE_BYTES] = {1, 2, 3}, mac[WEFT_AUTH_MAC_BYTES];
  weft_auth_mac(&job, "label", nonce, "ctx", 3, mac);
  EXPECT(weft_auth_check(&job, "label", nonce, "ctx", 3, mac));
  EXPECT(!weft_auth_check(&job, "labem", nonce, "ctx", 3, mac));
  EXPECT(!weft_auth_check(&a, "label", nonce, "ctx", 3, mac));
  EXPECT(!weft_auth_check(&job, "label", nonce, "ctx", 2, mac));
  nonce[31] ^= 1;
  EXPECT(!weft_auth_check(&job, "label", nonce, "ctx", 3, mac));
  uint8_t x[8] = {0}, y[8] = {0};
  EXPECT(weft_auth_equal(x, y, sizeof(x)));
  y[7] = 1;
  EXPECT(!weft_auth_equal(x, y, sizeof(x)));
  weft_auth_public_key(&pub);
  EXPECT(weft_auth_is_public(&pub));
  EXPECT(!weft_auth_is_public(&job));
  uint8_t r1[32] = {0}, r2[32] = {0};
  EXPECT(weft_auth_random(r1, sizeof(r1)) == ncclSuccess && weft_auth_random(r2, sizeof(r2)) == ncclSuccess);
  EXPECT(memcmp(r1, r2, sizeof(r1)) != 0);
}

/* The CPU's SHA instructions and the portable code give the same digests, for every length
 * around the block and padding edges and for input fed in pieces that straddle blocks. */
static void test_hardware_matches_portable(void) {
  if (!weft_sha256_hardware()) {
    printf("no SHA instructions on this CPU: the portable code ran the vectors\n");
    return;
  }
  static uint8_t data[5000];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < sizeof(data); i++) data[i] = (uint8_t)((x = x * 6364136223846793005ull + 1) >> 56);
  size_t lens[300];
  int n = 0;
  for (size_t l = 0; l <= 200; l++) lens[n++] = l;
  lens[n++] = 4096 + 7;
  lens[n++] = sizeof(data);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    uint8_t hw[WEFT_SHA256_BYTES], sw[WEFT_SHA256_BYTES], pieces[WEFT_SHA256_BYTES];
    weft_sha256(data, lens[i], hw);
    struct weft_sha256 s;
    weft_sha256_init(&s);
    for (size_t at = 0; at < lens[i]; at += 37)
      weft_sha256_update(&s, data + at, lens[i] - at < 37 ? lens[i] - at : 37);
    weft_sha256_final(&s, pieces);
    weft_sha256_use_portable(1);
    weft_sha256(data, lens[i], sw);
    weft_sha256_use_portable(0);
    bad += memcmp(hw, sw, sizeof(hw)) != 0 || memcmp(pieces, sw, sizeof(sw)) != 0;
  }
  EXPECT_MSG(bad == 0, "%d of %d lengths hash differently with the SHA instructions", bad, n);
}

int main(void) {
  test_sha256();
  weft_sha256_use_portable(1); /* the vectors through the portable code too */
  test_sha256();
  test_hmac();
  weft_sha256_use_portable(0);
  test_hardware_matches_portable();
  test_hmac();
  test_auth();
  return test_finish("test_sha256");
}
