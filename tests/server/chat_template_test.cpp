// chat_template_test.cpp: bp-server's Jinja-subset interpreter
// (tools/bp-server/chat_template.cpp) on the chat templates the models
// publish, copied here verbatim from their tokenizer_config.json, rendered
// as transformers' apply_chat_template renders them; the same texts are
// what --chat-template NAME selects. Constructs outside the subset are a
// template_error naming them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "tools/bp-server/chat_template.hpp"

namespace {

using bp::server::chat_template;
using bp::server::template_error;
using json = nlohmann::json;

// Meta-Llama-3-8B-Instruct.
const char *kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% "
    "endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

// Mistral-7B-Instruct-v0.2.
const char *kMistral =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
    "are supported!') }}{% endif %}{% endfor %}";

// Qwen2.5-7B-Instruct.
const char *kQwen25 = R"TPL({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)TPL";

json msg(const char *role, const char *content) { return {{"role", role}, {"content", content}}; }

std::string render(const char *tmpl, const json &messages, const json &extra = json::object()) {
  json vars = {{"messages", messages}, {"add_generation_prompt", true}};
  vars.update(extra);
  return chat_template(tmpl).render(vars);
}

TEST(ChatTemplate, BuiltinNamesAreThePublishedTexts) {
  EXPECT_STREQ(bp::server::builtin_chat_template("llama3"), kLlama3);
  EXPECT_STREQ(bp::server::builtin_chat_template("qwen2.5"), kQwen25);
  EXPECT_STREQ(bp::server::builtin_chat_template("mistral"), kMistral);
  EXPECT_EQ(bp::server::builtin_chat_template("gpt5"), nullptr);
}

TEST(ChatTemplate, Llama3) {
  const json m = json::array({msg("system", "You are helpful."), msg("user", "  Hi there \n"),
                              msg("assistant", "Hello!"), msg("user", "How are you?")});
  EXPECT_EQ(render(kLlama3, m, {{"bos_token", "<|begin_of_text|>"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  json vars = {{"messages", json::array({msg("user", "x")})}, {"bos_token", "<B>"}, {"add_generation_prompt", false}};
  EXPECT_EQ(chat_template(kLlama3).render(vars), "<B><|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>");
}

TEST(ChatTemplate, Qwen25) {
  EXPECT_EQ(render(kQwen25, json::array({msg("user", "Hi")})),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(kQwen25, json::array({msg("system", "Be brief."), msg("user", "Hi"), msg("assistant", "Hello"),
                                         msg("user", "More")})),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nMore<|im_end|>\n<|im_start|>assistant\n");
  // A tool call and its answer; tools given (one key each: this
  // interpreter's objects print their keys sorted, Python's in insertion order).
  json call = {{"role", "assistant"},
               {"content", ""},
               {"tool_calls", json::array({{{"function", {{"name", "get"}, {"arguments", {{"city", "Paris"}}}}}}})}};
  json msgs = json::array({msg("user", "w?"), call, msg("tool", "sunny")});
  EXPECT_EQ(render(kQwen25, msgs, {{"tools", json::array({{{"name", "get"}}})}}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
            "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
            "signatures within <tools></tools> XML tags:\n<tools>\n{\"name\": \"get\"}\n</tools>\n\nFor each "
            "function call, return a json object with function name and arguments within <tool_call></tool_call> "
            "XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\nw?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get\", \"arguments\": "
            "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n"
            "</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, MistralAndItsRaiseException) {
  const json extra = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  EXPECT_EQ(render(kMistral, json::array({msg("user", "Hi"), msg("assistant", "Hello"), msg("user", "Bye")}), extra),
            "<s>[INST] Hi [/INST]Hello</s>[INST] Bye [/INST]");
  try {
    render(kMistral, json::array({msg("user", "a"), msg("user", "b")}), extra);
    FAIL() << "no exception";
  } catch (const template_error &e) {
    EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
}

TEST(ChatTemplate, WhitespaceControlTrimAndLstripBlocks) {
  const json m = json::array({msg("user", "a"), msg("user", "b")});
  // trim_blocks drops the newline after a block tag; lstrip_blocks the
  // indentation before one; "-" strips on its side.
  EXPECT_EQ(render("{% for m in messages %}\n  {{ m.content }}\n  {% endfor %}\nend", m), "  a\n  b\nend");
  EXPECT_EQ(render("x  {%- if true -%}  y  {%- endif %}", m), "xy");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }}|{{ 7 // 2 }}{{ 7 % 3 }}{{ -1 }}|{{ [1, 2][1:] }}|{{ 'ab' in 'cabd' }}", m),
            "a1None|31-1|[2]|True");
  EXPECT_EQ(render("{{ messages | length }}{{ 'y' if messages[5] is defined else 'n' }}{{ ' s '.strip() }}", m), "2ns");
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index }}{{ loop.first }}{{ loop.last }};{% endfor %}", m),
            "1TrueFalse;2FalseTrue;");
}

TEST(ChatTemplate, UnsupportedConstructsAreNamed) {
  const struct {
    const char *tmpl, *words;
  } cases[] = {
      {"{% macro f() %}x{% endmacro %}", "'{% macro %}'"},
      {"{{ messages | wordcount }}", "filter 'wordcount'"},
      {"{% set ns = namespace(a=1) %}", "function 'namespace()'"},
      {"{% for k, v in x.items() %}{% endfor %}", "several names"},
      {"{{ 2 ** 3 }}", "**"},
      {"{% if true %}", "missing"},
      {"{{ 'abc }}", "unterminated"},
  };
  for (const auto &c : cases) {
    try {
      render(c.tmpl, json::array());
      ADD_FAILURE() << c.tmpl << ": no exception";
    } catch (const template_error &e) {
      EXPECT_NE(std::string(e.what()).find(c.words), std::string::npos) << c.tmpl << ": " << e.what();
    }
  }
}

}  // namespace
