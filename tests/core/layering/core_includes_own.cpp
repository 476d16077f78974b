// A core/ file may include core/ and abi/ headers (check_layers.cmake).
#include "abi/call.hpp"
#include "abi/tables.hpp"
#include "core/errors.hpp"
