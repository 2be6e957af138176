"""Command-line tools of a lab node (one module per PVE command)."""
