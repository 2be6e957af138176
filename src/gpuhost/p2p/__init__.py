"""Controller side of ``gpuhost verify p2p``: ship and run the probe, read its report
(or a captured tool output), judge it, and render the verdict."""
