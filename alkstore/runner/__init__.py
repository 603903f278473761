"""IO shared by the drivers: running plans on a database, the wake watcher.

Written once over the ``Runtime`` seam; ``io_trio`` and ``io_asyncio`` supply
only how to wait, spawn and cancel.
"""
