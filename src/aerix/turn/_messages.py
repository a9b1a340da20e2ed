"""What the loop writes back to the model: a turn's results, and the request to answer again."""

from __future__ import annotations

from collections.abc import Sequence

from ._schema import MAX_CALLS

__all__ = ["render_results", "render_retry"]


def render_results(results: Sequence[tuple[str, str, str]], dropped: int = 0) -> str:
    """The user message that carries a turn's results back.

    Args:
        results: `(call id, tool name, result text)` for each call, in order.
        dropped: How many calls of the turn were dropped (beyond `MAX_CALLS`).
    """
    lines = ["Results:"]
    for call_id, tool_name, text in results:
        lines.append(f"[{call_id} {tool_name}] {text}")
    if dropped:
        lines.append(f"({dropped} more call(s) were dropped: at most {MAX_CALLS} run per turn)")
    return "\n".join(lines)


def render_retry(reason: str, *, cut: bool, max_tokens: int, final_only: bool = False) -> str:
    """The user message that asks for a turn again (`final_only`: a turn that may only answer)."""
    if cut:
        shape = "a shorter final answer" if final_only else "at most one call"
        return (
            f"Your last turn was cut off at {max_tokens} tokens before its JSON closed. "
            f"Answer again with a shorter turn: one JSON object, {shape}, no thought."
        )
    return f"Your last turn was not valid: {reason}. Answer again with one JSON object."
