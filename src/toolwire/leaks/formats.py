"""The catalogue of tool-call formats that models write as text, and how they drift.

One `LeakFormat` per family in `shared/reference/tool-call-formats.md`; `DRIFTS` lists the drift
the reference describes and the family the detector reports for each. The detector and salvage
parser build their patterns from the marker constants here so every exact token (fullwidth `｜`,
`▁`) is written once. `family` strings are what `LeakMatch.family` carries.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- exact markers -------------------------------------------------------------------------------

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
SEED_TOOL_CALL_OPEN = "<seed:tool_call>"
SEED_TOOL_CALL_CLOSE = "</seed:tool_call>"
PYTHON_TAG = "<|python_tag|>"
PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"
FUNCTION_CALLS_OPEN = "<function_calls>"
FUNCTION_CALLS_CLOSE = "</function_calls>"
MISTRAL_TOOL_CALLS = "[TOOL_CALLS]"
MISTRAL_ARGS = "[ARGS]"
MISTRAL_CALL_ID = "[CALL_ID]"

DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
DS_CALLS_END = "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"
DS_CALL_END = "<｜tool▁call▁end｜>"
DS_SEP = "<｜tool▁sep｜>"
DSML_FUNCTION_CALLS = "<｜DSML｜function_calls>"
DSML_TOOL_CALLS = "<｜DSML｜tool_calls>"
DSML_INVOKE = "<｜DSML｜invoke"
DSML_PARAMETER = "<｜DSML｜parameter"
DSML_ASCII_INVOKE = "< | DSML | invoke"

KIMI_SECTION_BEGIN = "<|tool_calls_section_begin|>"
KIMI_SECTION_BEGIN_SINGULAR = "<|tool_call_section_begin|>"
KIMI_SECTION_END = "<|tool_calls_section_end|>"
KIMI_SECTION_END_SINGULAR = "<|tool_call_section_end|>"
KIMI_CALL_BEGIN = "<|tool_call_begin|>"
KIMI_ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
KIMI_CALL_END = "<|tool_call_end|>"

GLM_ARG_KEY = "<arg_key>"
GLM_ARG_VALUE = "<arg_value>"
GRANITE_TOOL_CALL = "<|tool_call|>"
FUNCTION_CALL_OPEN = "<function_call>"
INTERNLM_ACTION_START = "<|action_start|>"
INTERNLM_PLUGIN = "<|plugin|>"
INTERNLM_ACTION_END = "<|action_end|>"
TOOL_CALLS_OPEN = "<tool_calls>"
TOOL_CALLS_CLOSE = "</tool_calls>"
MINIMAX_TOOL_CALL_OPEN = "<minimax:tool_call>"
MINIMAX_TOOL_CALL_CLOSE = "</minimax:tool_call>"
STEP3_CALLS_BEGIN = "<｜tool_calls_begin｜>"
STEP3_CALLS_END = "<｜tool_calls_end｜>"
STEP3_CALL_BEGIN = "<｜tool_call_begin｜>"
STEP3_CALL_END = "<｜tool_call_end｜>"
STEP3_SEP = "<｜tool_sep｜>"
STEP3_INVOKE = "<steptml:invoke"
PHI4_FUNCTOOLS = "functools["
HARMONY_START = "<|start|>"
HARMONY_CHANNEL = "<|channel|>"
HARMONY_CONSTRAIN = "<|constrain|>"
HARMONY_MESSAGE = "<|message|>"
HARMONY_CALL = "<|call|>"
HARMONY_RECIPIENT = "to=functions."
GEMMA_CALL_OPEN = "<start_function_call>"
GEMMA_CALL_CLOSE = "<end_function_call>"
GEMMA_ESCAPE = "<escape>"

# End-of-turn tokens a server may leave after a leaked call; the detector allows them (and any
# stray closing tag) between the call and the end of the text.
END_TOKENS: tuple[str, ...] = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|eot|>",
    "<|eom|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|observation|>",
    "<｜end▁of▁sentence｜>",
    "</s>",
    "<end_of_turn>",
    "<eos>",
    "[e~[",
)


@dataclass(slots=True, frozen=True)
class LeakFormat:
    """One family: what the detector reports, the models, the shape, and its exact markers.

    `markers` are literal strings that only appear in this family's calls (none for shapes with no
    marker at all); tests use them to check that a match's `start` leaves no markup behind.
    `whole_message` families carry so little evidence that they only count when the call is the
    whole visible message.
    """

    family: str
    models: str
    shape: str
    markers: tuple[str, ...]
    whole_message: bool = False


FORMATS: tuple[LeakFormat, ...] = (
    LeakFormat(
        "hermes",
        "Hermes 2/3, Qwen2.5, QwQ",
        '<tool_call>{"name": "f", "arguments": {...}}</tool_call>',
        (TOOL_CALL_OPEN,),
    ),
    LeakFormat(
        "qwen3_coder",
        "Qwen3-Coder, Qwen3.5/3.6",
        "<tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>",
        (TOOL_CALL_OPEN, "<function=", "<parameter="),
    ),
    LeakFormat(
        "seed_oss",
        "Seed-OSS",
        "<seed:tool_call><function=f><parameter=k>v</parameter></function></seed:tool_call>",
        (SEED_TOOL_CALL_OPEN, "<function=", "<parameter="),
    ),
    LeakFormat(
        "llama3_json",
        "Llama 3.x",
        '<|python_tag|>{"name": "f", "parameters": {...}}; {...}',
        (PYTHON_TAG,),
    ),
    LeakFormat(
        "pythonic",
        "Llama 4 and others",
        '[f(a=1, b="x"), g()]  or  <|python_start|>[f(a=1)]<|python_end|>',
        (PYTHON_START,),
        whole_message=True,
    ),
    LeakFormat(
        "olmo3",
        "OLMo 3",
        "<function_calls>f(a=1)\ng(b=true)</function_calls>",
        (FUNCTION_CALLS_OPEN,),
    ),
    LeakFormat(
        "mistral",
        "Mistral, Magistral, Devstral",
        f"{MISTRAL_TOOL_CALLS}[{{...}}]  or  {MISTRAL_TOOL_CALLS}f{MISTRAL_ARGS}{{...}}  or  "
        f"{MISTRAL_TOOL_CALLS}f{MISTRAL_CALL_ID}id{MISTRAL_ARGS}{{...}}  or (stripped) "
        f"{MISTRAL_TOOL_CALLS}f{{...}}",
        (MISTRAL_TOOL_CALLS, MISTRAL_ARGS, MISTRAL_CALL_ID),
    ),
    LeakFormat(
        "deepseek_v3",
        "DeepSeek V3, R1",
        f"{DS_CALLS_BEGIN}{DS_CALL_BEGIN}function{DS_SEP}f\n```json\n{{...}}\n```"
        f"{DS_CALL_END}{DS_CALLS_END}",
        (DS_CALLS_BEGIN, DS_CALL_BEGIN, DS_SEP),
    ),
    LeakFormat(
        "deepseek_v31",
        "DeepSeek V3.1",
        f"{DS_CALLS_BEGIN}{DS_CALL_BEGIN}f{DS_SEP}{{...}}{DS_CALL_END}{DS_CALLS_END}",
        (DS_CALLS_BEGIN, DS_CALL_BEGIN, DS_SEP),
    ),
    LeakFormat(
        "deepseek_dsml",
        "DeepSeek V3.2, V4 (also the ASCII `< | DSML | invoke` leak and the stripped "
        "`<function_calls><invoke>` form)",
        f'{DSML_FUNCTION_CALLS}{DSML_INVOKE} name="f">{DSML_PARAMETER} name="k" string="true">'
        "v</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>",
        (DSML_FUNCTION_CALLS, DSML_TOOL_CALLS, DSML_INVOKE, DSML_ASCII_INVOKE, "DSML"),
    ),
    LeakFormat(
        "kimi_k2",
        "Kimi K2",
        f"{KIMI_SECTION_BEGIN}{KIMI_CALL_BEGIN}functions.f:0{KIMI_ARGUMENT_BEGIN}{{...}}"
        f"{KIMI_CALL_END}{KIMI_SECTION_END}  (or the singular {KIMI_SECTION_BEGIN_SINGULAR}"
        f"...{KIMI_SECTION_END_SINGULAR})",
        (KIMI_SECTION_BEGIN, KIMI_SECTION_BEGIN_SINGULAR, KIMI_CALL_BEGIN),
    ),
    LeakFormat(
        "glm45",
        "GLM-4.5, 4.6, 4.7",
        f"<tool_call>f\n{GLM_ARG_KEY}k</arg_key>\n{GLM_ARG_VALUE}v</arg_value>\n</tool_call>",
        (TOOL_CALL_OPEN, GLM_ARG_KEY, GLM_ARG_VALUE),
    ),
    LeakFormat(
        "granite",
        "Granite 3.0 / 3.1, granite-20b-fc (and the `<function_call>` wrapper drift)",
        '<|tool_call|>[{...}]  or  <tool_call>[{...}]  or  <function_call> {"name": ...}',
        (GRANITE_TOOL_CALL, TOOL_CALL_OPEN, FUNCTION_CALL_OPEN),
    ),
    LeakFormat(
        "internlm",
        "InternLM 2.5",
        f'{INTERNLM_ACTION_START}{INTERNLM_PLUGIN}\n{{"name": "f", "parameters": {{...}}}}'
        f"{INTERNLM_ACTION_END}",
        (INTERNLM_ACTION_START, INTERNLM_PLUGIN),
    ),
    LeakFormat(
        "jamba",
        "Jamba, Hunyuan",
        '<tool_calls>[{"name": "f", "arguments": {...}}]</tool_calls>',
        (TOOL_CALLS_OPEN,),
    ),
    LeakFormat(
        "minimax_m1",
        "MiniMax M1",
        '<tool_calls>\n{"name": "f", "arguments": {...}}\n{...}\n</tool_calls>',
        (TOOL_CALLS_OPEN,),
    ),
    LeakFormat(
        "minimax_m2",
        "MiniMax M2",
        '<minimax:tool_call>\n<invoke name="f">\n<parameter name="k">v</parameter>\n</invoke>\n'
        "</minimax:tool_call>",
        (MINIMAX_TOOL_CALL_OPEN, "<invoke name="),
    ),
    LeakFormat(
        "step3",
        "Step-3",
        f'{STEP3_CALLS_BEGIN}{STEP3_CALL_BEGIN}function{STEP3_SEP}<steptml:invoke name="f">'
        '<steptml:parameter name="k">v</steptml:parameter></steptml:invoke>'
        f"{STEP3_CALL_END}{STEP3_CALLS_END}",
        (STEP3_CALLS_BEGIN, STEP3_CALL_BEGIN, STEP3_INVOKE),
    ),
    LeakFormat(
        "phi4_mini",
        "Phi-4-mini",
        'functools[{"name": "f", "arguments": {...}}]',
        (PHI4_FUNCTOOLS,),
    ),
    LeakFormat(
        "xlam",
        "xLAM",
        '[{"name": "f", "arguments": {...}}] (bare, after </think>, or in a ```json fence)',
        (),
        whole_message=True,
    ),
    LeakFormat(
        "harmony",
        "gpt-oss",
        f"{HARMONY_START}assistant{HARMONY_CHANNEL}commentary {HARMONY_RECIPIENT}f "
        f"{HARMONY_CONSTRAIN}json{HARMONY_MESSAGE}{{...}}{HARMONY_CALL}  or (stripped) "
        f"assistantcommentary {HARMONY_RECIPIENT}f json{{...}}",
        (HARMONY_RECIPIENT,),
    ),
    LeakFormat(
        "functiongemma",
        "FunctionGemma",
        "<start_function_call>call:f{k:<escape>v<escape>}<end_function_call>",
        (GEMMA_CALL_OPEN,),
    ),
    LeakFormat(
        "generic_json",
        "any model told to answer with JSON",
        '{"name": ..., "arguments"|"parameters"|"input": ...} or {"function": {...}} or a list',
        (),
        whole_message=True,
    ),
)

FORMAT_BY_FAMILY: dict[str, LeakFormat] = {f.family: f for f in FORMATS}


@dataclass(slots=True, frozen=True)
class Drift:
    """A way real models bend a format; `family` is what the detector reports for it."""

    id: str
    family: str
    description: str


DRIFTS: tuple[Drift, ...] = (
    Drift(
        "missing_open_function",
        "qwen3_coder",
        "no `<tool_call>`: the call starts at `<function=...>`",
    ),
    Drift(
        "missing_open_json",
        "hermes",
        'no `<tool_call>`: the call starts at `{"name"` on its own line after prose',
    ),
    Drift("function_underscore", "qwen3_coder", "`<function_bash>` instead of `<function=bash>`"),
    Drift("function_name_attr", "qwen3_coder", '`<function name="bash">`'),
    Drift("wrapper_tool", "hermes", "`<tool>` around a hermes JSON body"),
    Drift("wrapper_tools", "hermes", "`<tools>` around a hermes JSON body"),
    Drift("wrapper_function_call", "granite", "`<function_call>` around a hermes JSON body"),
    Drift("wrapper_json", "hermes", "`<json>` around a hermes JSON body"),
    Drift("missing_close_parameter", "qwen3_coder", "`</parameter>` (and what follows) missing"),
    Drift("missing_close_tool_call", "hermes", "`</tool_call>` missing"),
    Drift("stray_closers", "qwen3_coder", "a run of stray closing tags after the call"),
    Drift("call_in_reasoning", "hermes", "the whole call at the end of the reasoning"),
)

DRIFT_BY_ID: dict[str, Drift] = {d.id: d for d in DRIFTS}
