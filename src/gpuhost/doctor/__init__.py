"""``gpuhost doctor -i INV``: the whole stack read live (host, guests, P2P, serving, the last bench), judged by the
shared checks, and ranked into one list of causes with their fixes."""
