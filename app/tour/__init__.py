"""The Tour for a class: its steps as data and their Streamlit glue."""
