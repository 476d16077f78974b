// A core/ file including a registry/ header: must not compile (check_layers.cmake).
#include "core/internal.hpp"
#include "registry/registry_internal.hpp"
