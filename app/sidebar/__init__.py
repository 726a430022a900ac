"""The sidebar: the pickers that choose the session's model, task, scorer and size (with the SMP pruner's training
behind the scorer picker) and the server's warm-up. Imported only by the pages, the Tour and ``dashboard.py``."""
