// clang materializing a 200M-element constexpr array: gigabytes of APValues.
struct Big { int v[200000000]; };
constexpr Big make() { Big b{}; for (int i = 0; i < 200000000; ++i) b.v[i] = i; return b; }
constexpr Big big = make();
extern "C" int get(int i) { return big.v[i]; }
