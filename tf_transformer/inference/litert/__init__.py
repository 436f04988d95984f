"""LiteRT: the export for devices and small servers (`export`: the encoder and a one-token
decoder step with its cache, float32 or int8), and its runtime (`runtime`, with the greedy and
beam searches of `search` in numpy): ai-edge-litert, numpy and regex, no TensorFlow."""
