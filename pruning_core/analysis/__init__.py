"""What heads do and how that changes: attention maps, head roles, and training dynamics."""
