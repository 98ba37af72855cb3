// The executable that owns the tests' shared precompiled header (tests/testing/CMakeLists.txt):
// built only so that GoogleTest and nlohmann-json are parsed once per build tree, not per test.
int main() { return 0; }
