import type { ServerResponse } from 'node:http'
import {
  type ChatRequestBody,
  countTokens,
  type ErrorDetail,
  type ModelProtocol,
  openEventStream,
  type ScriptedUsage,
  type StreamReply,
  writeJson,
} from './script.js'

/**
 * The Chat Completions protocol of the test server, as the public API
 * reference describes it: SSE `chat.completion.chunk` frames (`data: {...}`)
 * ending with `data: [DONE]`, tool call deltas carrying
 * index/id/function.name and argument fragments, usage in a final chunk with
 * empty `choices` (`stream_options.include_usage`), `{ error: {...} }`
 * bodies.
 */

/** A usage object exactly as the server sent it in a final chunk. */
export interface ChatUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly prompt_tokens_details: { readonly cached_tokens: number }
  readonly completion_tokens_details: { readonly reasoning_tokens: number }
}

/**
 * The server's own token count of a Chat request, independent of any estimate
 * dsh makes: every word, digit and punctuation mark of the messages' text
 * (tool call names and arguments included) is one token, plus 3 per message.
 */
export function serverTokenCount(body: ChatRequestBody): number {
  let tokens = 0
  for (const message of body.messages) {
    const text = `${typeof message.content === 'string' ? message.content : JSON.stringify(message.content ?? '')}${JSON.stringify(message.tool_calls ?? [])}`
    tokens += 3 + countTokens(text)
  }
  return tokens
}

/**
 * The usage of a reply that scripts none, from the request and the reply:
 * the prompt is 50 tokens plus 10 per message, of which 40 are cached once
 * the conversation has more than one message (a repeated prefix); the
 * completion is 5 plus one per content piece, 3 per tool call and 2 per
 * reasoning piece, the reasoning pieces' tokens being its reasoning tokens.
 */
export function derivedUsage(request: ChatRequestBody, reply: StreamReply): ScriptedUsage {
  return derivedUsageOf(request.messages.length, reply)
}

/** `derivedUsage` by the number of input messages (or items). */
export function derivedUsageOf(inputs: number, reply: StreamReply): ScriptedUsage {
  const reasoning = 2 * (reply.reasoning?.length ?? 0)
  return {
    prompt: 50 + 10 * inputs,
    cached: inputs > 1 ? 40 : 0,
    completion: 5 + (reply.content?.length ?? 0) + 3 * (reply.toolCalls?.length ?? 0) + reasoning,
    reasoning,
  }
}

function chatUsage({ prompt, completion, cached = 0, reasoning = 0 }: ScriptedUsage): ChatUsage {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached },
    completion_tokens_details: { reasoning_tokens: reasoning },
  }
}

/** Streams the reply; returns the usage it sent (none when it hung or the client did not ask). */
function stream(res: ServerResponse, request: ChatRequestBody, reply: StreamReply, onHang: () => void): ChatUsage | undefined {
  openEventStream(res)
  const base = {
    id: 'chatcmpl-test',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: request.model,
    system_fingerprint: 'fp_test',
  }
  const send = (choices: unknown[], extra: Record<string, unknown> = {}): void => {
    res.write(`data: ${JSON.stringify({ ...base, choices, ...extra })}\n\n`)
  }
  const choice = (delta: Record<string, unknown>, finish: string | null = null): unknown => ({
    index: 0,
    delta,
    logprobs: null,
    finish_reason: finish,
  })
  send([choice({ role: 'assistant', content: '' })])
  for (const piece of reply.reasoning ?? []) send([choice({ reasoning_content: piece })])
  const content = reply.content ?? []
  for (let i = 0; i < content.length; i++) {
    if (reply.hangAfter !== undefined && i === reply.hangAfter) {
      onHang()
      return undefined
    }
    send([choice({ content: content[i] })])
  }
  if (reply.hangAfter !== undefined && reply.hangAfter >= content.length) {
    onHang()
    return undefined
  }
  const calls = reply.toolCalls ?? []
  calls.forEach((call, index) => {
    // An empty id is left out, as some servers do.
    send([
      choice({
        tool_calls: [{ index, ...(call.id === '' ? {} : { id: call.id }), type: 'function', function: { name: call.name, arguments: '' } }],
      }),
    ])
    // Arguments arrive in fragments, as real servers send them.
    for (let at = 0; at < call.arguments.length; at += 7) {
      send([choice({ tool_calls: [{ index, function: { arguments: call.arguments.slice(at, at + 7) } }] })])
    }
  })
  send([choice({}, reply.finish ?? (calls.length > 0 ? 'tool_calls' : 'stop'))])
  let usage: ChatUsage | undefined
  if (request.stream_options?.include_usage) {
    usage = chatUsage(reply.usage ?? derivedUsage(request, reply))
    send([], { usage })
  }
  res.write('data: [DONE]\n\n')
  res.end()
  return usage
}

/** OpenAI's `{ error: {...} }` body, shared by Chat Completions and Responses. */
export function openAIError(res: ServerResponse, status: number, detail: ErrorDetail, headers?: Readonly<Record<string, string>>): void {
  writeJson(
    res,
    status,
    { error: { message: detail.message, type: detail.type, param: detail.param ?? null, code: detail.code ?? null } },
    headers,
  )
}

export const chatProtocol: ModelProtocol = {
  name: 'chat',
  path: '/chat/completions',
  tokens: (body) => serverTokenCount(body as ChatRequestBody),
  error: openAIError,
  stream: (res, body, reply, onHang) => ({ usage: stream(res, body as ChatRequestBody, reply, onHang) }),
}
