extern "C" int shipping_probe();
int main() { return shipping_probe() == 1 ? 0 : 1; }
