// parse_impl.cpp: the GGUF parser compiled into the test binary (its
// symbols are hidden inside libbackplane.so), for the corpus replay.
#include "gguf/parse.cpp"
