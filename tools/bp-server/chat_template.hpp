// chat_template.hpp: renders a model's chat template (tokenizer.chat_template,
// a Jinja template) with the project's own interpreter of the Jinja subset
// the Llama 3, Qwen 2.5 and Mistral templates use: text, {{ }}, {% %} and
// {# #} with "-" whitespace control and Hugging Face's trim_blocks and
// lstrip_blocks; for (loop.index0/index/first/last/length), if/elif/else,
// set; literals, names, .attr, [index], [a:b], + - * / % ~, comparisons,
// in, and/or/not, "x if c else y", tests (is defined/none/string/...),
// filters (trim, tojson, length, upper, lower, string, default), the string
// methods strip/startswith/endswith, raise_exception(). Anything else is a
// template_error naming the construct, never a wrong rendering.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <stdexcept>
#include <string>

namespace bp::server {

struct template_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class chat_template {
 public:
  // Parses |source|; throws template_error for a construct outside the subset.
  explicit chat_template(const std::string &source);
  ~chat_template();
  chat_template(chat_template &&) noexcept;
  // Renders with |vars| (messages, bos_token, eos_token,
  // add_generation_prompt, ...) as the global names; throws template_error,
  // with raise_exception's message as its text.
  std::string render(const nlohmann::json &vars) const;

  struct node;

 private:
  std::unique_ptr<node> root_;
};

// The templates --chat-template NAME selects ("llama3", "chatml", "mistral"),
// as those models publish them; nullptr for another name.
const char *builtin_chat_template(const std::string &name);

}  // namespace bp::server
