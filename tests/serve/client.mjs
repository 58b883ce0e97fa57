// Drives `staticlm serve` with the official openai npm client:
// a non-streamed and a streamed chat (greedy: the same text), a chat with
// logprobs, a chat with n = 2, a text completion, and an error surfaced as an APIError. Prints one JSON line.
// usage: node client.mjs BASE_URL
import OpenAI from 'openai';

const base = process.argv[2];
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'not-needed', maxRetries: 0, timeout: 60000 });
const messages = [
  { role: 'system', content: 'You are a storyteller.' },
  { role: 'user', content: 'Once upon a time' },
];
const fail = (m) => { console.log(JSON.stringify({ ok: false, error: m })); process.exit(1); };

const models = await client.models.list();
if (!models.data.length || typeof models.data[0].id !== 'string') fail('models.list returned no model');

const r = await client.chat.completions.create({ model: models.data[0].id, messages, temperature: 0, max_tokens: 32 });
const text = r.choices[0].message.content;
if (typeof text !== 'string' || !text.length) fail('empty non-streamed reply');
if (r.choices[0].message.role !== 'assistant') fail('role is not assistant');
if (!(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens)) fail('bad usage');
if (!['stop', 'length'].includes(r.choices[0].finish_reason)) fail('bad finish_reason');

const s = await client.chat.completions.create({ model: 'x', messages, temperature: 0, max_tokens: 32, stream: true, stream_options: { include_usage: true } });
let streamed = '', chunks = 0, finish = null, usage = null;
for await (const ch of s) {
  chunks++;
  if (ch.usage) usage = ch.usage;
  const c = ch.choices[0];
  if (!c) continue;
  if (c.delta && c.delta.content) streamed += c.delta.content;
  if (c.finish_reason) finish = c.finish_reason;
}
if (streamed !== text) fail(`streamed text differs: ${JSON.stringify(streamed)} vs ${JSON.stringify(text)}`);
if (chunks < 3 || !finish) fail('stream lacked chunks or a finish_reason');
if (!usage || usage.completion_tokens !== r.usage.completion_tokens) fail('stream usage missing or different');

const lp = await client.chat.completions.create({ model: 'x', messages, temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 3 });
const lc = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
if (!Array.isArray(lc) || lc.length !== lp.usage.completion_tokens) fail('chat logprobs: not one per token');
if (lc.map((e) => e.token).join('') !== lp.choices[0].message.content) fail('chat logprobs: tokens are not the reply');
if (!lc.every((e) => e.logprob <= 0 && e.top_logprobs.length === 3 && e.top_logprobs[0].token === e.token)) fail('chat logprobs: greedy token not the top one');

const n2 = await client.chat.completions.create({ model: 'x', messages, temperature: 1, seed: 5, max_tokens: 8, n: 2 });
if (n2.choices.length !== 2 || n2.choices.some((ch, i) => ch.index !== i || typeof ch.message.content !== 'string')) fail('n=2: not two choices indexed 0 and 1');

const c = await client.completions.create({ model: 'x', prompt: 'Once upon a time', temperature: 0, max_tokens: 16, stop: ['.'] });
if (typeof c.choices[0].text !== 'string' || c.choices[0].text.includes('.')) fail('completion text wrong');

let status = 0;
try {
  await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'word '.repeat(2000) }] });
} catch (e) {
  status = e.status;
  if (!(e instanceof OpenAI.APIError) || e.code !== 'context_length_exceeded') fail('over-capacity error not an APIError with code context_length_exceeded');
}
if (status !== 400) fail(`over-capacity prompt gave status ${status}`);

console.log(JSON.stringify({ ok: true, text, chunks, completion: c.choices[0].text }));
