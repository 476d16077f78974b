// synth_sample.cpp: the text bp-gguf synth trains its vocabularies on.
// Written for this tool: English prose, some C and Python, and short
// passages in French, German, Spanish, Russian, Chinese and Japanese, so the
// learned pieces look like a real tokenizer's (common words whole, code
// punctuation merged, other scripts in characters and short runs).
#include "synth.hpp"

namespace bp::gguf_tool {

const char *synth_sample_text() {
  return R"SAMPLE(The weather was cold on the morning the train left the station. The people on the platform
waited for the doors to open, and the children held the hands of their parents. When the train finally
started to move, the city slowly disappeared behind the hills, and the fields and the forests took its place.
She had been working on the problem for three weeks before she found the answer. It was not the answer
she expected: the model was right, but the data was wrong. The numbers in the second table had been
copied twice, and every result that depended on them was off by a factor of two. She wrote a short note
to the team, explained what had happened, and started the experiment again from the beginning.
A good explanation is one that a reader can follow without looking anything up. It starts with what the
reader already knows, adds one new idea at a time, and shows an example for each of them. The best
teachers are the ones who remember what it was like not to understand.
In the summer of that year the river was low, and the old bridge could be seen from the road. People
came from the nearby villages to look at the stones, which had been under the water for a hundred years.
Some of them said that the bridge was built by the Romans; others thought it was much younger.
Large language models predict the next token of a text. The text is split into tokens by a tokenizer,
each token is turned into a vector by an embedding table, and a stack of transformer layers computes a
new vector for every position. The last layer's vector is multiplied by the output matrix, which gives
one score (a logit) for every token of the vocabulary; the softmax of the logits is the distribution of
the next token. Attention lets each position read from the positions before it, and the feed-forward
network transforms each position on its own.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns the number of lines in the file, or -1 when it cannot be read. */
static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  int count = 0;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), f) != NULL) {
    if (strchr(buffer, '\n') != NULL) count++;
  }
  fclose(f);
  return count;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    int n = count_lines(argv[i]);
    if (n < 0) {
      fprintf(stderr, "error: cannot read %s\n", argv[i]);
      return 1;
    }
    printf("%8d %s\n", n, argv[i]);
  }
  return 0;
}

def softmax(values):
    """Returns the softmax of a list of numbers."""
    largest = max(values)
    exps = [math.exp(v - largest) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


class Tokenizer:
    def __init__(self, vocab, merges):
        self.vocab = vocab
        self.ranks = {pair: i for i, pair in enumerate(merges)}

    def encode(self, text):
        words = text.split(" ")
        result = []
        for word in words:
            result.extend(self.encode_word(word))
        return result

    def encode_word(self, word):
        symbols = list(word)
        while len(symbols) > 1:
            pairs = [(symbols[i], symbols[i + 1]) for i in range(len(symbols) - 1)]
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            i = pairs.index(best)
            symbols[i : i + 2] = [best[0] + best[1]]
        return [self.vocab[s] for s in symbols]

for i in range(10):
    print(f"step {i}: loss = {0.5 ** i:.4f}")

Le matin, la ville était calme et les rues étaient presque vides. Les enfants allaient à l'école et les
boulangers ouvraient leurs portes. Nous avons pris un café sur la place, près de la fontaine, avant de
partir pour la gare. Le voyage a duré trois heures, et le paysage était magnifique.
Die Sonne schien, als wir das kleine Dorf in den Bergen erreichten. Die Häuser waren aus Holz und Stein
gebaut, und vor jedem Fenster standen Blumen. Wir haben in einem Gasthaus gegessen und sind danach zum
See gewandert. Das Wasser war kalt, aber sehr klar.
El mercado de la ciudad abre todos los días a las siete de la mañana. Los vendedores llegan temprano con
frutas, verduras y pescado fresco. Mi abuela siempre decía que la mejor comida es la que se prepara con
tiempo y con cariño, y que la mesa es el lugar donde la familia se encuentra.
Утром мы вышли из дома и пошли к реке. Погода была хорошая, светило солнце, и на небе не было ни одного
облака. Мы долго гуляли по берегу, разговаривали о книгах и о том, что будем делать летом.
今天天气很好，我们去公园散步。公园里有很多人，有的在跑步，有的在看书，还有孩子们在草地上玩。
我们在湖边坐了一会儿，然后去附近的饭馆吃了午饭。学习语言需要时间，但是每天练习就会进步。
今日は朝から雨が降っていました。私は駅まで歩いて、電車で会社に行きました。仕事が終わった後、友達と
一緒に晩ご飯を食べました。日本語の勉強は難しいですが、とても楽しいです。
The numbers 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 1000, 2024, 3.14159 and 2.71828 appear in many texts.
Questions? Answers! Lists: one, two, three; "quotes", 'single quotes', (parentheses), [brackets], {braces}.
)SAMPLE";
}

}  // namespace bp::gguf_tool
