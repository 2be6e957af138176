"""Operating a replica over several nodes: stop and restart take it whole, rank 0 first; its followers serve no API
of their own, so the serve proofs leave them out."""

from pathlib import Path

from gpuhost.inventory.loader import followers, load_inventory, members_of
from gpuhost.serve.service import ServeTarget, label, targets, whole_replicas
from tests.unit.inventory.test_serving import MULTI


def test_a_follower_or_rank_0_selected_takes_the_whole_replica_rank_0_first(tmp_path: Path) -> None:
    path = tmp_path / "inv.yml"
    path.write_text(MULTI)
    inv = load_inventory(path)
    assert members_of(inv, "pve2", 200) == [("pve1", 200), ("pve2", 200)] and members_of(inv, "pve2", 201) == []
    assert followers(inv) == {("pve2", 200)}
    only_pve2 = targets(inv, limit="pve2")
    assert only_pve2 == [ServeTarget("pve2", 200), ServeTarget("pve2", 201)]
    assert whole_replicas(inv, only_pve2) == [
        ServeTarget("pve1", 200),
        ServeTarget("pve2", 200),
        ServeTarget("pve2", 201),
    ]
    assert [label(inv, t) for t in whole_replicas(inv, targets(inv))] == [
        "pve1/CT 200 (rank 0 of 2)",
        "pve2/CT 200 (rank 1 of 2)",
        "pve2/CT 201",
    ]
