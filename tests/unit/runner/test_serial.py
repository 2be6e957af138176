"""``serial``: a play's hosts in batches."""

from gpuhost.runner.serial import batches


def test_batches():
    assert batches(["a", "b", "c"], 1) == [["a"], ["b"], ["c"]]
    assert batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]
    assert batches(["a", "b", "c"], None) == [["a", "b", "c"]]
    assert batches([], 1) == []
