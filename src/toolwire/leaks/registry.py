"""The one registry of tool-call formats that models write as text.

Each `LeakFormat` says what the detector reports (`family`), which models emit it, the literal
`markers` only its calls contain, the `openers` a call of it starts with (each spelled once in
the `grammar` and tied to the scanner that reads the block), whether it counts only as the whole
message (`whole`: shapes with no marker), and the vLLM / SGLang parsers that read it server-side.

Everything that needs to know where a call can begin reads this module: the detector (the
candidate anchors and the `OPENER` expression are derived here), the salvage parser (through the
same scanners), and the streaming hold-back (through the prefix test of the same grammar). Add a
format here, with a scanner under `scanning/`, and all three learn it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from toolwire.leaks import markers as M
from toolwire.leaks.grammar import WS, WS1, Alt, Opt, Run, Seq, alt, leading_literal, to_regex
from toolwire.leaks.scanning import census, gemma, special_tokens, tagged
from toolwire.leaks.scanning.core import Scanner
from toolwire.leaks.scanning.json_calls import ENVELOPE_KEYS

# -- where a call starts, given an anchor found with str.rfind ------------------------------------

Adjust = Callable[[str, int, int], "int | None"]
"""`(text, anchor position, visible start)` -> where the opener starts, or None."""


def at_anchor(s: str, pos: int, vs: int) -> int | None:
    return pos


def json_start(s: str, pos: int, vs: int) -> int | None:
    """From a `"name"` key back to the `{` that opens its object, if it is the first key."""
    i = pos
    while i > vs and s[i - 1] in " \t\r\n":
        i -= 1
    return i - 1 if i > vs and s[i - 1] == "{" else None


def dsml_start(s: str, pos: int, vs: int) -> int | None:
    """From `DSML` back over `<｜` (or the ASCII `< | `) that opens the token."""
    i = pos
    while i > vs and s[i - 1] == " ":
        i -= 1
    if i <= vs or s[i - 1] not in "|｜":
        return None
    i -= 1
    j = i
    while j > vs and s[j - 1] == " ":
        j -= 1
    if j > vs and s[j - 1] == "<":
        return j - 1
    return None if j > vs and s[j - 1] == "/" else i


def harmony_start(s: str, pos: int, vs: int) -> int | None:
    """From `to=functions.` back to the start of the gpt-oss message header."""
    back = special_tokens.HARMONY_BACK.search(s, max(vs, pos - 48), pos)
    return pos if back is None else back.start()


@dataclass(frozen=True, slots=True)
class Opener:
    """How a block of calls begins, and who reads it.

    `parts`: the opener in the grammar. `scanner`: reads the block from the opener's match.
    `anchors`: literals the detector looks for with `str.rfind`, and how to get from one back to
    the opener's start (default: the leading literal, where it stands). `line_start`: as the
    first block of a chain it only counts at the start of a line (the bare `{"name": ...}`).
    `anywhere`: a block it opens may be a leak although text follows it (on lines of its own,
    see `leaks.standalone`); False for drift shapes of no family's own markup (the bare JSON
    object, the `<tool>`/`<json>` wrappers), which count only when they end the turn.
    """

    parts: Seq
    scanner: Scanner
    anchors: tuple[tuple[str, Adjust], ...] = ()
    line_start: bool = False
    anywhere: bool = True

    def anchor_list(self) -> tuple[tuple[str, Adjust], ...]:
        if self.anchors:
            return self.anchors
        lead = leading_literal(self.parts)
        if not lead:
            raise ValueError(f"an opener needs a leading literal or anchors: {self.parts!r}")
        return ((lead, at_anchor),)


@dataclass(frozen=True, slots=True)
class LeakFormat:
    """One family: what the detector reports, the models, the shape, its markers and openers.

    `markers` are literal strings that only appear in this family's calls (none for shapes with
    no marker at all). Several families may share an opener (`<tool_call>` opens Hermes, Qwen3
    XML, GLM and Granite 3.1 calls); its scanner then tells them apart by the body. `whole`:
    the starts of shapes that only count as the whole visible message (no marker at all).
    """

    family: str
    models: str
    shape: str
    markers: tuple[str, ...]
    openers: tuple[Opener, ...] = ()
    whole: tuple[Seq, ...] = ()
    vllm: tuple[str, ...] = ()
    sglang: tuple[str, ...] = ()


def _o(parts: Seq | str, scanner: Scanner, **kw: object) -> Opener:
    return Opener((parts,) if isinstance(parts, str) else parts, scanner, **kw)  # type: ignore[arg-type]


_FUNCTION_TAG = ("<function", alt("=", "_", (WS1, "name", WS, "=")))
_TOOL_CALL = _o(M.TOOL_CALL_OPEN, tagged.scan_tool_call)
_BAR = alt("|", "｜")
_DSML_TAIL: Seq = (WS, "DSML", WS, _BAR, WS, alt("function_calls", "tool_calls", "calls", "invoke"))
_NAME_RUN = Run(r"[\w.\-]")
_KEYS = tuple(sorted({*ENVELOPE_KEYS, "tool_calls"}))
_ENVELOPE: Seq = ("{", WS, alt('"', "'"), alt(*_KEYS), alt('"', "'"))
_FENCE: Seq = ("```", Opt((alt("json", "JSON", "jsonc"),)), WS)

FORMATS: tuple[LeakFormat, ...] = (
    LeakFormat(
        "hermes",
        "Hermes 2/3, Qwen2.5/3, QwQ, ERNIE 4.5, MiMo (JSON), TNG R1T2",
        '<tool_call>{"name": "f", "arguments": {...}}</tool_call>',
        (M.TOOL_CALL_OPEN,),
        (
            _TOOL_CALL,
            # Drift: the bare object on its own line, and `<tool>`/`<tools>`/`<json>` wrappers.
            _o(
                ("{", WS, '"', alt("name", "type"), '"', WS, ":"),
                tagged.scan_bare_json,
                anchors=(('"name"', json_start), ('"type"', json_start)),
                line_start=True,
                anywhere=False,
            ),
            _o(("<", alt("tool>", "tools>", "json>")), tagged.scan_wrapper, anywhere=False),
        ),
        vllm=("hermes", "qwen2", "ernie45", "tng_r1t2"),
        sglang=("hermes", "qwen25", "qwen", "tng_r1t2", "trinity"),
    ),
    LeakFormat(
        "qwen3_coder",
        "Qwen3-Coder, Qwen3.5/3.6, MiMo, Step 3.5, BerryLM",
        "<tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>",
        (M.TOOL_CALL_OPEN, "<function=", "<parameter="),
        (_TOOL_CALL, _o(_FUNCTION_TAG, tagged.scan_function)),
        vllm=("qwen3_coder", "qwen3_xml", "mimo"),
        sglang=("qwen3_coder", "mimo", "step3p5"),
    ),
    LeakFormat(
        "llama31_function",
        'Llama 3.1 custom tools, and the `<function name="f">` drift of any model',
        '<function=f>{"k": "v"}</function>  or  <function name="f">{"k": "v"}</function>',
        ("<function=", "<function name="),
        (_o(_FUNCTION_TAG, tagged.scan_function),),
    ),
    LeakFormat(
        "seed_oss",
        "Seed-OSS",
        "<seed:tool_call><function=f><parameter=k>v</parameter></function></seed:tool_call>",
        (M.SEED_TOOL_CALL_OPEN, "<function=", "<parameter="),
        (_o(M.SEED_TOOL_CALL_OPEN, tagged.scan_seed),),
        vllm=("seed_oss",),
        sglang=("seed_oss",),
    ),
    LeakFormat(
        "llama3_json",
        "Llama 3.x, Llama 4 (JSON)",
        '<|python_tag|>{"name": "f", "parameters": {...}}; {...}',
        (M.PYTHON_TAG,),
        (_o(M.PYTHON_TAG, special_tokens.scan_python_tag),),
        vllm=("llama3_json", "llama4_json"),
        sglang=("llama3", "llama4"),
    ),
    LeakFormat(
        "pythonic",
        "Llama 3.2/4 and others",
        '[f(a=1, b="x"), g()]  or  <|python_start|>[f(a=1)]<|python_end|>',
        (M.PYTHON_START,),
        (_o(M.PYTHON_START, special_tokens.scan_python_start),),
        whole=(("[", WS, Run(r"[^\W\d]"), Run(r"[\w.]", 0), WS, "("),),
        vllm=("pythonic", "llama4_pythonic"),
        sglang=("pythonic",),
    ),
    LeakFormat(
        "olmo3",
        "OLMo 3",
        "<function_calls>f(a=1)\ng(b=true)</function_calls>",
        (M.FUNCTION_CALLS_OPEN,),
        (_o(M.FUNCTION_CALLS_OPEN, tagged.scan_function_calls),),
        vllm=("olmo3",),
    ),
    LeakFormat(
        "mistral",
        "Mistral, Magistral, Devstral",
        f"{M.MISTRAL_TOOL_CALLS}[{{...}}]  or  {M.MISTRAL_TOOL_CALLS}f{M.MISTRAL_ARGS}{{...}}  or  "
        f"{M.MISTRAL_TOOL_CALLS}f{M.MISTRAL_CALL_ID}id{M.MISTRAL_ARGS}{{...}}  or (stripped) "
        f"{M.MISTRAL_TOOL_CALLS}f{{...}}",
        (M.MISTRAL_TOOL_CALLS, M.MISTRAL_ARGS, M.MISTRAL_CALL_ID),
        (_o(M.MISTRAL_TOOL_CALLS, special_tokens.scan_mistral),),
        vllm=("mistral",),
        sglang=("mistral",),
    ),
    LeakFormat(
        "deepseek_v3",
        "DeepSeek V3, R1",
        f"{M.DS_CALLS_BEGIN}{M.DS_CALL_BEGIN}function{M.DS_SEP}f\n```json\n{{...}}\n```"
        f"{M.DS_CALL_END}{M.DS_CALLS_END}",
        (M.DS_CALLS_BEGIN, M.DS_CALL_BEGIN, M.DS_SEP),
        (
            _o(M.DS_CALLS_BEGIN, special_tokens.scan_deepseek),
            _o(M.DS_CALL_BEGIN, special_tokens.scan_deepseek),
        ),
        vllm=("deepseek_v3",),
        sglang=("deepseekv3",),
    ),
    LeakFormat(
        "deepseek_v31",
        "DeepSeek V3.1, V3.2-Exp",
        f"{M.DS_CALLS_BEGIN}{M.DS_CALL_BEGIN}f{M.DS_SEP}{{...}}{M.DS_CALL_END}{M.DS_CALLS_END}",
        (M.DS_CALLS_BEGIN, M.DS_CALL_BEGIN, M.DS_SEP),
        (_o(M.DS_CALLS_BEGIN, special_tokens.scan_deepseek),),
        vllm=("deepseek_v31",),
        sglang=("deepseekv31",),
    ),
    LeakFormat(
        "deepseek_dsml",
        "DeepSeek V3.2, V4, V4.1 (` calls`, ` invoke`, ` parameter`: the tag names lead with a "
        "space; also the ASCII `< | DSML | invoke` leak and the stripped "
        "`<function_calls><invoke>` form)",
        f'{M.DSML_FUNCTION_CALLS}{M.DSML_INVOKE} name="f">{M.DSML_PARAMETER} name="k" '
        'string="true">v</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>',
        (M.DSML_FUNCTION_CALLS, M.DSML_TOOL_CALLS, M.DSML_INVOKE, M.DSML_ASCII_INVOKE, "DSML"),
        (
            _o(
                ("<", WS, _BAR, *_DSML_TAIL),
                special_tokens.scan_dsml,
                anchors=(("DSML", dsml_start),),
            ),
            _o((_BAR, *_DSML_TAIL), special_tokens.scan_dsml, anchors=(("DSML", dsml_start),)),
        ),
        vllm=("deepseek_v32", "deepseek_v4"),
        sglang=("deepseekv32", "deepseekv4", "deepseekv41"),
    ),
    LeakFormat(
        "kimi_k2",
        "Kimi K2",
        f"{M.KIMI_SECTION_BEGIN}{M.KIMI_CALL_BEGIN}functions.f:0{M.KIMI_ARGUMENT_BEGIN}{{...}}"
        f"{M.KIMI_CALL_END}{M.KIMI_SECTION_END}  (or the singular {M.KIMI_SECTION_BEGIN_SINGULAR}"
        f"...{M.KIMI_SECTION_END_SINGULAR})",
        (M.KIMI_SECTION_BEGIN, M.KIMI_SECTION_BEGIN_SINGULAR, M.KIMI_CALL_BEGIN),
        (
            _o(M.KIMI_SECTION_BEGIN, special_tokens.scan_kimi),
            _o(M.KIMI_SECTION_BEGIN_SINGULAR, special_tokens.scan_kimi),
            _o(M.KIMI_CALL_BEGIN, special_tokens.scan_kimi),
        ),
        vllm=("kimi_k2",),
        sglang=("kimi_k2",),
    ),
    LeakFormat(
        "glm45",
        "GLM-4.5, 4.6, 4.7, 5.3-Flash, Ling 3, poolside Laguna (poolside_v1), Spark 2.5 / 3",
        f"<tool_call>f\n{M.GLM_ARG_KEY}k</arg_key>\n{M.GLM_ARG_VALUE}v</arg_value>\n</tool_call>",
        (M.TOOL_CALL_OPEN, M.GLM_ARG_KEY, M.GLM_ARG_VALUE),
        (_TOOL_CALL,),
        vllm=("glm45", "glm47", "poolside_v1"),
        sglang=("glm", "glm45", "glm47", "ling3", "poolside_v1", "spark25"),
    ),
    LeakFormat(
        "granite",
        "Granite 3.0 / 3.1, granite-20b-fc (and the `<function_call>` wrapper drift)",
        '<|tool_call|>[{...}]  or  <tool_call>[{...}]  or  <function_call> {"name": ...}',
        (M.GRANITE_TOOL_CALL, M.TOOL_CALL_OPEN, M.FUNCTION_CALL_OPEN),
        (
            _o(M.GRANITE_TOOL_CALL, special_tokens.scan_granite_token),
            _TOOL_CALL,
            _o(M.FUNCTION_CALL_OPEN, tagged.scan_function_call),
        ),
        vllm=("granite", "granite-20b-fc"),
    ),
    LeakFormat(
        "internlm",
        "InternLM 2.5",
        f'{M.INTERNLM_ACTION_START}{M.INTERNLM_PLUGIN}\n{{"name": "f", "parameters": {{...}}}}'
        f"{M.INTERNLM_ACTION_END}",
        (M.INTERNLM_ACTION_START, M.INTERNLM_PLUGIN),
        (_o(M.INTERNLM_ACTION_START, special_tokens.scan_internlm),),
        vllm=("internlm",),
        sglang=("internlm", "interns1"),
    ),
    LeakFormat(
        "jamba",
        "Jamba, Hunyuan A13B",
        '<tool_calls>[{"name": "f", "arguments": {...}}]</tool_calls>',
        (M.TOOL_CALLS_OPEN,),
        (_o(M.TOOL_CALLS_OPEN, tagged.scan_tool_calls),),
        vllm=("jamba", "hunyuan_a13b"),
        sglang=("hunyuan",),
    ),
    LeakFormat(
        "minimax_m1",
        "MiniMax M1",
        '<tool_calls>\n{"name": "f", "arguments": {...}}\n{...}\n</tool_calls>',
        (M.TOOL_CALLS_OPEN,),
        (_o(M.TOOL_CALLS_OPEN, tagged.scan_tool_calls),),
        vllm=("minimax",),
    ),
    LeakFormat(
        "minimax_m2",
        "MiniMax M2, M2.5",
        '<minimax:tool_call>\n<invoke name="f">\n<parameter name="k">v</parameter>\n</invoke>\n'
        "</minimax:tool_call>",
        (M.MINIMAX_TOOL_CALL_OPEN, "<invoke name="),
        (
            _o(M.MINIMAX_TOOL_CALL_OPEN, tagged.scan_minimax),
            _o(("<invoke", WS1, "name", WS, "="), tagged.scan_minimax),
        ),
        vllm=("minimax_m2",),
        sglang=("minimax-m2",),
    ),
    LeakFormat(
        "step3",
        "Step-3, Step DeepResearch",
        f'{M.STEP3_CALLS_BEGIN}{M.STEP3_CALL_BEGIN}function{M.STEP3_SEP}<steptml:invoke name="f">'
        '<steptml:parameter name="k">v</steptml:parameter></steptml:invoke>'
        f"{M.STEP3_CALL_END}{M.STEP3_CALLS_END}  or  {M.STEPTML_TOOLCALL_OPEN}<steptml:invoke ...>"
        f"...{M.STEPTML_TOOLCALL_CLOSE}",
        (M.STEP3_CALLS_BEGIN, M.STEP3_CALL_BEGIN, M.STEP3_INVOKE, M.STEPTML_TOOLCALL_OPEN),
        (
            _o(M.STEP3_CALLS_BEGIN, special_tokens.scan_step3),
            _o(M.STEP3_CALL_BEGIN, special_tokens.scan_step3),
            _o(M.STEP3_INVOKE, special_tokens.scan_step3),
            _o(M.STEPTML_TOOLCALL_OPEN, tagged.scan_steptml_toolcall),
        ),
        vllm=("step3", "step_deepresearch"),
        sglang=("step3",),
    ),
    LeakFormat(
        "phi4_mini",
        "Phi-4-mini",
        'functools[{"name": "f", "arguments": {...}}]',
        (M.PHI4_FUNCTOOLS,),
        (_o(M.PHI4_FUNCTOOLS, special_tokens.scan_phi4),),
        vllm=("phi4_mini_json",),
    ),
    LeakFormat(
        "xlam",
        "xLAM",
        '[{"name": "f", "arguments": {...}}] (bare, after </think>, or in a ```json fence)',
        (),
        whole=(("[", WS, *_ENVELOPE), (*_FENCE, "[", WS, *_ENVELOPE)),
        vllm=("xlam",),
        sglang=("json_array",),
    ),
    LeakFormat(
        "harmony",
        "gpt-oss",
        f"{M.HARMONY_START}assistant{M.HARMONY_CHANNEL}commentary {M.HARMONY_RECIPIENT}f "
        f"{M.HARMONY_CONSTRAIN}json{M.HARMONY_MESSAGE}{{...}}{M.HARMONY_CALL}  or (stripped) "
        f"assistantcommentary {M.HARMONY_RECIPIENT}f json{{...}}",
        (M.HARMONY_RECIPIENT,),
        (
            _o(
                (
                    Opt((M.HARMONY_START, WS)),
                    Opt(("assistant", WS)),
                    Opt((M.HARMONY_CHANNEL, WS)),
                    Opt(("commentary", WS)),
                    M.HARMONY_RECIPIENT,
                ),
                special_tokens.scan_harmony,
                anchors=((M.HARMONY_RECIPIENT, harmony_start),),
            ),
        ),
        vllm=("openai",),
        sglang=("gpt-oss",),
    ),
    LeakFormat(
        "functiongemma",
        "FunctionGemma",
        "<start_function_call>call:f{k:<escape>v<escape>}<end_function_call>",
        (M.GEMMA_CALL_OPEN,),
        (_o(M.GEMMA_CALL_OPEN, gemma.scan_gemma),),
        vllm=("functiongemma",),
    ),
    LeakFormat(
        "gemma4",
        "Gemma 4",
        '<|tool_call>call:f{k:<|"|>v<|"|>}<tool_call|>',
        (M.GEMMA4_CALL_OPEN,),
        (_o(M.GEMMA4_CALL_OPEN, gemma.scan_gemma4),),
        sglang=("gemma4",),
    ),
    LeakFormat(
        "cohere_command",
        "Cohere Command R7B, Command A",
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}]'
        "<|END_ACTION|>",
        (M.COHERE_ACTION_START,),
        (_o(M.COHERE_ACTION_START, special_tokens.scan_cohere),),
        vllm=("cohere_command3", "cohere_command4"),
        sglang=("cohere_command4",),
    ),
    LeakFormat(
        "apertus",
        "Apertus",
        '<|tools_prefix|>[{"f": {...}}]<|tools_suffix|>',
        (M.APERTUS_PREFIX,),
        (_o(M.APERTUS_PREFIX, special_tokens.scan_apertus),),
        vllm=("apertus",),
        sglang=("apertus2509",),
    ),
    LeakFormat(
        "lfm2",
        "LFM2 (Liquid), MiniCPM3",
        '<|tool_call_start|>[f(a=1)]<|tool_call_end|>  or  <|tool_call_start|>[{"name": ...}]'
        "<|tool_call_end|>",
        (M.LFM2_CALL_START,),
        (_o(M.LFM2_CALL_START, special_tokens.scan_lfm2),),
        vllm=("minicpm",),
        sglang=("lfm2",),
    ),
    LeakFormat(
        "longcat",
        "LongCat-Flash",
        '<longcat_tool_call>{"name": "f", "arguments": {...}}</longcat_tool_call>',
        (M.LONGCAT_OPEN,),
        (_o(M.LONGCAT_OPEN, special_tokens.scan_longcat),),
        vllm=("longcat",),
        sglang=("longcat",),
    ),
    LeakFormat(
        "gigachat3",
        "GigaChat 3, 3.1",
        'function call<|role_sep|>\n{"name": "f", "arguments": {...}}  or (3.1) '
        '<|function_call|>{"name": "f", "arguments": {...}}',
        (M.GIGACHAT_CALL, M.GIGACHAT31_CALL),
        (
            _o(M.GIGACHAT_CALL, special_tokens.scan_gigachat),
            _o(M.GIGACHAT31_CALL, special_tokens.scan_gigachat),
        ),
        vllm=("gigachat3",),
        sglang=("gigachat3",),
    ),
    LeakFormat(
        "kimi_k3",
        "Kimi K3",
        f'{M.KIMI_K3_TOOLS_OPEN}{M.KIMI_K3_CALL_OPEN} tool="f" index="1"<|sep|>'
        f'{M.KIMI_K3_ARG_OPEN} key="k" type="string"<|sep|>v{M.KIMI_K3_ARG_CLOSE}'
        f"{M.KIMI_K3_CALL_CLOSE}{M.KIMI_K3_TOOLS_CLOSE}",
        (M.KIMI_K3_TOOLS_OPEN, M.KIMI_K3_CALL_OPEN, M.KIMI_K3_ARG_OPEN),
        (
            _o(M.KIMI_K3_TOOLS_OPEN, census.scan_kimi_k3),
            _o((M.KIMI_K3_CALL_OPEN, WS1, "tool", WS, "="), census.scan_kimi_k3),
        ),
        vllm=("kimi_k3",),
        sglang=("kimi_k3",),
    ),
    LeakFormat(
        "minimax_m3",
        "MiniMax M3",
        f'{M.MINIMAX_M3_NS}<tool_call>{M.MINIMAX_M3_NS}<invoke name="f">{M.MINIMAX_M3_NS}<k>v'
        f"{M.MINIMAX_M3_NS}</k>{M.MINIMAX_M3_NS}</invoke>{M.MINIMAX_M3_NS}</tool_call>",
        (M.MINIMAX_M3_NS,),
        (_o((M.MINIMAX_M3_NS, WS, "<tool_call>"), census.scan_minimax_m3),),
        vllm=("minimax_m3",),
        sglang=("minimax-m3",),
    ),
    LeakFormat(
        "dots",
        "dots.llm",
        f'{M.DOTS_CALL_OPEN}\n<invoke name="f">\n<parameter name="k">v</parameter>\n</invoke>\n'
        f'{M.DOTS_CALL_CLOSE}  or  {M.DOTS_CALL_OPEN}{{"name": "f", "arguments": {{...}}}}'
        f"{M.DOTS_CALL_CLOSE}",
        (M.DOTS_CALL_OPEN,),
        (_o(M.DOTS_CALL_OPEN, census.scan_dots),),
        vllm=("dots",),
        sglang=("dots",),
    ),
    LeakFormat(
        "inkling",
        "Inkling",
        f'{M.INKLING_HEADER}f{M.INKLING_INVOKE_JSON}{{"name": "f", "args": {{...}}}}'
        f"{M.INKLING_END}",
        (M.INKLING_INVOKE_JSON,),
        (
            _o(
                (M.INKLING_HEADER, Run(r"[^<\n]", 0), M.INKLING_INVOKE_JSON),
                census.scan_inkling,
            ),
            _o(M.INKLING_INVOKE_JSON, census.scan_inkling),
        ),
        vllm=("inkling",),
        sglang=("inkling",),
    ),
    LeakFormat(
        "iquest_q1",
        "IQuest-Q1",
        f"{M.IQUEST_CALL_OPEN}f<arg_key>k</arg_key><arg_value>v</arg_value>{M.IQUEST_CALL_CLOSE}",
        (M.IQUEST_CALL_OPEN,),
        (_o(M.IQUEST_CALL_OPEN, census.scan_iquest),),
        sglang=("iquest_q1",),
    ),
    LeakFormat(
        "k2_horizon",
        "K2 Horizon (K2-v3)",
        f"{M.K2H_CALLS_OPEN}{M.K2H_CALL_OPEN}f{M.K2H_ARG_KEY}k</ifm|arg_key>"
        f"<ifm|arg_value>v</ifm|arg_value>{M.K2H_CALL_CLOSE}{M.K2H_CALLS_CLOSE}  (or a JSON "
        "body; an `<ifm|arg_type>` may sit between key and value)",
        (M.K2H_CALLS_OPEN, M.K2H_CALL_OPEN, M.K2H_ARG_KEY),
        (
            _o(M.K2H_CALLS_OPEN, census.scan_k2_horizon),
            _o(M.K2H_CALL_OPEN, census.scan_k2_horizon),
        ),
        vllm=("k2_horizon",),
        sglang=("k2_horizon",),
    ),
    LeakFormat(
        "telechat4",
        "TeleChat4, Xing 4.0, XingChen4",
        f"<tool_call>f{M.PARAM_KEY}k</param_key>{M.PARAM_VALUE}v</param_value></tool_call>  "
        "(their JSON and `f{...}` bodies read as Hermes / GLM)",
        (M.TOOL_CALL_OPEN, M.PARAM_KEY, M.PARAM_VALUE),
        (_TOOL_CALL,),
    ),
    LeakFormat(
        "gigachat35",
        "GigaChat 3.5",
        f'{M.GCML_TOOL_CALLS}{M.GCML_INVOKE} name="f"><｜GCML｜parameter name="k" string="true">'
        f"v</｜GCML｜parameter></｜GCML｜invoke>{M.GCML_TOOL_CALLS_CLOSE}",
        (M.GCML_TOOL_CALLS, M.GCML_INVOKE),
        (
            _o(M.GCML_TOOL_CALLS, census.scan_gcml),
            _o(M.GCML_INVOKE, census.scan_gcml),
        ),
        vllm=("gigachat35",),
        sglang=("gigachat35",),
    ),
    LeakFormat(
        "minicpm5",
        "MiniCPM 4 / 5 (XML)",
        '<function name="f"><param name="k">v</param></function>',
        ("<param name=",),
        (_o(_FUNCTION_TAG, tagged.scan_function),),
        vllm=("minicpm5",),
        sglang=("minicpm5",),
    ),
    LeakFormat(
        "muse_glimmer",
        "Muse Glimmer",
        f'{M.ATEM_FUNCTION_CALLS}\n{M.ATEM_INVOKE} name="f"><atem:parameter name="k">v'
        f"</atem:parameter></atem:invoke>\n{M.ATEM_FUNCTION_CALLS_CLOSE}",
        (M.ATEM_FUNCTION_CALLS, M.ATEM_INVOKE),
        (
            _o(M.ATEM_FUNCTION_CALLS, census.scan_atem),
            _o((M.ATEM_INVOKE, WS1, "name", WS, "="), census.scan_atem),
        ),
        vllm=("muse_glimmer",),
        sglang=("muse",),
    ),
    LeakFormat(
        "plamo3",
        "PLaMo 3",
        f"{M.PLAMO_REQUESTS_OPEN}{M.PLAMO_REQUEST_OPEN}{M.PLAMO_NAME_OPEN}f{M.PLAMO_NAME_CLOSE}"
        f"{M.PLAMO_ARGS_OPEN}<|plamo:constrain|>json<|plamo:msg|>{{...}}{M.PLAMO_ARGS_CLOSE}"
        f"{M.PLAMO_REQUEST_CLOSE}{M.PLAMO_REQUESTS_CLOSE}",
        (M.PLAMO_REQUESTS_OPEN, M.PLAMO_REQUEST_OPEN),
        (
            _o(M.PLAMO_REQUESTS_OPEN, census.scan_plamo),
            _o(M.PLAMO_REQUEST_OPEN, census.scan_plamo),
        ),
        vllm=("plamo3",),
        sglang=("plamo3",),
    ),
    LeakFormat(
        "generic_json",
        "any model told to answer with JSON",
        '{"name": ..., "arguments"|"parameters"|"input": ...} or {"function": {...}} or a list',
        (),
        whole=(_ENVELOPE, (*_FENCE, *_ENVELOPE)),
        sglang=("json",),
    ),
)

FORMAT_BY_FAMILY: dict[str, LeakFormat] = {f.family: f for f in FORMATS}

# -- derived tables: the only other place openers appear, and they come from FORMATS ---------------


def _unique_openers() -> tuple[Opener, ...]:
    """Every opener once (shared ones such as `<tool_call>` are listed by several families),
    longest leading literal first so that `<function_calls>` is tried before `<function`."""
    seen: dict[Seq, Opener] = {}
    for fmt in FORMATS:
        for opener in fmt.openers:
            known = seen.setdefault(opener.parts, opener)
            if known.scanner is not opener.scanner:
                raise ValueError(f"two scanners for one opener: {opener.parts!r}")
    return tuple(sorted(seen.values(), key=lambda o: -len(leading_literal(o.parts))))


OPENERS: tuple[Opener, ...] = _unique_openers()

OPENER: re.Pattern[str] = re.compile(
    "|".join(f"(?P<o{i}>{to_regex(o.parts)})" for i, o in enumerate(OPENERS))
)
"""Any opener, matched at a candidate position; `m.lastgroup` names which (`o<index>`)."""

ANCHORS: tuple[tuple[str, Adjust], ...] = tuple(
    dict.fromkeys(anchor for o in OPENERS for anchor in o.anchor_list())
)
"""Literals the detector finds with `str.rfind`, and how to get from each to an opener's start."""

WHOLE_STARTS: tuple[Seq, ...] = tuple(seq for f in FORMATS for seq in f.whole)
"""Starts of the marker-less shapes that count only as the whole visible message."""

WHOLE_LEADS: str = "".join(sorted({leading_literal(seq)[:1] for seq in WHOLE_STARTS}))
"""The characters such a message can start with."""


def opener_for(m: re.Match[str]) -> Opener:
    """Which opener an `OPENER` match is."""
    assert m.lastgroup is not None
    return OPENERS[int(m.lastgroup[1:])]


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

__all__ = [
    "ANCHORS",
    "DRIFTS",
    "DRIFT_BY_ID",
    "FORMATS",
    "FORMAT_BY_FAMILY",
    "OPENER",
    "OPENERS",
    "WHOLE_LEADS",
    "WHOLE_STARTS",
    "WS",
    "Adjust",
    "Alt",
    "Drift",
    "LeakFormat",
    "Opener",
    "opener_for",
]
