# cmake -DIN=remote.proto -DOUT=lite/remote.proto -P lite_proto.cmake
# Copies the protocol with "option optimize_for = LITE_RUNTIME;" appended
# (plugins/remote/CMakeLists.txt says why).
file(READ ${IN} text)
file(WRITE ${OUT} "${text}\n// Added for the remote plugin's private copy.\noption optimize_for = LITE_RUNTIME;\n")
