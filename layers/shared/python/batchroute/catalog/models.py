"""The built-in models. `id` is the exact string items use and the catalog slug.

A model's `runtime_capabilities` are what the model itself can do; each lane declares the
subset its provider exposes (a host without constrained decoding cannot honour
`json_schema`, whatever the weights could do).
"""

from __future__ import annotations

from batchroute.domain.catalog import Model

GPT_4O_MINI = "gpt-4o-mini"
GPT_41_MINI = "gpt-4.1-mini"
TEXT_EMBEDDING_3_SMALL = "text-embedding-3-small"
CLAUDE_35_HAIKU = "claude-3-5-haiku"
CLAUDE_SONNET_4 = "claude-sonnet-4"
GEMINI_20_FLASH = "gemini-2.0-flash"
GEMINI_15_FLASH = "gemini-1.5-flash"
LLAMA_33_70B = "meta-llama/Llama-3.3-70B-Instruct"
LLAMA_31_8B = "meta-llama/Llama-3.1-8B-Instruct"
QWEN_25_72B = "Qwen/Qwen2.5-72B-Instruct"
BGE_LARGE_EN = "BAAI/bge-large-en-v1.5"
LLAMA_32_11B_VISION = "meta-llama/Llama-3.2-11B-Vision-Instruct"

MODELS: tuple[Model, ...] = (
    Model(
        id=GPT_4O_MINI,
        title="GPT-4o mini",
        summary="OpenAI's small multimodal model: cheap, fast, strict JSON Schema outputs.",
        description=(
            "A small GPT-4o-class model for high-volume classification, extraction and short "
            "generation. Accepts text and images; supports tool calling and strict structured "
            "outputs. Runs through the OpenAI Batch API at half the synchronous price."
        ),
        tags=("openai", "multimodal", "structured-output", "classification", "low-cost"),
        operations=("responses", "vision"),
        runtime_capabilities=("tool_calling", "structured_outputs", "json_schema", "vision"),
        open_weight=False,
        family="gpt-4o",
    ),
    Model(
        id=GPT_41_MINI,
        title="GPT-4.1 mini",
        summary="OpenAI's 1M-token-context mid-size model with strong instruction following.",
        description=(
            "GPT-4.1 mini follows long, precise instructions and reads up to about a million "
            "tokens of context: long documents, large codebases, many-shot prompts. Text, "
            "images and PDF documents as input; strict structured outputs and tool calling."
        ),
        tags=("openai", "long-context", "multimodal", "structured-output", "documents"),
        operations=("responses", "vision"),
        runtime_capabilities=("tool_calling", "structured_outputs", "json_schema", "vision", "documents"),
        open_weight=False,
        family="gpt-4.1",
    ),
    Model(
        id=TEXT_EMBEDDING_3_SMALL,
        title="text-embedding-3-small",
        summary="OpenAI's low-cost 1536-dimension text embedding model.",
        description=(
            "General-purpose English and multilingual text embeddings (1536 dimensions, "
            "shortenable) for search, clustering and retrieval. Input up to 8191 tokens."
        ),
        tags=("openai", "embeddings", "retrieval", "search"),
        operations=("embeddings",),
        runtime_capabilities=(),
        open_weight=False,
        family="text-embedding-3",
    ),
    Model(
        id=CLAUDE_35_HAIKU,
        title="Claude 3.5 Haiku",
        summary="Anthropic's fastest model of the 3.5 generation, for text workloads at volume.",
        description=(
            "A fast, inexpensive Claude model for classification, routing, moderation and "
            "short-form writing over a 200k-token context. Tool use for structured answers. "
            "Runs through the Anthropic Message Batches API at half price."
        ),
        tags=("anthropic", "claude", "fast", "classification", "low-latency"),
        operations=("responses",),
        runtime_capabilities=("tool_calling",),
        open_weight=False,
        family="claude-3.5",
    ),
    Model(
        id=CLAUDE_SONNET_4,
        title="Claude Sonnet 4",
        summary="Anthropic's balanced frontier model: reasoning, documents, images, 64k output.",
        description=(
            "Claude Sonnet 4 handles complex analysis, long-document review and careful "
            "writing, with optional extended thinking. Reads images and PDF documents; "
            "writes up to 64k tokens per answer. Batch pricing is half the standard rate."
        ),
        tags=("anthropic", "claude", "reasoning", "documents", "analysis"),
        operations=("responses", "vision"),
        runtime_capabilities=("tool_calling", "vision", "documents", "reasoning"),
        open_weight=False,
        family="claude-4",
    ),
    Model(
        id=GEMINI_20_FLASH,
        title="Gemini 2.0 Flash",
        summary="Google's 1M-context multimodal workhorse with native JSON Schema output.",
        description=(
            "A fast multimodal model for text, images, audio, video and PDF input over a "
            "1M-token context, with controlled JSON Schema generation and Google Search "
            "grounding. The Gemini Batch API charges half the interactive price."
        ),
        tags=("google", "gemini", "multimodal", "long-context", "audio", "structured-output"),
        operations=("responses", "vision"),
        runtime_capabilities=(
            "tool_calling",
            "structured_outputs",
            "json_schema",
            "vision",
            "documents",
            "audio",
        ),
        open_weight=False,
        family="gemini-2.0",
    ),
    Model(
        id=GEMINI_15_FLASH,
        title="Gemini 1.5 Flash",
        summary="Google's earlier Flash model: the cheapest 1M-context multimodal lane.",
        description=(
            "The previous-generation Flash model: multimodal input over a 1M-token context "
            "at a very low price, with JSON Schema output. Kept for workloads validated "
            "against it; new work should prefer Gemini 2.0 Flash."
        ),
        tags=("google", "gemini", "multimodal", "long-context", "legacy"),
        operations=("responses", "vision"),
        runtime_capabilities=(
            "tool_calling",
            "structured_outputs",
            "json_schema",
            "vision",
            "documents",
            "audio",
        ),
        open_weight=False,
        family="gemini-1.5",
    ),
    Model(
        id=LLAMA_33_70B,
        title="Llama 3.3 70B Instruct",
        summary="Meta's open-weight 70B instruction model, served by six lanes at different prices.",
        description=(
            "An open-weight 70B model with quality close to much larger models on chat, "
            "summarization and extraction; 128k context, multilingual, tool calling. Served "
            "by Together, Groq, Fireworks, DeepInfra and both edge pools, so routing has real "
            "price, privacy and region choices."
        ),
        tags=("meta", "llama", "open-weight", "multilingual", "general"),
        operations=("responses",),
        runtime_capabilities=("tool_calling", "structured_outputs", "json_schema"),
        open_weight=True,
        family="llama-3.3",
    ),
    Model(
        id=LLAMA_31_8B,
        title="Llama 3.1 8B Instruct",
        summary="Meta's small open-weight model for cheap, high-volume text tasks.",
        description=(
            "An 8B open-weight instruction model for tagging, routing, short extraction and "
            "first-pass filtering at very low cost; 128k context on public hosts, 32k on the "
            "edge nodes."
        ),
        tags=("meta", "llama", "open-weight", "small", "low-cost"),
        operations=("responses",),
        runtime_capabilities=("tool_calling", "structured_outputs", "json_schema"),
        open_weight=True,
        family="llama-3.1",
    ),
    Model(
        id=QWEN_25_72B,
        title="Qwen2.5 72B Instruct",
        summary="Alibaba's open-weight 72B model, strong at structured data, code and multilingual text.",
        description=(
            "An open-weight 72B instruction model that is particularly good at producing "
            "JSON, reading tables and working in Chinese and other languages; 32k context."
        ),
        tags=("qwen", "alibaba", "open-weight", "multilingual", "json", "code"),
        operations=("responses",),
        runtime_capabilities=("tool_calling", "structured_outputs", "json_schema"),
        open_weight=True,
        family="qwen-2.5",
    ),
    Model(
        id=BGE_LARGE_EN,
        title="BGE Large EN v1.5",
        summary="BAAI's open-weight English embedding model (1024 dimensions).",
        description=(
            "An open-weight English text embedding model for retrieval and semantic search; "
            "1024-dimension vectors, 512-token input. Cheapest on the edge nodes, where text "
            "never leaves our hardware."
        ),
        tags=("baai", "bge", "open-weight", "embeddings", "retrieval"),
        operations=("embeddings",),
        runtime_capabilities=(),
        open_weight=True,
        family="bge",
    ),
    Model(
        id=LLAMA_32_11B_VISION,
        title="Llama 3.2 11B Vision Instruct",
        summary="Meta's open-weight image-understanding model for captions, OCR-like reading and VQA.",
        description=(
            "An 11B open-weight model that reads images alongside text: captioning, chart "
            "and screenshot reading, visual question answering; 128k context."
        ),
        tags=("meta", "llama", "open-weight", "vision", "multimodal"),
        operations=("responses", "vision"),
        runtime_capabilities=("vision", "structured_outputs", "json_schema"),
        open_weight=True,
        family="llama-3.2",
    ),
)
