"""Running a model fast: greedy decoding step by step and checked against drafts, the layer-input cache, the
output layer at the target positions alone, and Marian's vocabulary shortlist."""
