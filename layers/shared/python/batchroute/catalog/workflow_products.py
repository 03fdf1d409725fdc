"""The built-in workflow products: outcome contracts with an input schema, an output schema,
the 24-hour SLA and a route policy. Schemas are JSON Schema draft 2020-12.

A route policy names what a lane must offer to serve the product:
`required_capabilities` (runtime capabilities, all required), `min_context_window`,
`routing_mode` and `privacy_tier` (see docs/catalog.md).
"""

from __future__ import annotations

from batchroute.domain.catalog import WorkflowProduct

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

TICKET_CLASSIFICATION = WorkflowProduct(
    slug="ticket-classification",
    title="Support ticket classification",
    summary="Assigns each support ticket one of your categories, a priority and a confidence.",
    input_schema={
        "$schema": DRAFT_2020_12,
        "title": "Ticket classification input",
        "type": "object",
        "required": ["ticket", "categories"],
        "additionalProperties": False,
        "properties": {
            "ticket": {
                "type": "object",
                "required": ["body"],
                "additionalProperties": False,
                "properties": {
                    "subject": {"type": "string", "maxLength": 500},
                    "body": {"type": "string", "minLength": 1, "maxLength": 20_000},
                    "channel": {"enum": ["email", "chat", "phone", "web", "social"]},
                    "language": {"type": "string", "pattern": "^[a-z]{2}(-[A-Z]{2})?$"},
                },
            },
            "categories": {
                "type": "array",
                "minItems": 2,
                "maxItems": 50,
                "uniqueItems": True,
                "items": {"type": "string", "minLength": 1, "maxLength": 80},
            },
        },
    },
    output_schema={
        "$schema": DRAFT_2020_12,
        "title": "Ticket classification output",
        "type": "object",
        "required": ["category", "priority", "confidence"],
        "additionalProperties": False,
        "properties": {
            "category": {"type": "string", "description": "one of the input categories"},
            "priority": {"enum": ["low", "normal", "high", "urgent"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "rationale": {"type": "string", "maxLength": 500},
        },
    },
    sla_hours=24,
    route_policy={
        "routing_mode": "cheapest",
        "privacy_tier": "standard",
        "required_capabilities": ["json_schema"],
        "min_context_window": 8_192,
    },
    typical_input_tokens=600,
    typical_output_tokens=80,
)

DOCUMENT_SUMMARY = WorkflowProduct(
    slug="document-summary",
    title="Long document summary",
    summary="Summarizes a document of up to ~100k tokens into a bounded summary and key points.",
    input_schema={
        "$schema": DRAFT_2020_12,
        "title": "Document summary input",
        "type": "object",
        "required": ["document"],
        "additionalProperties": False,
        "properties": {
            "document": {
                "type": "object",
                "required": ["text"],
                "additionalProperties": False,
                "properties": {
                    "title": {"type": "string", "maxLength": 500},
                    "text": {"type": "string", "minLength": 1, "maxLength": 400_000},
                },
            },
            "max_words": {"type": "integer", "minimum": 50, "maximum": 1_000, "default": 200},
            "audience": {"enum": ["general", "executive", "technical", "legal"], "default": "general"},
        },
    },
    output_schema={
        "$schema": DRAFT_2020_12,
        "title": "Document summary output",
        "type": "object",
        "required": ["summary", "key_points"],
        "additionalProperties": False,
        "properties": {
            "summary": {"type": "string", "minLength": 1},
            "key_points": {
                "type": "array",
                "minItems": 1,
                "maxItems": 12,
                "items": {"type": "string", "minLength": 1},
            },
            "word_count": {"type": "integer", "minimum": 0},
        },
    },
    sla_hours=24,
    route_policy={
        "routing_mode": "cheapest",
        "privacy_tier": "standard",
        "required_capabilities": ["structured_outputs"],
        "min_context_window": 128_000,
    },
    typical_input_tokens=12_000,
    typical_output_tokens=400,
)

STRUCTURED_EXTRACTION = WorkflowProduct(
    slug="structured-extraction",
    title="Structured field extraction",
    summary="Pulls the fields you describe out of free text and returns them as validated JSON.",
    input_schema={
        "$schema": DRAFT_2020_12,
        "title": "Structured extraction input",
        "type": "object",
        "required": ["text", "fields"],
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": 100_000},
            "fields": {
                "type": "array",
                "minItems": 1,
                "maxItems": 100,
                "items": {
                    "type": "object",
                    "required": ["name", "type"],
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$"},
                        "type": {"enum": ["string", "number", "integer", "boolean", "date"]},
                        "description": {"type": "string", "maxLength": 500},
                        "required": {"type": "boolean", "default": False},
                    },
                },
            },
        },
    },
    output_schema={
        "$schema": DRAFT_2020_12,
        "title": "Structured extraction output",
        "type": "object",
        "required": ["data", "missing_fields"],
        "additionalProperties": False,
        "properties": {
            "data": {
                "type": "object",
                "description": "one property per requested field that was found",
                "additionalProperties": {"type": ["string", "number", "integer", "boolean"]},
            },
            "missing_fields": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
    },
    sla_hours=24,
    route_policy={
        "routing_mode": "cheapest",
        "privacy_tier": "standard",
        "required_capabilities": ["structured_outputs", "json_schema"],
        "min_context_window": 32_768,
    },
    typical_input_tokens=2_500,
    typical_output_tokens=300,
)

PII_REDACTION = WorkflowProduct(
    slug="pii-redaction",
    title="PII redaction",
    summary="Finds personal data in text and returns a redacted copy with the entity spans.",
    input_schema={
        "$schema": DRAFT_2020_12,
        "title": "PII redaction input",
        "type": "object",
        "required": ["text"],
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": 50_000},
            "entity_types": {
                "type": "array",
                "uniqueItems": True,
                "items": {
                    "enum": ["person", "email", "phone", "address", "iban", "card_number", "national_id"]
                },
                "default": ["person", "email", "phone", "address"],
            },
            "replacement": {"enum": ["type_tag", "mask"], "default": "type_tag"},
        },
    },
    output_schema={
        "$schema": DRAFT_2020_12,
        "title": "PII redaction output",
        "type": "object",
        "required": ["redacted_text", "entities"],
        "additionalProperties": False,
        "properties": {
            "redacted_text": {"type": "string"},
            "entities": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type", "start", "end"],
                    "additionalProperties": False,
                    "properties": {
                        "type": {"type": "string"},
                        "start": {"type": "integer", "minimum": 0},
                        "end": {"type": "integer", "minimum": 0},
                    },
                },
            },
        },
    },
    sla_hours=24,
    route_policy={
        # The text is personal data: only confidential lanes with zero data retention.
        "routing_mode": "privacy_constrained",
        "privacy_tier": "confidential",
        "required_capabilities": ["json_schema"],
        "min_context_window": 16_384,
    },
    typical_input_tokens=1_500,
    typical_output_tokens=1_600,
)

WORKFLOW_PRODUCTS: tuple[WorkflowProduct, ...] = (
    TICKET_CLASSIFICATION,
    DOCUMENT_SUMMARY,
    STRUCTURED_EXTRACTION,
    PII_REDACTION,
)
