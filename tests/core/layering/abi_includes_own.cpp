// An abi/ file may include abi/ headers (check_layers.cmake).
#include "abi/call.hpp"
#include "abi/tables.hpp"
