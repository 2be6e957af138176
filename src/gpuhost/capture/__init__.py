"""``gpuhost capture``: one read-only bundle of what makes a Proxmox VE node what it is (docs/capture.md)."""
