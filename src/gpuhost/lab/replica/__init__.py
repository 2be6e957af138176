"""A lab node built from a ``gpuhost capture`` bundle (``gpuhost lab up --from-capture``)."""
