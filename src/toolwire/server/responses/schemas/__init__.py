"""Pydantic models at the HTTP edge: request bodies the handlers validate through, and the
response objects, errors and stream events `/openapi.json` describes (`server/http/openapi.py`)."""
