"""The dashboard's app layer, between the page scripts (``app_pages/``) and ``pruning_core``, one folder per
feature (``core``, ``jobs``, ``headmap``, ``curves``, ...); docs/DESIGN.md draws the map.

Dependencies point one way: ``app_pages -> app -> pruning_core``. Nothing here scores, masks or
prunes by itself; it calls pruning_core and caches the results.
"""
