import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * `@dsh/driver-openai/testing` — for tests only, never for production.
 *
 * The only fake in dsh's tests: a local HTTP server speaking the Chat
 * Completions protocol as the public API reference describes it — JSON
 * responses, SSE streams of `chat.completion.chunk` objects (`data: {...}`
 * frames ending with `data: [DONE]`), tool call deltas carrying
 * index/id/function.name and argument fragments, usage in a final chunk with
 * empty `choices` (`stream_options.include_usage`), `{ error: {...} }` bodies
 * and 429 with `retry-after`. It replays scripted replies; the real `openai`
 * client talks to it.
 *
 * Every completed stream asked for usage reports it, with
 * `prompt_tokens_details.cached_tokens` and
 * `completion_tokens_details.reasoning_tokens` (overlapping counts, as the
 * protocol has them: the prompt count includes the cached tokens, the
 * completion count the reasoning tokens). A reply without scripted usage gets
 * usage derived from the request and the reply (see `derivedUsage`). The
 * server keeps its own record of every usage object it sent (`reported`), so
 * a test can check what dsh stored against what the server said.
 */

export interface RecordedRequest {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage['headers']
  readonly body: ChatRequestBody
}

export interface ChatRequestBody {
  readonly model: string
  readonly stream?: boolean
  readonly messages: readonly { role: string; content?: string | null; tool_calls?: unknown[]; tool_call_id?: string }[]
  readonly tools?: readonly { type: string; function: { name: string; description?: string; parameters?: unknown } }[]
  readonly stream_options?: { include_usage?: boolean }
}

export interface ToolCallScript {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** Scripted usage in the protocol's overlapping terms: `cached` is part of `prompt`, `reasoning` part of `completion`. */
export interface ScriptedUsage {
  readonly prompt: number
  readonly completion: number
  readonly cached?: number
  readonly reasoning?: number
}

/** A usage object exactly as the server sent it in a final chunk. */
export interface ChatUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly prompt_tokens_details: { readonly cached_tokens: number }
  readonly completion_tokens_details: { readonly reasoning_tokens: number }
}

/** One usage report: which request (0-based, in arrival order) and what was sent. */
export interface ReportedUsage {
  readonly request: number
  readonly model: string
  readonly usage: ChatUsage
}

export type Reply =
  /** A streamed answer: reasoning deltas, content pieces, then tool calls (arguments split into fragments), then finish and usage. */
  | {
      readonly kind: 'stream'
      readonly reasoning?: readonly string[]
      readonly content?: readonly string[]
      readonly toolCalls?: readonly ToolCallScript[]
      readonly usage?: ScriptedUsage
      /** The `finish_reason` sent (default `tool_calls` when the reply calls tools, else `stop`). */
      readonly finish?: string
      /** Stream this many content pieces, then stop writing and keep the connection open (to abort or kill mid-stream). */
      readonly hangAfter?: number
    }
  /** An HTTP error with an OpenAI-style `{ error }` body. */
  | {
      readonly kind: 'error'
      readonly status: number
      readonly message: string
      readonly type?: string
      readonly headers?: Readonly<Record<string, string>>
    }

export type Responder = (request: RecordedRequest, index: number) => Reply | undefined

export interface ModelServer {
  /** The base URL to give the client (`http://127.0.0.1:<port>/v1`). */
  readonly baseURL: string
  readonly requests: RecordedRequest[]
  /** Every usage object the server sent, in order: the server's own record of what it reported. */
  readonly reported: ReportedUsage[]
  /** Resolves when a reply with `hangAfter` has written its pieces (the nth hang, counting from 1). */
  hung(nth?: number): Promise<void>
  close(): Promise<void>
}

export interface ModelServerOptions {
  /**
   * The model's window in the server's own tokens (`serverTokenCount`): a
   * request over it gets 400 `context_length_exceeded`, as providers answer.
   */
  readonly contextWindow?: number
}

/**
 * The server's own token count of a request, independent of any estimate
 * dsh makes: every word, digit and punctuation mark of the messages' text
 * (tool call names and arguments included) is one token, plus 3 per message.
 */
export function serverTokenCount(body: ChatRequestBody): number {
  let tokens = 0
  for (const message of body.messages) {
    const text = `${typeof message.content === 'string' ? message.content : JSON.stringify(message.content ?? '')}${JSON.stringify(message.tool_calls ?? [])}`
    tokens += 3 + (text.match(/[A-Za-z]+|\d|[^\sA-Za-z\d]/g)?.length ?? 0)
  }
  return tokens
}

/** Serves `replies` in order (or asks `responder` per request); an unscripted request gets a 500 naming it. */
export async function startModelServer(script: readonly Reply[] | Responder, options: ModelServerOptions = {}): Promise<ModelServer> {
  const requests: RecordedRequest[] = []
  const reported: ReportedUsage[] = []
  const responder: Responder = typeof script === 'function' ? script : (_request, index) => script[index]
  let hangs = 0
  const hangListeners: { nth: number; resolve: () => void }[] = []
  const open = new Set<ServerResponse>()

  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = []
    req.on('data', (part: Buffer) => parts.push(part))
    req.on('end', () => {
      open.add(res)
      res.on('close', () => open.delete(res))
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        return json(res, 404, {
          error: { message: `No route ${req.method} ${req.url}`, type: 'invalid_request_error', param: null, code: null },
        })
      }
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as ChatRequestBody
      const request = { method: req.method, url: req.url, headers: req.headers, body }
      const index = requests.length
      requests.push(request)
      const tokens = options.contextWindow === undefined ? 0 : serverTokenCount(body)
      if (options.contextWindow !== undefined && tokens > options.contextWindow) {
        const message = `This model's maximum context length is ${options.contextWindow} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`
        return json(res, 400, { error: { message, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } })
      }
      const reply = responder(request, index)
      if (reply === undefined)
        return json(res, 500, { error: { message: `unscripted request #${index}`, type: 'server_error', param: null, code: null } })
      if (reply.kind === 'error') {
        res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers })
        res.end(JSON.stringify({ error: { message: reply.message, type: reply.type ?? 'invalid_request_error', param: null, code: null } }))
        return
      }
      const usage = stream(res, body, reply, () => {
        hangs++
        for (const listener of hangListeners.filter((l) => l.nth === hangs)) listener.resolve()
      })
      if (usage !== undefined) reported.push({ request: index, model: body.model, usage })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    reported,
    hung(nth = 1) {
      if (hangs >= nth) return Promise.resolve()
      return new Promise((resolve) => hangListeners.push({ nth, resolve }))
    },
    async close() {
      for (const res of open) res.destroy()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
    },
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

/**
 * The usage of a reply that scripts none, from the request and the reply:
 * the prompt is 50 tokens plus 10 per message, of which 40 are cached once
 * the conversation has more than one message (a repeated prefix); the
 * completion is 5 plus one per content piece, 3 per tool call and 2 per
 * reasoning piece, the reasoning pieces' tokens being its reasoning tokens.
 */
export function derivedUsage(request: ChatRequestBody, reply: Extract<Reply, { kind: 'stream' }>): ScriptedUsage {
  const reasoning = 2 * (reply.reasoning?.length ?? 0)
  return {
    prompt: 50 + 10 * request.messages.length,
    cached: request.messages.length > 1 ? 40 : 0,
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
function stream(
  res: ServerResponse,
  request: ChatRequestBody,
  reply: Extract<Reply, { kind: 'stream' }>,
  onHang: () => void,
): ChatUsage | undefined {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
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

/** A streamed text answer split into pieces. */
export function answer(pieces: readonly string[], usage?: ScriptedUsage, reasoning?: readonly string[]): Reply {
  return { kind: 'stream', content: pieces, ...(usage === undefined ? {} : { usage }), ...(reasoning === undefined ? {} : { reasoning }) }
}

/** A streamed step that calls tools. */
export function callTools(calls: readonly ToolCallScript[], usage?: ScriptedUsage): Reply {
  return { kind: 'stream', toolCalls: calls, ...(usage === undefined ? {} : { usage }) }
}
