"""Running a model fast: greedy decoding step by step, the layer-input cache, KV-cache head policies, the output
layer at the target positions alone, and Marian's vocabulary shortlist."""
