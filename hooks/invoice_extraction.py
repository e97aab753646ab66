"""Hybrid: a deterministic pre-filter, then the model extracts fields from what passes."""

import json
import re
from typing import Any

from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing

HOOK = HookMeta(
    name="invoice-extraction",
    description="invoices: the model reads out vendor, amount and due date",
    timeout_s=15.0,
)
# Both must hold before the model is asked: a word that names a bill, and an amount.
BILL = re.compile(r"\b(invoice|bill|amount due|payment due)\b", re.IGNORECASE)
AMOUNT = re.compile(r"[$€£]\s?\d|\b\d[\d,.]*\s?(usd|eur|gbp)\b", re.IGNORECASE)
FIELDS = ("vendor", "amount", "currency", "due_date")
PROMPT = (
    "Read this message. If it is an invoice or a bill, answer with one JSON object with "
    'the keys "vendor", "amount" (a number), "currency" and "due_date" (YYYY-MM-DD), null '
    "for what it does not say. If it is not, answer null.\n\n"
)


def evaluate(ctx: HookContext) -> HookResult:
    text = ctx.event.text or ""
    if ctx.event.direction != "inbound" or not BILL.search(text) or not AMOUNT.search(text):
        return HookResult()  # the pre-filter: most messages never reach the model
    fields = _fields(ctx.llm(PROMPT + text))
    if fields is None:
        return HookResult()  # the model says it is no invoice
    return HookResult(
        fire=True,
        routing=Routing(kind="session", target="finance"),
        prompt=f"File this invoice ({json.dumps(fields)}): {text}",
        extracted=fields,
    )


def _fields(answer: str) -> dict[str, Any] | None:
    """The known fields of the JSON object in the model's answer (it may wrap it in prose
    or a code fence); None when there is none."""
    found = re.search(r"\{.*\}", answer, re.DOTALL)
    if found is None:
        return None
    try:
        parsed = json.loads(found.group(0))
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    return {key: parsed.get(key) for key in FIELDS}
