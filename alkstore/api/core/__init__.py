"""The narrow handle every facade and service takes (``StoreCore``), and
what it is made of: the plan factories (``ops``), the telemetry seam as a
null object (``telemetry``), wake receivers (``wakes``).

Nothing here knows a facade (``Queue``, ``Stream``, ...) or the public
``Store``: those are built on it, above it.
"""
