"""IRDL text for the dg dialect, generated from the op table."""
from __future__ import annotations

from .core import OPS, OpDef


def _operation(op: OpDef) -> list[str]:
    lines = [f"  irdl.operation @{op.name} {{"]
    def values(names, prefix):
        parts = []
        for i, name in enumerate(names):
            # one constraint value per operand: a shared one would force equal types
            lines.append(f'    %{prefix}{i} = irdl.base "!builtin.tensor"')
            variadic = name.startswith("*")
            parts.append(f"{name.lstrip('*')}: {'variadic ' if variadic else ''}%{prefix}{i}")
        return ", ".join(parts)
    operands = values(op.operands, "in")
    results = values(op.results, "out")
    lines.append(f"    irdl.operands({operands})")
    lines.append(f"    irdl.results({results})")
    if op.attrs:
        entries = []
        for i, (name, kind) in enumerate(op.attrs.items()):
            lines.append(f'    %attr{i} = irdl.base "{kind.irdl_base}"')
            entries.append(f'"{name}" = %attr{i}')
        lines.append("    irdl.attributes {" + ", ".join(entries) + "}")
    lines.append("  }")
    return lines


def dialect_irdl() -> str:
    """The whole dg dialect as an `irdl.dialect` module (what `--dump-dialect` prints)."""
    lines = ["irdl.dialect @dg {"]
    for op in OPS.values():
        lines.extend(_operation(op))
    lines.append("}")
    return "\n".join(lines) + "\n"
