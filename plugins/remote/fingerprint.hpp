// fingerprint.hpp: the op-table fingerprint this plugin sends in Hello:
// remote/common/protocol.hpp's, with the ops spelled by the plugins' own op
// table (bp_op_name lives in libbackplane, which a plugin does not link).
// tests/plugins/remote checks that it equals the library's.
#ifndef BP_PLUGIN_REMOTE_FINGERPRINT_HPP_
#define BP_PLUGIN_REMOTE_FINGERPRINT_HPP_

#include <string>

#include "op_family.hpp"
#include "protocol.hpp"

namespace bp::remote_plugin {

inline std::string op_table_fingerprint() { return bp::remote::op_table_fingerprint_with(bp::plugins::op_name); }

}  // namespace bp::remote_plugin

#endif  // BP_PLUGIN_REMOTE_FINGERPRINT_HPP_
