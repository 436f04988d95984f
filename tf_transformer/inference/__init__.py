"""From ids to text: the Translator, one front door for opening a translator, evaluation; the
decoding strategies in `decoding/`, the export for TF Serving and its clients in `serving/`.

- `translator`: text in, text out, in one `tf.function`;
- `load`: `open_translator(source)` for a run, an exported SavedModel or a server;
- `evaluate`: sacreBLEU BLEU and chrF;
- `decoding/`: search, greedy, beam search and the cached decode of a `Transformer`;
- `serving/`: the SavedModel export, its warm-up and versions, the REST and gRPC clients, the
  CTranslate2 export;
- `litert/`: the LiteRT export, and its runtime without TensorFlow.

Nothing here imports the training side: a process that only translates or serves never loads
the optimizer, the loss or the training loop.
"""
