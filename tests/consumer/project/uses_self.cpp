#include <cstdio>

extern "C" int selfcontained_check();

int main() {
  int rc = selfcontained_check();
  std::printf("uses_self: %s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
