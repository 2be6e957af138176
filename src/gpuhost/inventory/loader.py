"""Load ``inventory/*.yml`` into an :class:`Inventory`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuhost import yamlfile
from gpuhost.errors import InventoryError
from gpuhost.inventory.models import (
    GroupSpec,
    InventoryFile,
    NodeSpec,
    ReplicaRef,
    ServeSpec,
    ServingSpec,
    metrics_listen,
)

_SERVE_PATH_FIELDS = ("api_key_file", "hf_token_file")
_PATH_FIELDS = {"ssh": ("key_file", "known_hosts_file", "password_file"), "api": ("token_secret_file", "ca_file")}


@dataclass(frozen=True)
class Inventory:
    path: Path
    nodes: dict[str, NodeSpec]
    groups: dict[str, GroupSpec]
    vars: dict[str, Any] = field(default_factory=dict)
    serving: ServingSpec = field(default_factory=ServingSpec)
    #: the parsed document, for line numbers of values (see :meth:`origin`)
    document: Any = field(default=None, compare=False, repr=False)

    def select(self, pattern: str) -> list[str]:
        """Node names matched by ``pattern``, a comma (or colon) list of:

        ``all``; a group; a node; a glob over node and group names (``pve*``, ``gpu-[12]``);
        ``!X`` to leave out what ``X`` names; ``@FILE`` for the names in a file, one a line
        (the retry list a failed run writes). With only exclusions, they are taken from ``all``.
        Unknown names raise :class:`InventoryError`. Order follows the inventory.
        """
        wanted: set[str] = set()
        unwanted: set[str] = set()
        positive = False
        parts = [p.strip() for p in pattern.replace(":", ",").split(",")]
        if not any(p.removeprefix("!").strip() for p in parts):  # '', ' ', ',': not "every node"
            raise InventoryError(
                f"the pattern {pattern!r} names no node or group; name them (pve1,pve2), a group, or 'all'",
                file=str(self.path),
            )
        for part in parts:
            if not part:
                continue
            negate = part.startswith("!")
            part = part.removeprefix("!").strip()
            names = self._names(part)
            if negate:
                unwanted |= names
            else:
                positive = True
                wanted |= names
        if not positive:
            wanted = set(self.nodes)
        return [n for n in self.nodes if n in wanted and n not in unwanted]

    def _names(self, part: str) -> set[str]:
        import fnmatch

        if part.startswith("@"):
            return self._names_from_file(Path(part[1:]))
        if part == "all" or part == "*":
            return set(self.nodes)
        if part in self.groups:
            return set(self.groups[part].nodes)
        if part in self.nodes:
            return {part}
        if any(c in part for c in "*?["):
            found = {n for n in self.nodes if fnmatch.fnmatchcase(n, part)}
            for g in self.groups:
                if fnmatch.fnmatchcase(g, part):
                    found |= set(self.groups[g].nodes)
            if found:
                return found
            raise InventoryError(f"'{part}' matches no node or group of this inventory", file=str(self.path))
        raise InventoryError(f"'{part}' is neither a node nor a group of this inventory", file=str(self.path))

    def _names_from_file(self, path: Path) -> set[str]:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InventoryError(f"--limit @{path}: cannot read: {exc.strerror or exc}") from None
        found: set[str] = set()
        for no, raw in enumerate(text.splitlines(), start=1):
            name = raw.split("#", 1)[0].strip()
            if not name:
                continue
            if name not in self.nodes:
                raise InventoryError(f"'{name}' is not a node of {self.path}", file=str(path), line=no)
            found.add(name)
        return found

    def vars_for(self, node: str) -> dict[str, Any]:
        """Inventory vars, then each group's (in inventory order), then the node's own."""
        merged: dict[str, Any] = dict(self.vars)
        spec = self.nodes[node]
        for gname, group in self.groups.items():
            if gname in spec.groups:
                merged.update(group.vars)
        merged.update(spec.vars)
        return merged

    def var_sources(self, node: str) -> list[tuple[dict[str, Any], list[str | int]]]:
        """The node's variable layers, lowest precedence first, each with its path in the document."""
        spec = self.nodes[node]
        layers: list[tuple[dict[str, Any], list[str | int]]] = [(dict(self.vars), ["vars"])]
        for gname, group in self.groups.items():
            if gname in spec.groups:
                layers.append((dict(group.vars), ["groups", gname, "vars"]))
        layers.append((dict(spec.vars), ["nodes", node, "vars"]))
        return layers


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    def fix(sub: Any, keys: Iterable[str]) -> None:
        if isinstance(sub, dict):
            for key in keys:
                value = sub.get(key)
                if isinstance(value, str) and not value.startswith(("/", "~")) and value != "none":
                    sub[key] = str(base / value)

    nodes = raw.get("nodes")
    for node in nodes.values() if isinstance(nodes, dict) else ():
        if not isinstance(node, dict):
            continue
        vms = node.get("vms")
        guests = [v for v in vms.values() if isinstance(v, dict)] if isinstance(vms, dict) else []
        for entry in [node, *guests]:  # a VM's ssh section (its guest) resolves like the node's
            for section, keys in _PATH_FIELDS.items():
                fix(entry.get(section), keys)
        containers = node.get("containers")
        for ct in containers.values() if isinstance(containers, dict) else ():
            fix(ct.get("serve") if isinstance(ct, dict) else None, _SERVE_PATH_FIELDS)
        ssh = node.get("ssh")
        if isinstance(ssh, dict):
            fix(ssh, ("config_file",))
            fix(ssh.get("jump"), ("key_file", "known_hosts_file"))
    serving = raw.get("serving")
    sgroups = serving.get("groups") if isinstance(serving, dict) else None
    for sgroup in sgroups.values() if isinstance(sgroups, dict) else ():
        fix(sgroup.get("gateway") if isinstance(sgroup, dict) else None, ("api_key_file",))
    groups = raw.get("groups")
    for group in groups.values() if isinstance(groups, dict) else ():
        ssh = group.get("ssh_defaults") if isinstance(group, dict) else None
        fix(ssh, (*_PATH_FIELDS["ssh"], "config_file"))
        if isinstance(ssh, dict):
            fix(ssh.get("jump"), ("key_file", "known_hosts_file"))


def _with_group_ssh(spec: NodeSpec, groups: Iterable[tuple[str, GroupSpec]]) -> NodeSpec:
    """Fields a node's ``ssh`` leaves unwritten come from its groups' ``ssh_defaults`` (first group wins)."""
    own = set(spec.ssh.model_fields_set)
    update: dict[str, Any] = {}
    for _, group in groups:
        if group.ssh_defaults is None or spec.name not in group.nodes:
            continue
        for key in group.ssh_defaults.model_fields_set - own - set(update):
            update[key] = getattr(group.ssh_defaults, key)
    if not update:
        return spec
    ssh = spec.ssh.model_copy(update=update)
    object.__setattr__(ssh, "__pydantic_fields_set__", own | set(update))
    return spec.model_copy(update={"ssh": ssh})


def load_inventory(path: str | Path) -> Inventory:
    """Parse and validate an inventory file; every error names the file, line and field."""
    path = Path(path)
    data = yamlfile.load(path, InventoryError)
    if not isinstance(data, dict):
        raise InventoryError("the inventory must be a mapping with a 'nodes' key", file=str(path), line=1)
    raw = yamlfile.plain(data)
    _resolve_paths(raw, path.resolve().parent)
    try:
        doc = InventoryFile.model_validate(raw)
    except ValidationError as exc:
        yamlfile.raise_validation(exc, data, path, InventoryError)
        raise  # unreachable
    for gname, group in doc.groups.items():
        for i, member in enumerate(group.nodes):
            if member not in doc.nodes:
                raise InventoryError(
                    f"unknown node '{member}'",
                    file=str(path),
                    line=yamlfile.line_of(data, ["groups", gname, "nodes", i]),
                    field=f"groups.{gname}.nodes",
                )
    _check_serving(doc, data, path)
    nodes = {
        name: _with_group_ssh(
            spec.model_copy(update={"name": name, "groups": _groups_of(name, doc.groups.items())}), doc.groups.items()
        )
        for name, spec in doc.nodes.items()
    }
    return Inventory(
        path=path, nodes=nodes, groups=dict(doc.groups), vars=dict(doc.vars), document=data, serving=doc.serving
    )


_UNREACHABLE = ("0.0.0.0", "::", "127.0.0.1", "localhost", "::1")


def _check_gateway_ports(doc: InventoryFile, data: Any, path: Path) -> None:
    """The gateways on one node listen on distinct ports, their Prometheus endpoints included (smg always serves
    one, see :func:`metrics_listen`; a second bind on a port fails the gateway's start)."""
    taken: dict[tuple[str, int], str] = {}
    for gname, group in doc.serving.groups.items():
        g = group.gateway
        if g is None:
            continue
        node = doc.nodes.get(g.node)
        host = g.host or (node.address if node is not None else "")
        _, mport = metrics_listen(host, g.port, g.prometheus_port)
        for port, what, key in ((g.port, "port", "port"), (mport, "Prometheus port", "prometheus_port")):
            other = taken.get((g.node, port))
            if other is not None:
                raise InventoryError(
                    f"the gateway's {what} {port} on {g.node} is also {other}: smg binds both its port and its "
                    "Prometheus port, so one of the two gateways would fail to start",
                    file=str(path),
                    line=yamlfile.line_of(data, ["serving", "groups", gname, "gateway", key])
                    or yamlfile.line_of(data, ["serving", "groups", gname, "gateway"]),
                    field=f"serving.groups.{gname}.gateway.{key}",
                )
            taken[(g.node, port)] = f"serving group {gname}'s gateway {what}"


def _check_serving(doc: InventoryFile, data: Any, path: Path) -> None:
    """Every replica names nodes' containers with a serve: entry, once; a multi-node replica's members serve one
    profile and are in no other replica; rank 0 and the replicas are at addresses the others can reach."""
    in_multinode: dict[tuple[str, int], str] = {}
    for gname, group in doc.serving.groups.items():
        for i, rep in enumerate(group.replicas):
            for r, m in enumerate(rep.members or []):
                in_multinode.setdefault((m.node, m.ctid), f"serving.groups.{gname}.replicas.{i} (rank {r})")
    _check_gateway_ports(doc, data, path)
    for gname, group in doc.serving.groups.items():
        base: list[str | int] = ["serving", "groups", gname]

        def fail(msg: str, loc: list[str | int], fld: str, base: list[str | int] = base) -> None:
            raise InventoryError(msg, file=str(path), line=yamlfile.line_of(data, [*base, *loc]), field=fld)

        gateway = group.gateway
        if gateway is not None and gateway.node not in doc.nodes:
            fail(f"unknown node '{gateway.node}'", ["gateway", "node"], f"serving.groups.{gname}.gateway.node")
        seen: set[tuple[str, int]] = set()
        first_key: tuple[str | None, str | None] = (None, None)
        for i, rep in enumerate(group.replicas):
            fld = f"serving.groups.{gname}.replicas.{i}"
            serves: list[ServeSpec] = []
            for r, m in enumerate(rep.ranks):
                loc: list[str | int] = ["replicas", i, "members", r] if rep.multinode else ["replicas", i]
                mfld = f"{fld}.members.{r}" if rep.multinode else fld
                node = doc.nodes.get(m.node)
                if node is None:
                    fail(f"unknown node '{m.node}'", [*loc, "node"], f"{mfld}.node")
                    return
                ct = node.containers.get(m.ctid)
                if ct is None or ct.serve is None:
                    what = "no container" if ct is None else "a container without a serve: entry"
                    fail(f"node {m.node} has {what} {m.ctid}", [*loc, "ctid"], f"{mfld}.ctid")
                    return
                if (m.node, m.ctid) in seen:
                    fail(f"CT {m.ctid} on {m.node} is listed twice", loc, mfld)
                seen.add((m.node, m.ctid))
                other = in_multinode.get((m.node, m.ctid))
                if other is not None and other.rsplit(" (rank", 1)[0] != fld:
                    fail(f"CT {m.ctid} on {m.node} is a member of the multi-node replica {other}", loc, mfld)
                if r and ct.serve.profile != serves[0].profile:
                    fail(
                        f"CT {m.ctid} on {m.node} serves profile {ct.serve.profile}, rank 0 serves "
                        f"{serves[0].profile}: the members of a multi-node replica run one profile",
                        [*loc, "ctid"],
                        f"{mfld}.ctid",
                    )
                serves.append(ct.serve)
            rank0, lead = rep.ranks[0], serves[0]
            if rep.multinode and rep.dist_init_host is None and (lead.host is None or lead.host in _UNREACHABLE):
                fail(
                    f"the other members cannot reach rank 0 (CT {rank0.ctid} on {rank0.node}) at serve.host "
                    f"{lead.host or '(the profile default)'}: give the replica dist_init_host: (the address they "
                    "reach rank 0 at) or serve.host an address other hosts reach",
                    ["replicas", i],
                    fld,
                )
            if gateway is None:
                continue
            # smg sends its one --api-key as the Bearer of every proxied request to every replica (observed with
            # smg 1.13.0 on loopback): a replica with another key answers 401 while its open /health looks fine
            key = (lead.api_key_env, lead.api_key_file)
            own = (gateway.api_key_env, gateway.api_key_file)
            if i == 0:
                first_key = key
            elif key != first_key:
                fail(
                    f"CT {rank0.ctid} on {rank0.node} has another API key source than the group's first replica: "
                    "the gateway sends one key to every replica, so the replicas need one key",
                    ["replicas", i],
                    fld,
                )
            if any(own) and any(key) and own != key:
                fail(
                    f"the gateway's api_key_* differs from the key of CT {rank0.ctid} on {rank0.node}: smg sends its "
                    "own key to every replica, so each proxied request would get 401; leave the gateway's "
                    "api_key_* out (it uses the replicas') or give it the replicas' key source",
                    ["gateway"],
                    f"serving.groups.{gname}.gateway",
                )
            if rep.url is None and (lead.host is None or lead.host in _UNREACHABLE):
                fail(
                    f"the gateway cannot reach CT {rank0.ctid} on {rank0.node} at serve.host "
                    f"{lead.host or '(the profile default)'}: give the replica a url: or serve.host an "
                    "address other hosts reach",
                    ["replicas", i],
                    fld,
                )


def _serve_of(inventory: Inventory, node: str, ctid: int) -> ServeSpec:
    serve = inventory.nodes[node].containers[ctid].serve
    assert serve is not None  # validated at load
    return serve


def replica_url(inventory: Inventory, rep: ReplicaRef) -> str:
    """The URL the gateway reaches a replica at (rank 0's for a multi-node replica; validated at load: an address
    other hosts reach)."""
    if rep.url:
        return rep.url
    lead = rep.ranks[0]
    serve = _serve_of(inventory, lead.node, lead.ctid)
    assert serve.host is not None
    host = f"[{serve.host}]" if ":" in serve.host else serve.host
    return f"http://{host}:{serve.port or 30000}"


def _replica(inventory: Inventory, rep: ReplicaRef) -> dict[str, Any]:
    lead = rep.ranks[0]
    serve = _serve_of(inventory, lead.node, lead.ctid)
    out: dict[str, Any] = {
        "node": lead.node,
        "ctid": lead.ctid,
        "url": replica_url(inventory, rep),
        "profile": serve.profile,
        "model": serve.model,
        "api_key_env": serve.api_key_env,
        "api_key_file": serve.api_key_file,
        "members": [],
        "dist_init_host": None,
    }
    if rep.multinode:
        out["members"] = [
            {"node": m.node, "ctid": m.ctid, "serve": _serve_of(inventory, m.node, m.ctid).model_dump()}
            for m in rep.ranks
        ]
        out["dist_init_host"] = rep.dist_init_host or serve.host
    return out


def members_of(inventory: Inventory, node: str, ctid: int) -> list[tuple[str, int]]:
    """The members of the multi-node replica the container belongs to, in rank order ([]: it belongs to none)."""
    for group in inventory.serving.groups.values():
        for rep in group.replicas:
            ranks = [(m.node, m.ctid) for m in rep.members or []]
            if (node, ctid) in ranks:
                return ranks
    return []


def followers(inventory: Inventory) -> set[tuple[str, int]]:
    """Every container that is a follower (rank >= 1) of a multi-node replica: it serves no API of its own."""
    return {
        (m.node, m.ctid)
        for group in inventory.serving.groups.values()
        for rep in group.replicas
        for m in (rep.members or [])[1:]
    }


def serving_vars(inventory: Inventory) -> dict[str, Any]:
    """The serving groups as every node's ``serving`` variable: replicas with their URLs (rank 0's for a multi-node
    replica, with its members in rank order), the gateway's address (None: no gateway)."""
    out: dict[str, Any] = {}
    for gname, group in inventory.serving.groups.items():
        gw: dict[str, Any] | None = None
        if group.gateway is not None:
            gw = group.gateway.model_dump()
            gw["host"] = gw["host"] or inventory.nodes[group.gateway.node].address
        out[gname] = {
            "replicas": [_replica(inventory, r) for r in group.replicas],
            "gateway": gw,
        }
    return out


def _groups_of(node: str, groups: Iterable[tuple[str, GroupSpec]]) -> tuple[str, ...]:
    return tuple(g for g, spec in groups if node in spec.nodes)
