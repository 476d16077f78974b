// chat_page.hpp: the chat page GET / serves (chat_page.cpp, docs/server.md).
#pragma once

namespace bp::server {

// One self-contained HTML document (its CSS and script inline): it asks
// /v1/models whether the model has a chat template, then streams answers
// from /v1/chat/completions, or from /v1/completions with the plain text
// when there is no template.
extern const char *const chat_page_html;

}  // namespace bp::server
