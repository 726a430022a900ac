"""What the library reads and writes: every file write and manifest (storage), the dataclass JSON codec and
the registry of ``headprune.*`` formats (codec), a mask as a short URL-safe string (share_link)."""
