// Real Node clients against toolwire, as their users run them by default. Run by
// tests/integration/test_node_sdks.py: `node --input-type=module < this` with its working
// directory in .tools/aisdk (where .ci/install-aisdk put the pinned packages), the gateway's
// base URL in TOOLWIRE_BASE_URL and the scenario's name in SCENARIO. Prints one JSON line
// with what the client saw; a client error exits non-zero with its message.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import OpenAI from "openai";
import { z } from "zod";

const baseURL = process.env.TOOLWIRE_BASE_URL;
const scenario = process.env.SCENARIO;

const lookup = tool({
  description: "The weather in a city.",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => (city === "Paris" ? "sunny, 21 C" : "warm, 27 C"),
});

// The AI SDK's default provider: the Responses API, store on, earlier items as references.
// `reasoning`: told the model reasons (`forceReasoning`, as for any reasoning model it does not
// know by name), asking for summaries, which it shows as the reasoning.
async function aiSdk(streaming, reasoning) {
  const fetchLogged = async (url, init) => {
    if (process.env.SDK_DEBUG) console.error(`${url} ${init?.body}`);
    return await fetch(url, init);
  };
  const openai = createOpenAI({ baseURL, apiKey: "sk-unused", fetch: fetchLogged });
  const model = openai("scripted-model");
  const providerOptions = reasoning
    ? { openai: { forceReasoning: true, reasoningSummary: "auto" } }
    : {};
  const run = async (messages) => {
    const options = { model, messages, tools: { lookup }, stopWhen: stepCountIs(4), providerOptions };
    if (!streaming) return await generateText(options);
    const result = streamText({ ...options, onError: ({ error }) => { throw error; } });
    await result.consumeStream({ onError: (error) => { throw error; } });
    return {
      text: await result.text,
      reasoningText: await result.reasoningText,
      steps: await result.steps,
      response: await result.response,
    };
  };
  const messages = [{ role: "user", content: "Weather in Paris?" }];
  const first = await run(messages);
  messages.push(...first.response.messages, { role: "user", content: "And in Rome?" });
  const second = await run(messages);
  return {
    texts: [first.text, second.text],
    reasoning: [first.reasoningText ?? "", second.reasoningText ?? ""],
    steps: [first.steps.length, second.steps.length],
  };
}

// The openai Node SDK's stream helper, over a tool round trip with previous_response_id.
async function openaiStream() {
  const client = new OpenAI({ baseURL, apiKey: "sk-unused", maxRetries: 0 });
  const tools = [
    {
      type: "function",
      name: "lookup",
      description: "The weather in a city.",
      parameters: { type: "object", properties: { city: { type: "string" } } },
      strict: false,
    },
  ];
  const reasoningDeltas = [];
  const stream = client.responses.stream({
    model: "scripted-model",
    input: "Weather in Paris?",
    tools,
    reasoning: { summary: "auto" },
  });
  stream.on("response.reasoning_text.delta", (event) => reasoningDeltas.push(event.delta));
  const first = await stream.finalResponse();
  const call = first.output.find((item) => item.type === "function_call");
  const second = await client.responses
    .stream({
      model: "scripted-model",
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny, 21 C" }],
      tools,
    })
    .finalResponse();
  return {
    first: first.output.map((item) => item.type),
    reasoning: first.output[0].content?.[0]?.text ?? null,
    summary: first.output[0].summary?.[0]?.text ?? null,
    streamedReasoning: reasoningDeltas.join(""),
    text: second.output_text,
  };
}

const scenarios = {
  "aisdk-generate": () => aiSdk(false, false),
  "aisdk-stream": () => aiSdk(true, false),
  "aisdk-generate-reasoning": () => aiSdk(false, true),
  "aisdk-stream-reasoning": () => aiSdk(true, true),
  "openai-stream": openaiStream,
};

try {
  console.log(JSON.stringify(await scenarios[scenario]()));
} catch (error) {
  console.error(`${scenario} failed: ${error?.stack ?? error}`);
  if (error?.responseBody) console.error(`response body: ${error.responseBody}`);
  process.exit(1);
}
