// An abi/ file including a core/ header: must not compile (check_layers.cmake).
#include "abi/tables.hpp"
#include "core/errors.hpp"
