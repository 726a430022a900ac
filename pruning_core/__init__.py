"""headprune's core library: find which attention heads a task needs, and remove the rest.

Pure Python on PyTorch and transformers 5.x; never imports Streamlit or plotting.
"""
__version__ = "0.1.0"
