"""Preflight: every check a batch must pass before it is priced, collected, not first-fail.

Streaming: feed items one at a time (`add_item`) and unparseable file lines as they are
met (`add_line_error`); memory is one ModelGroup per model plus what checks
`customer_item_id` uniqueness: the ids seen (a dict, ~130 B an item), or with
`compact_ids=True` only their hashes (domain/batches/item_ids.py, 8 B an item), for a source the
caller can read a second time when `ids_may_repeat()`. Then route `groups`, hand the plan
back (`add_route_plan`, which turns groups no lane can take into `routing` errors) and read
`result()`.

Categories and codes are listed in docs/routing.md. Issue paths: `items[<i>].<field>` with
`i` the 0-based index of the item in the batch (for a file: among its parsed lines), plus
`line` (1-based, as an editor shows it) when the item came from a file; `line <n>` for a
line that did not parse; `webhook.url` / `webhook.secret`; `required_tools` for the
request-level list. Only errors fail the batch (400 `batch_preflight_failed`); at most
MAX_LISTED_ISSUES errors and as many warnings are listed, the rest summed up in one
`issues_truncated` warning, so a bad 50,000-line file does not produce a 50,000-issue body.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, NotRequired, TypedDict, get_args

from batchroute.domain.batches.item_ids import IdHashes
from batchroute.domain.batches.item_profile import ItemProfile
from batchroute.domain.batches.line_shifts import LineShifts
from batchroute.domain.catalog.catalog import Catalog, Lane
from batchroute.domain.delivery.webhook_targets import webhook_target_problems
from batchroute.domain.routing.engine import RoutePlan
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards
from batchroute.domain.routing.items import ItemFacts, ModelGroup, read_item
from batchroute.errors import InvalidRequest

Category = Literal[
    "jsonl_shape", "file_type", "context_window", "tool_support", "json_schema", "webhook", "routing"
]
CATEGORIES: Final[tuple[str, ...]] = get_args(Category)
MAX_LISTED_ISSUES: Final = 100
_CATALOG_HINT: Final = "GET /v1/catalog/models"

ACTIONS: Final[dict[str, str]] = {
    "missing_field": "Add the field: every item needs customer_item_id, operation, model and input.",
    "invalid_field": "Fix the field's type or value as the message says.",
    "unsupported_parameter": (
        "Remove the parameter (or send the value the message names): not every lane's vendor can "
        "honour it, and it is never dropped silently (docs/routing.md, Item input)."
    ),
    "duplicate_customer_item_id": "Give every item its own customer_item_id.",
    "malformed_line": "Make every line of the file one JSON object in UTF-8.",
    "empty_batch": "Send at least one item.",
    "unknown_model": f"Use an exact model id from {_CATALOG_HINT}.",
    "operation_not_supported": f"Use an operation the model's lanes run ({_CATALOG_HINT}), or another model.",
    "preflight_context_window_exceeded": (
        "Shorten the input or lower max_output_tokens, or use a model with a larger context window."
    ),
    "context_window_lanes_excluded": (
        "No action needed; lower the input size or max_output_tokens to keep those lanes eligible."
    ),
    "tool_not_supported": (
        f"Drop the tool, or use a model whose lanes offer it ({_CATALOG_HINT}?hosted_tool=)."
    ),
    "capability_not_supported": (
        f"Drop the feature, or use a model whose lanes offer it ({_CATALOG_HINT}?runtime_capability=)."
    ),
    "json_schema_invalid": "Send a JSON Schema object (response_format.json_schema.schema).",
    "json_schema_unsupported": (
        "Use a model whose lanes support structured outputs (runtime_capability json_schema), "
        "or drop response_format's schema and the functions' strict."
    ),
    "https_required": "Use an https:// webhook URL.",
    "unsafe_url": "Use a public host: private, loopback, link-local and metadata addresses are refused.",
    "invalid_url": "Send a well-formed https URL.",
    "unresolvable_host": "Use a host name that resolves in public DNS.",
    "invalid_webhook_secret": "Send a webhook secret of 8-256 characters.",
    "no_eligible_lane": (
        "Relax the routing constraints (routing_mode, privacy_tier, region, max_price, "
        "required_tools) or use another model; each lane's rejection is in details."
    ),
    "issues_truncated": "Fix the listed issues and run preflight again to see the rest.",
}
_CAPABILITY_NAMES: Final = {
    "tool_calling": "tool calling (function tools, or tool calls and answers in the conversation)",
    "vision": "image input",
    "any_image_type": "images of any type by any URL (any_image_type: an image URL that tells no "
    "type, or a GIF; give a .png, .jpg, .webp, .heic or .heif URL or a data: URL of one)",
    "embedding_dimensions": "dimensions (embedding_dimensions: leave dimensions out for this model)",
    "functions_with_hosted_tools": "function tools beside hosted tools in one request "
    "(functions_with_hosted_tools: Gemini 2.x and 1.5 refuse the mix; send them apart or use another model)",
    "tools_with_json_output": "tools beside a JSON answer format (tools_with_json_output: Gemini 2.x and "
    "1.5 answer JSON or call tools, not both; drop one, or use another model)",
    "whitespace_stop": "a stop sequence of whitespace alone (whitespace_stop: Anthropic's models refuse "
    'one such as "\\n"; give each stop some visible text, or use another model)',
    "seed": "a seed (seed: Anthropic's models take none; leave it out, or use another model)",
    "penalties": "a frequency or presence penalty (penalties: offered on OpenAI's and some open-weight "
    "hosts' lanes only; leave it out or at 0, or use another model)",
    "serial_tool_calls": "parallel_tool_calls false (serial_tool_calls: offered on OpenAI's, Anthropic's "
    "and Groq's lanes only; leave it out or true, or use another model)",
    "message_names": "a message's name (message_names: offered on OpenAI's lanes only; "
    "leave it out, or use another model)",
}


class IssueView(TypedDict):
    """One issue as `error.details.preflight.errors[]` (and a quote's warnings) show it."""

    category: str
    code: str
    message: str
    action: str
    path: NotRequired[str]
    line: NotRequired[int]
    details: NotRequired[Mapping[str, Any]]  # the check's figures: lanes, limits, counts


class PreflightView(TypedDict):
    ok: bool
    errors: list[IssueView]
    warnings: list[IssueView]


@dataclass(frozen=True)
class Issue:
    category: str
    code: str
    message: str
    action: str
    path: str | None = None
    line: int | None = None  # items from a file: the 1-based line
    details: Mapping[str, Any] | None = None

    def to_api(self) -> IssueView:
        shown: IssueView = {
            "category": self.category,
            "code": self.code,
            "message": self.message,
            "action": self.action,
        }
        if self.path is not None:
            shown["path"] = self.path
        if self.line is not None:
            shown["line"] = self.line
        if self.details is not None:
            shown["details"] = self.details
        return shown

    @classmethod
    def from_api(cls, shown: IssueView) -> Issue:
        """An issue built elsewhere in the same shape, e.g. domain.files.file_type_issue."""
        return cls(
            category=str(shown["category"]),
            code=str(shown["code"]),
            message=str(shown["message"]),
            action=str(shown.get("action") or ACTIONS.get(str(shown["code"]), "")),
            path=shown.get("path"),
            line=shown.get("line"),
            details=shown.get("details"),
        )


@dataclass(frozen=True)
class PreflightResult:
    errors: tuple[Issue, ...]  # the listed ones
    warnings: tuple[Issue, ...]
    error_count: int  # all of them, listed or not
    warning_count: int

    @property
    def ok(self) -> bool:
        return self.error_count == 0

    def to_api(self) -> PreflightView:
        """`error.details.preflight` of a 400 `batch_preflight_failed` (and a quote's warnings)."""
        return {
            "ok": self.ok,
            "errors": [issue.to_api() for issue in self.errors],
            "warnings": [issue.to_api() for issue in self.warnings],
        }

    def raise_if_failed(self) -> None:
        if not self.ok:
            view = self.to_api()
            raise PreflightFailed(
                f"Preflight found {self.error_count} problem(s) with the batch.",
                view["errors"],
                warnings=view["warnings"],
            )


class PreflightFailed(InvalidRequest, code="batch_preflight_failed"):
    """400 `batch_preflight_failed`: `details.preflight` lists the issues (`details` may say
    more beside it, e.g. a workflow quote's `models_considered`)."""

    def __init__(
        self,
        message: str,
        errors: Sequence[IssueView],
        *,
        warnings: Sequence[IssueView] = (),
        **details: object,
    ) -> None:
        preflight: PreflightView = {"ok": False, "errors": list(errors), "warnings": list(warnings)}
        super().__init__(message, details={"preflight": preflight, **details})


@dataclass(frozen=True)
class _ModelLanes:
    """A model's lanes that the service guards let route (enabled, launched, allowlisted)."""

    lanes: tuple[Lane, ...]
    operations: frozenset[str]
    # (context_window, max_output_tokens, max_embedding_request_tokens) per lane
    fits: tuple[tuple[int, int, int | None], ...]
    largest_window: int
    max_dimensions: int = 0  # an embedding model's vector size (models.toml); 0: not known

    def admits(self, prompt: int, wanted: int, summed: int = 0) -> bool:
        """An item of this size fits some lane (as `_lanes_ok` checks it): its prompt (for
        embeddings, its largest input) + capped output in the lane's context window, and an
        embeddings item's inputs, `summed`, within the lane's per-request limit, if any."""
        return any(
            prompt + min(wanted, cap) <= window and (limit is None or summed <= limit)
            for window, cap, limit in self.fits
        )


class Preflight:
    def __init__(
        self,
        catalog: Catalog,
        *,
        request: RouteRequest | None = None,
        guards: RoutingGuards | None = None,
        max_listed: int = MAX_LISTED_ISSUES,
        compact_ids: bool = False,
    ) -> None:
        self.catalog = catalog
        self.request = request or RouteRequest()
        self.guards = guards or RoutingGuards()
        self.max_listed = max_listed
        self.item_count = 0
        self._line_errors = 0
        self._models: dict[str, _ModelLanes | None] = {}
        self._lower_ids = {model.id.lower(): model.id for model in catalog.models}
        self._groups: dict[str, ModelGroup] = {}
        self._ids: dict[str, int] = {}
        self._id_hashes = IdHashes() if compact_ids else None
        self._errors: list[Issue] = []
        self._warnings: list[Issue] = []
        self._counts: Counter[tuple[bool, str, str]] = Counter()  # (is_error, category, code)
        self._failed_models: set[str] = set()
        self._finished = False
        # Items from a file: where each stands in it, so an issue a group check finds at
        # `items[i]` names its line too
        self._lines = LineShifts()

    @classmethod
    def from_profile(
        cls,
        profile: ItemProfile,
        catalog: Catalog,
        *,
        request: RouteRequest | None = None,
        guards: RoutingGuards | None = None,
    ) -> Preflight | None:
        """The preflight a checked file's items would give, built from its item profile
        (domain/batches/item_profile.py) without reading them; None when the profile cannot stand in
        for them: not usable, or some item would fail a lane check here (unknown model,
        operation not run, no context window fits a frontier point, within a lane's request
        limit for the largest embeddings item's inputs summed). The caller then streams
        the file, which reports each failing item with its line."""
        if not profile.usable or profile.item_count <= 0:
            return None
        preflight = cls(catalog, request=request, guards=guards)
        for model in profile.models:
            lanes = preflight._model_lanes(model.model)
            if lanes is None:
                return None
            if lanes.lanes and not (
                model.operations <= lanes.operations
                and all(
                    lanes.admits(prompt, wanted, model.max_embedding_prompt_tokens)
                    for prompt, wanted in model.frontier
                )
                and not 0 < lanes.max_dimensions < model.largest_dimensions
            ):
                return None
            preflight._groups[model.model] = model.group()
        preflight.item_count = profile.item_count
        preflight._lines = profile.lines
        return preflight

    # -- feeding -------------------------------------------------------------------------

    def add_item(self, index: int, item: object, *, line: int | None = None) -> ItemFacts | None:
        """Check one item; its facts, or None when it has a shape problem."""
        if self._finished:
            raise RuntimeError("preflight already finished: add every item before routing")
        self.item_count += 1
        if line is not None:
            self._lines.note(index, line)
        where = f"items[{index}]"
        facts, problems = read_item(item)
        for problem in problems:
            path = f"{where}.{problem.field}" if problem.field else where
            self._error(problem.category, problem.code, problem.message, path, line)
        customer_item_id = item.get("customer_item_id") if isinstance(item, dict) else None
        repeated = False
        if isinstance(customer_item_id, str) and self._id_hashes is not None:
            self._id_hashes.add(customer_item_id)  # repeats are found after the last item
        elif isinstance(customer_item_id, str):
            first = self._ids.setdefault(customer_item_id, index)
            if first != index:
                first_line = self._lines.line_of(first) if line is not None else None
                at = f" (line {first_line})" if first_line is not None else ""
                self._error(
                    "jsonl_shape",
                    "duplicate_customer_item_id",
                    f"customer_item_id {customer_item_id!r} is already used by items[{first}]{at}.",
                    f"{where}.customer_item_id",
                    line,
                    {"first_index": first},
                )
                repeated = True
        if facts is None or repeated:  # its other problems are reported in the same pass
            named = item.get("model") if isinstance(item, dict) else None
            if facts is not None:
                self._lanes_ok(index, facts, where, line)
            elif isinstance(named, str) and not any(problem.field == "model" for problem in problems):
                self._model_known(named, where, line)
            return None
        if self._lanes_ok(index, facts, where, line):
            group = self._groups.get(facts.model)
            if group is None:
                group = self._groups[facts.model] = ModelGroup(model=facts.model, first_index=index)
            group.add(index, facts)
        return facts

    def ids_may_repeat(self) -> bool:
        """With `compact_ids`: whether two items may share a `customer_item_id` (then read the
        items again without `compact_ids` to find and name them). Always False otherwise: the
        exact check already reported every repeat."""
        return self._id_hashes is not None and self._id_hashes.may_repeat()

    def add_line_error(self, line: int, message: str, *, reason: str | None = None) -> None:
        """A file line that is not a JSON object (domain.jsonl.LineError: pass its line_no,
        message and code as `reason`)."""
        self._line_errors += 1
        details = {"reason": reason} if reason else None
        self._error("jsonl_shape", "malformed_line", message, f"line {line}", line, details)

    def add_issue(self, issue: Issue | IssueView, *, warning: bool = False) -> None:
        """An issue found elsewhere, e.g. the `file_type` check of domain.files."""
        found = issue if isinstance(issue, Issue) else Issue.from_api(issue)
        self._record(found, error=not warning)

    def check_webhook(self, webhook: object, *, check_url: Callable[[str], object]) -> None:
        """The batch webhook `{url, secret}` (domain/delivery/webhook_targets.py), its URL
        through `check_url` (the SSRF guard): every problem is a `webhook` error."""
        if webhook is None:
            return
        for problem in webhook_target_problems(webhook, check_url=check_url):
            self._error("webhook", problem.code, problem.message, problem.path, details=problem.details)

    # -- routing ---------------------------------------------------------------------------

    @property
    def groups(self) -> tuple[ModelGroup, ...]:
        """The model groups to route: items without errors, by model id."""
        self._finish()
        return tuple(self._groups[model] for model in sorted(self._groups))

    def add_route_plan(self, plan: RoutePlan) -> None:
        """A group no lane can take is a `routing` error (unless its model already failed a
        group-level check, which said why more precisely)."""
        self._finish()
        for group in plan.failures:
            if group.model in self._failed_models:
                continue
            self._error(
                "routing",
                "no_eligible_lane",
                f"No eligible lane for model {group.model}: {group.failure}.",
                f"items[{group.first_index}].model",
                details={
                    "model": group.model,
                    "rejections": group.rejection_counts(),
                    "rejected_lanes": [
                        {"lane_id": r.lane_id, "code": r.code, "message": r.message} for r in group.rejected
                    ],
                },
            )

    def result(self) -> PreflightResult:
        self._finish()
        errors = list(self._errors)
        warnings = list(self._warnings)
        error_count = sum(n for (is_error, _, _), n in self._counts.items() if is_error)
        warning_count = sum(self._counts.values()) - error_count
        if error_count > len(errors) or warning_count > len(warnings):
            warnings.append(self._truncation(error_count, warning_count, len(errors), len(warnings)))
        return PreflightResult(
            errors=tuple(errors),
            warnings=tuple(warnings),
            error_count=error_count,
            warning_count=warning_count,
        )

    # -- checks ----------------------------------------------------------------------------

    def _lanes_ok(self, index: int, facts: ItemFacts, where: str, line: int | None) -> bool:
        """Item checks against the model's lanes: exists, runs the operation, asks for no more
        embedding dimensions than the model makes, fits a lane (window and request limit)."""
        model = self._model_known(facts.model, where, line)
        if model is None:
            return False
        if not model.lanes:  # nothing routable: routing reports each lane's rejection
            return True
        if facts.operation not in model.operations:
            self._error(
                "routing",
                "operation_not_supported",
                f"No lane of {facts.model} runs {facts.operation}; its lanes run "
                f"{', '.join(sorted(model.operations))}.",
                f"{where}.operation",
                line,
            )
            return False
        if 0 < model.max_dimensions < facts.dimensions:
            self._error(
                "jsonl_shape",
                "invalid_field",
                f"{facts.model} makes vectors of {model.max_dimensions} dimensions: dimensions may be "
                f"1-{model.max_dimensions}.",
                f"{where}.input.dimensions",
                line,
                {"max_dimensions": model.max_dimensions},
            )
            return False
        return self._fits_a_lane(facts, model, where, line)

    def _model_known(self, model_id: str, where: str, line: int | None) -> _ModelLanes | None:
        """The model's lanes, or None, reporting `unknown_model` when the catalog does not
        know it."""
        model = self._model_lanes(model_id)
        if model is None:
            known = self._lower_ids.get(model_id.lower())
            hint = f" Did you mean {known!r}?" if known else ""
            self._error(
                "routing",
                "unknown_model",
                f"Unknown model {model_id!r}: model ids are exact catalog ids.{hint}",
                f"{where}.model",
                line,
            )
        return model

    def _fits_a_lane(self, facts: ItemFacts, model: _ModelLanes, where: str, line: int | None) -> bool:
        """The item fits some lane's context window (for embeddings, each input on its own)
        and, for embeddings, its inputs summed fit that lane's per-request limit, if any."""
        prompt, wanted = facts.window_prompt_tokens, facts.output_tokens
        summed = facts.request_tokens
        if model.admits(prompt, wanted, summed):
            return True
        if model.admits(prompt, wanted):  # a window fits; every such lane's request limit is below the sum
            limit = max(
                limit or 0 for window, cap, limit in model.fits if prompt + min(wanted, cap) <= window
            )
            self._error(
                "context_window",
                "preflight_context_window_exceeded",
                f"The item needs about {summed:,} tokens (estimated) summed across its inputs; the "
                f"lanes of {facts.model} take at most {limit:,} a request.",
                f"{where}.input",
                line,
                {"needed_tokens": summed, "request_token_limit": limit},
            )
            return False
        largest_cap = max(cap for window, cap, _ in model.fits if window == model.largest_window)
        self._error(
            "context_window",
            "preflight_context_window_exceeded",
            f"The item needs about {prompt + min(wanted, largest_cap)} tokens ({prompt} prompt, "
            f"estimated, + {min(wanted, largest_cap)} output); the largest context window among "
            f"the lanes of {facts.model} is {model.largest_window}.",
            f"{where}.input",
            line,
            {
                "estimated_prompt_tokens": prompt,
                "requested_output_tokens": wanted,
                "largest_context_window": model.largest_window,
            },
        )
        return False

    def _finish(self) -> None:
        """Group-level checks, once: what no single lane of a model can do for its items."""
        if self._finished:
            return
        self._finished = True
        if self.item_count == 0 and self._line_errors == 0 and not self._counts:  # e.g. file_type
            self._error("jsonl_shape", "empty_batch", "The batch has no items.", "items")
        for model_id in sorted(self._groups):
            group = self._groups[model_id]
            lanes = self._model_lanes(model_id)
            if lanes is None or not lanes.lanes:
                continue
            tools_ok = self._tools_ok(group, lanes.lanes)
            capabilities_ok = self._capabilities_ok(group, lanes.lanes)
            if not (tools_ok and capabilities_ok):
                self._failed_models.add(model_id)
            self._check_group_context(group, lanes.lanes)

    def _tools_ok(self, group: ModelGroup, lanes: tuple[Lane, ...]) -> bool:
        required = self.request.required_tools.union(group.tools)
        if not required or any(required.issubset(lane.hosted_tools) for lane in lanes):
            return True
        offered_anywhere = set().union(*(lane.hosted_tools for lane in lanes))
        missing = sorted(required - offered_anywhere)
        culprit = next((tool for tool in missing if tool in group.tools), None)
        path = f"items[{group.tools[culprit]}]" if culprit else "required_tools"
        if missing:
            why = f"no lane offers {', '.join(missing)}"
        else:
            why = "the tools are offered, but no single lane offers all of them"
        self._error(
            "tool_support",
            "tool_not_supported",
            f"Model {group.model} needs {', '.join(sorted(required))}: {why}.",
            path,
            details={
                "model": group.model,
                "required": sorted(required),
                "missing": missing,
                "offered": {lane.lane_id: sorted(lane.hosted_tools) for lane in lanes},
            },
        )
        return False

    def _capabilities_ok(self, group: ModelGroup, lanes: tuple[Lane, ...]) -> bool:
        ok = True
        offered = [set(lane.runtime_capabilities).union(lane.operations) for lane in lanes]
        for capability, first in sorted(group.capabilities.items()):
            accepted = {"json_schema", "structured_outputs"} if capability == "json_schema" else {capability}
            if any(accepted & lane_offers for lane_offers in offered):
                continue
            ok = False
            details = {
                "model": group.model,
                "required": capability,
                "offered": {lane.lane_id: sorted(lane.runtime_capabilities) for lane in lanes},
            }
            if capability == "json_schema":
                self._error(
                    "json_schema",
                    "json_schema_unsupported",
                    f"No lane of {group.model} supports structured outputs (json_schema: a "
                    "response_format schema, or a function with strict: true).",
                    f"items[{first}].input",
                    details=details,
                )
            else:
                self._error(
                    "tool_support",
                    "capability_not_supported",
                    f"No lane of {group.model} supports {_CAPABILITY_NAMES.get(capability, capability)}.",
                    f"items[{first}].input",
                    details=details,
                )
        return ok

    def _check_group_context(self, group: ModelGroup, lanes: tuple[Lane, ...]) -> None:
        """The lanes the routing gate will refuse with context_window_exceeded (domain/routing/
        gates.py): a warning when some are left, an error when none is."""
        too_small = [lane for lane in lanes if _window_short(group, lane) or _request_short(group, lane)]
        if not too_small:
            return
        windows = {lane.lane_id: lane.context_window for lane in too_small}
        details: dict[str, object] = {
            "model": group.model,
            "needed_tokens": group.max_item_tokens,
            "lanes": windows,
        }
        limits = {
            lane.lane_id: lane.max_embedding_request_tokens
            for lane in too_small
            if _request_short(group, lane)
        }
        summed, short = "", "smaller context windows"
        if limits:
            needed = group.max_embedding_prompt_tokens
            details.update(needed_request_tokens=needed, request_token_limits=limits)
            summed = f" (an embeddings item sums about {needed:,} tokens across its inputs)"
            short += " or per-request token limits"
        if len(too_small) < len(lanes):
            self._warning(
                "context_window",
                "context_window_lanes_excluded",
                f"The largest items of {group.model} need about {group.max_item_tokens} tokens{summed}; "
                f"{', '.join(windows)} ({short}) will be rejected with context_window_exceeded.",
                f"items[{group.largest_item}]",
                details,
            )
            return
        self._failed_models.add(group.model)
        self._error(
            "context_window",
            "preflight_context_window_exceeded",
            f"Every item of {group.model} fits some lane, but no single lane's context window fits "
            f"them all (the largest prompt is about {group.max_prompt_tokens} tokens, the largest "
            f"request about {group.max_item_tokens}){summed}.",
            f"items[{group.largest_item}]",
            details=details,
        )

    def _model_lanes(self, model_id: str) -> _ModelLanes | None:
        if model_id in self._models:
            return self._models[model_id]
        found: _ModelLanes | None = None
        model = self.catalog.model(model_id)
        if model is not None:
            admitted = tuple(
                lane
                for lane in self.catalog.lanes_for(model_id)
                if self.guards.admits(self.catalog.provider(lane.provider))
            )
            found = _ModelLanes(
                lanes=admitted,
                operations=frozenset(op for lane in admitted for op in lane.operations),
                fits=tuple(
                    (lane.context_window, lane.max_output_tokens, lane.max_embedding_request_tokens)
                    for lane in admitted
                ),
                largest_window=max((lane.context_window for lane in admitted), default=0),
                max_dimensions=model.embedding_dimensions,
            )
        self._models[model_id] = found
        return found

    # -- recording -------------------------------------------------------------------------

    def _error(
        self,
        category: str,
        code: str,
        message: str,
        path: str | None = None,
        line: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self._record(Issue(category, code, message, ACTIONS.get(code, ""), path, line, details), error=True)

    def _warning(
        self, category: str, code: str, message: str, path: str | None, details: Mapping[str, Any]
    ) -> None:
        self._record(Issue(category, code, message, ACTIONS.get(code, ""), path, None, details), error=False)

    def _record(self, issue: Issue, *, error: bool) -> None:
        if issue.line is None and issue.path is not None:  # a group check's: the item's line
            issue = replace(issue, line=self._lines.line_at(issue.path))
        self._counts[(error, issue.category, issue.code)] += 1
        listed = self._errors if error else self._warnings
        if len(listed) < self.max_listed:
            listed.append(issue)

    def _truncation(self, errors: int, warnings: int, listed_errors: int, listed_warnings: int) -> Issue:
        by_code: Counter[str] = Counter()
        by_category: Counter[str] = Counter()
        for (_, category, code), count in self._counts.items():
            by_code[code] += count
            by_category[category] += count
        # The summary takes the category most of the issues share.
        order = {name: position for position, name in enumerate(CATEGORIES)}
        category = min(by_category, key=lambda name: (-by_category[name], order.get(name, len(order))))
        return Issue(
            category=category,
            code="issues_truncated",
            message=(
                f"Listed {listed_errors} of {errors} errors and {listed_warnings} of {warnings} "
                "warnings; the counts by code are in details."
            ),
            action=ACTIONS["issues_truncated"],
            details={
                "errors_total": errors,
                "warnings_total": warnings,
                "by_code": dict(sorted(by_code.items())),
            },
        )


def _window_short(group: ModelGroup, lane: Lane) -> bool:
    """The group's largest item does not fit the lane's context window."""
    return group.context_tokens_on(lane.max_output_tokens) > lane.context_window


def _request_short(group: ModelGroup, lane: Lane) -> bool:
    """One of the group's embeddings items sums more tokens than the lane takes a request."""
    limit = lane.max_embedding_request_tokens
    return limit is not None and group.max_embedding_prompt_tokens > limit
