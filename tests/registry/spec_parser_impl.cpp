// spec_parser_impl.cpp: compiles the pure spec parser into this test binary.
// libbackplane.so hides its internal symbols, and the parser depends on
// nothing else, so the tests call it directly (table tests, fuzzing).
#include "registry/spec_parser.cpp"
