"""From ids to text: the Translator and evaluation; the decoding strategies in `decoding/`.

- `translator`: text in, text out, in one `tf.function`;
- `evaluate`: sacreBLEU BLEU and chrF;
- `decoding/`: search, greedy, beam search and the cached decode of a `Transformer`.

The exports, their runtimes and `open_translator` are `tf_transformer.backends`. Nothing here
imports the training side: a process that only translates or serves never loads the
optimizer, the loss or the training loop.
"""
