"""The outside world's shapes: pure data and codecs; no I/O, no imports from toolwire."""
