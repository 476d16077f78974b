// A core/ file including a registry/ header: must not compile (check_layers.cmake).
#include "core/errors.hpp"
#include "registry/registry_internal.hpp"
