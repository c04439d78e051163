"""The exact markers of tool calls written as text, each written once.

Every literal token a scanner, the registry or the hold-back needs is spelled here, so the
fullwidth `｜` and `▁` characters some families use are typed exactly once. `END_TOKENS` are the
end-of-turn tokens a server may leave after a leaked call.
"""

from __future__ import annotations

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
    "<|END_OF_TURN_TOKEN|>",
)

# Formats added by the census against vLLM's tool parsers and SGLang's detectors.
COHERE_ACTION_START = "<|START_ACTION|>"
COHERE_ACTION_END = "<|END_ACTION|>"
FUNCTION_CLOSE = "</function>"
APERTUS_PREFIX = "<|tools_prefix|>"
APERTUS_SUFFIX = "<|tools_suffix|>"
LFM2_CALL_START = "<|tool_call_start|>"
LFM2_CALL_END = "<|tool_call_end|>"
GEMMA4_CALL_OPEN = "<|tool_call>"
GEMMA4_CALL_CLOSE = "<tool_call|>"
GEMMA4_STRING = '<|"|>'
LONGCAT_OPEN = "<longcat_tool_call>"
LONGCAT_CLOSE = "</longcat_tool_call>"
GIGACHAT_CALL = "function call<|role_sep|>"
GIGACHAT31_CALL = "<|function_call|>"
STEPTML_TOOLCALL_OPEN = "<steptml:toolcall>"
STEPTML_TOOLCALL_CLOSE = "</steptml:toolcall>"

# Formats added by the second census (SGLang detectors read one by one, vLLM's registry re-listed).
KIMI_K3_TOOLS_OPEN = "<|open|>tools<|sep|>"
KIMI_K3_TOOLS_CLOSE = "<|close|>tools<|sep|>"
KIMI_K3_CALL_OPEN = "<|open|>call"
KIMI_K3_CALL_CLOSE = "<|close|>call<|sep|>"
KIMI_K3_ARG_OPEN = "<|open|>argument"
KIMI_K3_ARG_CLOSE = "<|close|>argument<|sep|>"
KIMI_K3_MESSAGE_CLOSE = "<|close|>message<|sep|>"
MINIMAX_M3_NS = "]<]minimax[>["
DOTS_CALL_OPEN = "<dots_function_call>"
DOTS_CALL_CLOSE = "</dots_function_call>"
INKLING_HEADER = "<|message_model|>"
INKLING_INVOKE_JSON = "<|content_invoke_tool_json|>"
INKLING_END = "<|end_message|>"
IQUEST_CALL_OPEN = "<iquest_tool_call>"
IQUEST_CALL_CLOSE = "</iquest_tool_call>"
K2H_CALLS_OPEN = "<ifm|tool_calls>"
K2H_CALLS_CLOSE = "</ifm|tool_calls>"
K2H_CALL_OPEN = "<ifm|tool_call>"
K2H_CALL_CLOSE = "</ifm|tool_call>"
K2H_ARG_KEY = "<ifm|arg_key>"
GCML_TOOL_CALLS = "<｜GCML｜tool_calls>"
GCML_TOOL_CALLS_CLOSE = "</｜GCML｜tool_calls>"
GCML_INVOKE = "<｜GCML｜invoke"
PARAM_KEY = "<param_key>"
PARAM_VALUE = "<param_value>"
ATEM_FUNCTION_CALLS = "<atem:function_calls>"
ATEM_FUNCTION_CALLS_CLOSE = "</atem:function_calls>"
ATEM_INVOKE = "<atem:invoke"
PLAMO_REQUESTS_OPEN = "<|plamo:begin_tool_requests:plamo|>"
PLAMO_REQUESTS_CLOSE = "<|plamo:end_tool_requests:plamo|>"
PLAMO_REQUEST_OPEN = "<|plamo:begin_tool_request:plamo|>"
PLAMO_REQUEST_CLOSE = "<|plamo:end_tool_request:plamo|>"
PLAMO_NAME_OPEN = "<|plamo:begin_tool_name:plamo|>"
PLAMO_NAME_CLOSE = "<|plamo:end_tool_name:plamo|>"
PLAMO_ARGS_OPEN = "<|plamo:begin_tool_arguments:plamo|>"
PLAMO_ARGS_CLOSE = "<|plamo:end_tool_arguments:plamo|>"
