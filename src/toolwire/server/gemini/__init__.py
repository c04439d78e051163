"""The Gemini door (`/v1beta/models/{model}:generateContent`, `:streamGenerateContent`,
`:countTokens`, the model listing; the same under `/v1`).

Gemini CLI and Google's GenAI SDKs speak this API. The door translates a `generateContent`
request into the loop's `LoopRequest` (`translate.py`, with Gemini's schemas made JSON Schema in
`schema.py`), runs it through the same driver as every other door (assembler, leak recovery,
the result envelope), and writes the `LoopEvent`s out as Gemini's candidates and stream chunks
(`sink.py`). Errors leave in Google's shape (`errors.py`). The door stores nothing: Gemini's
`generateContent` is stateless. See docs/gemini.md.
"""
