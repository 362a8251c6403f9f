"""A picture before it becomes Graphviz: nodes with stable ids, edges and nested clusters.

Every drawer builds a :class:`Picture` rather than a ``graphviz.Digraph`` directly, so two
pictures of the same kind can be compared id by id (:func:`diff_pictures`) before rendering.
Ids are made from names in the IR (variable, loop, block and function names), numbered in order
of appearance when a name repeats, so the same program drawn twice gets the same ids, and two
steps of a pipeline share the ids of everything that kept its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlckit.ir.name_supply import sanitize

from . import style
from .embed import Digraph


@dataclass
class PNode:
    label: str
    attrs: dict[str, str] = field(default_factory=dict)
    cluster: str | None = None


@dataclass
class PCluster:
    label: str
    attrs: dict[str, str] = field(default_factory=dict)
    parent: str | None = None


@dataclass
class Picture:
    """Nodes (by id, in insertion order), edges ``(tail, head, attrs)`` and clusters."""

    graph_attrs: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, PNode] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    clusters: dict[str, PCluster] = field(default_factory=dict)
    _used: dict[str, int] = field(default_factory=dict, repr=False)

    def new_id(self, prefix: str, name: str) -> str:
        """A fresh id ``prefix_name`` (with only characters Graphviz never misreads), numbered
        ``_2``, ``_3``, ... when the same name comes again."""
        base = sanitize(f"{prefix}_{name}")
        count = self._used.get(base, 0) + 1
        self._used[base] = count
        return base if count == 1 else f"{base}_{count}"

    def node(self, node_id: str, label: str, cluster: str | None = None, **attrs: Any) -> str:
        self.nodes[node_id] = PNode(label, _strs(attrs), cluster)
        return node_id

    def edge(self, tail: str, head: str, **attrs: Any) -> None:
        self.edges.append((tail, head, _strs(attrs)))

    def cluster(self, cluster_id: str, label: str, parent: str | None = None, **attrs: Any) -> str:
        # Graphviz draws a subgraph as a box only when its name starts with "cluster".
        cluster_id = "cluster_" + cluster_id
        self.clusters[cluster_id] = PCluster(label, _strs(attrs), parent)
        return cluster_id

    # ------------------------------------------------------------------ rendering
    def to_digraph(self, name: str = "mlckit") -> Any:
        graph = Digraph(
            name,
            graph_attr={"fontname": style.FONT, "fontsize": "12", **self.graph_attrs},
            node_attr={"fontname": style.FONT, "fontsize": "12", "color": style.INK},
            edge_attr={"fontname": style.FONT, "fontsize": "10", "color": "#555555"},
        )
        members: dict[str | None, list[str]] = {}
        for node_id, node in self.nodes.items():
            members.setdefault(node.cluster, []).append(node_id)
        children: dict[str | None, list[str]] = {}
        for cluster_id, cluster in self.clusters.items():
            children.setdefault(cluster.parent, []).append(cluster_id)

        def fill(target: Any, cluster_id: str | None) -> None:
            for node_id in members.get(cluster_id, []):
                node = self.nodes[node_id]
                target.node(node_id, node.label, **node.attrs)
            for child in children.get(cluster_id, []):
                cluster = self.clusters[child]
                with target.subgraph(name=child) as sub:
                    # A legend right-justifies the graph's label; clusters keep theirs centred.
                    sub.attr(**{"label": cluster.label, "labeljust": "c", **cluster.attrs})
                    fill(sub, child)

        fill(graph, None)
        for tail, head, attrs in self.edges:
            graph.edge(tail, head, **attrs)
        return graph


def _strs(attrs: dict[str, Any]) -> dict[str, str]:
    return {key: str(value) for key, value in attrs.items() if value is not None}


def diff_pictures(before: Picture, after: Picture) -> Picture:
    """``after``, with what is new in it outlined and what ``before`` had and it lost greyed.

    A node is new when its id is new or its label changed; an edge is gone when ``before``
    joined two ids that ``after`` does not join.
    """
    merged = Picture(dict(after.graph_attrs), clusters=dict(after.clusters))
    for node_id, node in after.nodes.items():
        old = before.nodes.get(node_id)
        attrs = dict(node.attrs)
        if old is None or old.label != node.label:
            attrs.update(color=style.NEW_OUTLINE, penwidth="3")
        merged.nodes[node_id] = PNode(node.label, attrs, node.cluster)
    for node_id, node in before.nodes.items():
        if node_id not in after.nodes:
            _keep_cluster(merged, before, node.cluster)
            merged.nodes[node_id] = PNode(node.label, _faded(node.attrs), node.cluster)
    merged.edges = list(after.edges)
    joined = {(tail, head) for tail, head, _ in after.edges}
    for tail, head, attrs in before.edges:
        if (tail, head) not in joined:
            merged.edges.append((tail, head, {**attrs, **_GONE_EDGE}))
    return merged


_GONE_EDGE = {"color": style.GONE_LINE, "fontcolor": style.GONE_TEXT, "style": "dashed"}


def _faded(attrs: dict[str, str]) -> dict[str, str]:
    styles = [
        s for s in attrs.get("style", "").split(",") if s and s not in ("bold", "dashed", "filled")
    ]
    return {
        **attrs,
        "style": ",".join([*styles, "filled", "dashed"]),
        "fillcolor": style.GONE_FILL,
        "color": style.GONE_LINE,
        "fontcolor": style.GONE_TEXT,
        "penwidth": "1",
    }


def _keep_cluster(merged: Picture, before: Picture, cluster_id: str | None) -> None:
    """Copy a cluster that only ``before`` had (and its parents), faded, into ``merged``."""
    while cluster_id is not None and cluster_id not in merged.clusters:
        cluster = before.clusters[cluster_id]
        merged.clusters[cluster_id] = PCluster(
            cluster.label,
            {**cluster.attrs, "color": style.GONE_LINE, "fontcolor": style.GONE_TEXT},
            cluster.parent,
        )
        cluster_id = cluster.parent
