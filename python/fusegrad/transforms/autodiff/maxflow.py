"""Max-flow / min-cut (Dinic) for the small graphs of the rematerialization partitioner."""
from __future__ import annotations

from collections import deque

INF = 1 << 62


class FlowGraph:
    """A directed graph with integer capacities; nodes are 0..n-1."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.adj: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[int] = []

    def add_edge(self, u: int, v: int, cap: int) -> None:
        self.adj[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(cap)
        self.adj[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0)

    def _levels(self, s: int, t: int) -> list[int] | None:
        level = [-1] * self.n
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.adj[u]:
                if self.cap[e] > 0 and level[self.to[e]] < 0:
                    level[self.to[e]] = level[u] + 1
                    queue.append(self.to[e])
        return level if level[t] >= 0 else None

    def _augment(self, s: int, t: int, level: list[int], it: list[int]) -> int:
        """One blocking-flow path by iterative DFS; 0 when none is left."""
        path: list[int] = []  # edge ids
        u = s
        while True:
            if u == t:
                f = min(self.cap[e] for e in path)
                for e in path:
                    self.cap[e] -= f
                    self.cap[e ^ 1] += f
                return f
            while it[u] < len(self.adj[u]):
                e = self.adj[u][it[u]]
                v = self.to[e]
                if self.cap[e] > 0 and level[v] == level[u] + 1:
                    break
                it[u] += 1
            else:
                if not path:
                    return 0
                level[u] = -1  # dead end
                e = path.pop()
                u = self.to[e ^ 1]
                it[u] += 1
                continue
            e = self.adj[u][it[u]]
            path.append(e)
            u = self.to[e]

    def min_cut(self, s: int, t: int) -> tuple[int, set[int]]:
        """(cut value, nodes on the source side) of the minimum s-t cut nearest the sink:
        of cuts of equal value, the one whose source side is largest."""
        flow = 0
        while (level := self._levels(s, t)) is not None:
            it = [0] * self.n
            while (f := self._augment(s, t, level, it)) > 0:
                flow += f
        # the nodes that still reach the sink in the residual graph are its side
        reach = {t}
        queue = deque([t])
        while queue:
            v = queue.popleft()
            for e in self.adj[v]:  # e: v -> u; its pair e ^ 1: u -> v
                u = self.to[e]
                if self.cap[e ^ 1] > 0 and u not in reach:
                    reach.add(u)
                    queue.append(u)
        return flow, set(range(self.n)) - reach
