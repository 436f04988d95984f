"""Training with `model.fit`: the call (`model_fit`), its optimizer and its epoch backup."""
