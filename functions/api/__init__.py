"""The HTTP API: a FastAPI app served by Mangum on Lambda and by uvicorn locally."""
