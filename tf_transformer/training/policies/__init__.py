"""The training policies, written once for the custom loop and `model.fit` (Keras callbacks).

- `progress`: where the run stands (`Progress`) and the `Policy` base;
- `standard`: the policies every call has: stop rules, cool-down, checkpoints, the non-finite
  loss check.
- `budget`: the limits (steps, minutes, epochs); `stop_signal`: SIGINT/SIGTERM as a flag.
- `validate_every`: dev BLEU every N steps; `average_last`: the averaged checkpoint at the end.
- `assembly`: `TrainingPolicies`, the policies of one call, in their order.
"""
