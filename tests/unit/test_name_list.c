/* NCCL's device-list syntax as NCCL_SOCKET_IFNAME (names without ports) and NCCL_IB_HCA (devices
 * with ports) read it. */
#include "check.h"
#include "util/name_list.h"

static void test_interfaces(void) {
  EXPECT(weft_name_list_match("eth,ib", "eth0", 0));
  EXPECT(weft_name_list_match("eth,ib", "ib1", 0));
  EXPECT(!weft_name_list_match("eth,ib", "lo", 0));
  EXPECT(!weft_name_list_match("^eth,ib", "eth0", 0));
  EXPECT(weft_name_list_match("^eth,ib", "lo", 0));
  EXPECT(weft_name_list_match("=eth0", "eth0", 0));
  EXPECT(!weft_name_list_match("=eth0", "eth01", 0));
  EXPECT(!weft_name_list_match("=eth", "eth0", 0));
  EXPECT(!weft_name_list_match("^=eth0", "eth0", 0));
  EXPECT(weft_name_list_match("^=eth0", "eth01", 0));
  EXPECT(weft_name_list_match("docker,,lo", "lo", 0));
  EXPECT(!weft_name_list_match("", "eth0", 0));
  EXPECT(weft_name_list_match(NULL, "eth0", 0));
  /* Without ports a colon belongs to the name: an alias interface is selected whole. */
  EXPECT(weft_name_list_match("=eth0:1", "eth0:1", 0));
  EXPECT(!weft_name_list_match("=eth0:1", "eth0", 0));
}

static void test_devices_with_ports(void) {
  EXPECT(weft_name_list_match("mlx5", "mlx5_0", 1));
  EXPECT(weft_name_list_match("mlx5", "mlx5_3", 2));
  EXPECT(weft_name_list_match("mlx5_0:1", "mlx5_0", 1));
  EXPECT(!weft_name_list_match("mlx5_0:1", "mlx5_0", 2));
  EXPECT(weft_name_list_match("mlx5_0:1,mlx5_1:2", "mlx5_1", 2));
  EXPECT(!weft_name_list_match("mlx5_0:1,mlx5_1:2", "mlx5_1", 1));
  EXPECT(weft_name_list_match("=mlx5_1", "mlx5_1", 1));
  EXPECT(!weft_name_list_match("=mlx5_1", "mlx5_10", 1));
  EXPECT(weft_name_list_match("=mlx5_1:1", "mlx5_1", 1));
  EXPECT(!weft_name_list_match("=mlx5_1:1", "mlx5_10", 1));
  EXPECT(!weft_name_list_match("^mlx5_0:1", "mlx5_0", 1));
  EXPECT(weft_name_list_match("^mlx5_0:1", "mlx5_0", 2));
  EXPECT(weft_name_list_match("^mlx5_0", "mlx5_1", 1));
  EXPECT(!weft_name_list_match(":1", "mlx5_0", 1)); /* an entry needs a name */
}

int main(void) {
  test_interfaces();
  test_devices_with_ports();
  return test_finish("test_name_list");
}
