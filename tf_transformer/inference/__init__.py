"""From ids to text: decoding strategies, the Translator, evaluation, export and serving.

Nothing here imports the training side: a process that only translates or serves never loads
the optimizer, the loss or the training loop.
"""
