"""What one training step computes: the compiled train and eval steps, the masked losses, the
learning-rate schedule, and the model built under the run's mixed-precision policy."""
