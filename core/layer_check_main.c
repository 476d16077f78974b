/* layer_check_main.c: the main() of bp_layer_check_abi and
 * bp_layer_check_core (core/CMakeLists.txt). Those programs exist to be
 * linked: the layer's objects must link without the layers above them. */
int main(void) { return 0; }
